package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"
)

// annotation is the pods' annotation the writer sets on every update:
// "POD/SEQ/NANOS", the pod's index, the update's sequence number among
// that pod's updates (from 1), and the time the patch was sent in Unix
// nanoseconds.
const annotation = "watchload.listwatch.dev/update"

// window is the measured time, as Unix nanoseconds of the updates' send
// times: an update sent in [from, to) is measured. It is set before the
// first update is sent; until then nothing is measured.
type window struct{ from, to atomic.Int64 }

func (w *window) contains(t int64) bool { return t >= w.from.Load() && t < w.to.Load() }

// watcher is one watch of the namespace's pods, re-established from its
// last resourceVersion whenever the server ends it. Its fields other than
// received are its goroutine's until run returns.
type watcher struct {
	c      *client
	http   *http.Client
	pods   int
	window *window

	// last is the sequence number of the last update seen of each pod.
	last []int32
	// lat holds the delivery latency of each measured update, in
	// microseconds.
	lat []int32
	// received counts the updates seen (each pod's sequence moving on);
	// read by the run while it waits for the watchers to catch up.
	received atomic.Int64
	// delivered counts the measured updates seen.
	delivered int64
	// missed counts the updates skipped in a pod's sequence; outOfOrder
	// those seen again or after a later one.
	missed, outOfOrder int64
	// ended counts the watches the server ended, by reason.
	ended map[string]int
	// bytes and events count what the watches carried.
	bytes, events int64
	// proto is the HTTP version of the first watch's response.
	proto string
}

func newWatcher(c *client, hc *http.Client, pods int, w *window, expect int) *watcher {
	return &watcher{c: c, http: hc, pods: pods, window: w, last: make([]int32, pods), lat: make([]int32, 0, expect), ended: map[string]int{}}
}

// errRelist marks the end of a watch that cannot be continued from its
// last resourceVersion (an ERROR event, such as 410 Expired).
var errRelist = errors.New("relist")

// run watches from resourceVersion rv until ctx ends, calling established
// once, when the first watch's response headers have arrived. A watch the
// server ends is counted and watched again from the last resourceVersion
// seen, or from a fresh list's after an ERROR event.
func (w *watcher) run(ctx context.Context, rv string, established func()) {
	for {
		next, err := w.watch(ctx, rv, established)
		if ctx.Err() != nil {
			return
		}
		w.ended[reason(err)]++
		if next != "" {
			rv = next
		}
		if errors.Is(err, errRelist) {
			for {
				if rv, err = w.c.listRV(ctx); err == nil || ctx.Err() != nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if ctx.Err() != nil {
				return
			}
		}
		if next == "" {
			// The watch did not start: do not hammer the server.
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// watch makes one watch from rv and reads its events until it ends, and
// returns the last resourceVersion it saw ("" for none) and why it ended.
func (w *watcher) watch(ctx context.Context, rv string, established func()) (last string, err error) {
	q := url.Values{"watch": {"1"}, "resourceVersion": {rv}, "allowWatchBookmarks": {"true"}}
	req, err := w.c.request(ctx, http.MethodGet, w.c.podsPath()+"?"+q.Encode(), nil)
	if err != nil {
		return "", err
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return "", fmt.Errorf("watch: %s: %s", resp.Status, b)
	}
	if w.proto == "" {
		w.proto = resp.Proto
		established()
	}
	dec := newEventDecoder(resp.Body, annotation)
	defer func() { w.bytes += dec.n }()
	var ev event
	for {
		if err := dec.next(&ev); err != nil {
			if err == io.EOF {
				err = errEOF
			}
			return last, err
		}
		w.events++
		if string(ev.typ) == "ERROR" {
			return last, fmt.Errorf("%w: %s", errRelist, errorEvent(ev.frame))
		}
		if len(ev.rv) > 0 {
			last = string(ev.rv)
		}
		if ev.stamp != nil {
			w.update(ev.stamp)
		}
	}
}

// errEOF is a watch stream the server ended cleanly.
var errEOF = errors.New("stream ended (EOF)")

// update records the update whose annotation is s.
func (w *watcher) update(s []byte) {
	now := time.Now().UnixNano()
	pod, seq, sent, ok := parseStamp(s)
	if !ok || pod < 0 || pod >= int64(w.pods) {
		w.outOfOrder++
		return
	}
	last := int64(w.last[pod])
	if seq <= last {
		w.outOfOrder++
		return
	}
	w.missed += seq - last - 1
	w.last[pod] = int32(seq)
	w.received.Add(1)
	if w.window.contains(sent) {
		w.delivered++
		w.lat = append(w.lat, int32(min(max(now-sent, 0)/1e3, 1<<31-1)))
	}
}

// parseStamp parses an annotation value "POD/SEQ/NANOS".
func parseStamp(s []byte) (pod, seq, sent int64, ok bool) {
	var f [3]int64
	n := 0
	for i := 0; n < 3; n++ {
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return 0, 0, 0, false
		}
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			f[n] = f[n]*10 + int64(s[i]-'0')
		}
		if n < 2 {
			if i >= len(s) || s[i] != '/' {
				return 0, 0, 0, false
			}
			i++
		} else if i != len(s) {
			return 0, 0, 0, false
		}
	}
	return f[0], f[1], f[2], true
}

// errorEvent describes an ERROR event by its Status' code and reason.
func errorEvent(frame []byte) string {
	var e struct {
		Object struct {
			Code   int    `json:"code"`
			Reason string `json:"reason"`
		} `json:"object"`
	}
	if err := json.Unmarshal(frame, &e); err != nil {
		return "ERROR event " + string(clip(frame, 200))
	}
	return "ERROR event " + strconv.Itoa(e.Object.Code) + " " + e.Object.Reason
}

// streamID is the part of an HTTP/2 error that differs between streams.
var streamID = regexp.MustCompile(`stream ID \d+`)

// reason names why a watch ended, the same for every watch that ended so.
func reason(err error) string {
	if err == nil {
		return "unknown"
	}
	return streamID.ReplaceAllString(err.Error(), "stream ID N")
}
