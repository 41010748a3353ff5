package apiserver

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	kubestorage "k8s.io/apiserver/pkg/storage"

	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/apiserver/internal/wire"
	"github.com/listwatch/listwatch/watchcache"
)

// minWatchTimeout is kube-apiserver's --min-request-timeout default: a
// watch without timeoutSeconds lasts between one and two of it, so that
// clients spread their re-watches.
const minWatchTimeout = 30 * time.Minute

// DefaultWatchWriteTimeout bounds one write to a watch client
// (Config.WatchWriteTimeout): a client that reads nothing for this long is
// dropped (its watcher was already cut off by the cache when its buffer
// filled), as kube-apiserver drops it after a minute.
const DefaultWatchWriteTimeout = time.Minute

type watchEvent = watchcache.Event[*unstructured.Unstructured]

func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request, req request) error {
	o, err := s.collectionOptions(r, req, true)
	if err != nil {
		return err
	}
	enc, tv, err := negotiateTable(r, req.res, true)
	if err != nil {
		return err
	}
	var tab *tabler
	if enc == encTable {
		if tab, err = newTabler(r, req.res, tv); err != nil {
			return err
		}
	}
	// As kube-apiserver's: none is a random one, and a negative one has
	// passed already (the stream ends at once, empty).
	timeout := time.Duration(o.timeoutSeconds) * time.Second
	if timeout == 0 {
		timeout = minWatchTimeout + rand.N(minWatchTimeout)
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if enc == encProtobuf {
		// From now on writes leave their Go objects for this watch's
		// events (registry.Cache.LeaveHint).
		defer s.cacheFor(req.res).WatchProtobuf()()
	}
	// Like kube-apiserver, a watch that cannot start (410 Expired, 504
	// too large) is answered with an ERROR event in a 200 stream;
	// clients relist on it.
	streamErr, err := s.stalledWatch(ctx, req, o)
	if err != nil {
		return err
	}
	var wch *watchcache.Watcher[*unstructured.Unstructured]
	if streamErr == nil {
		wch, err = s.cacheFor(req.res).Watch(ctx, watchcache.WatchOptions{
			ResourceVersion:      o.rv,
			ResourceVersionMatch: o.rvMatch,
			SendInitialEvents:    o.sendInitialEvents,
			AllowBookmarks:       o.bookmarks,
			Label:                o.filter.labels,
			Field:                o.filter.fields,
			Shard:                o.shard,
			Namespace:            req.namespace,
		})
		if err != nil {
			var st apierrors.APIStatus
			if !errors.As(err, &st) || (st.Status().Code != http.StatusGone && st.Status().Code != http.StatusGatewayTimeout) {
				return err
			}
			streamErr = err
		}
	}
	ww := newWatchWriter(w, enc, req.res)
	defer ww.close()
	ww.writeTimeout = s.watchWriteTimeout()
	ww.tab = tab
	if err := ww.start(); err != nil {
		return nil
	}
	if streamErr != nil {
		_ = ww.writeError(streamErr)
		return nil
	}
	defer wch.Stop()
	events := wch.Events()
	for ev := range events {
		open, err := ww.writeBatch(ev, events)
		if err != nil {
			s.log.Debug("watch client gone", "path", r.URL.Path, "err", err)
			return nil
		}
		if !open {
			break
		}
	}
	if err := wch.Err(); err != nil {
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			_ = ww.writeError(err)
		} else {
			// Too slow or the cache closing: end the stream; the client
			// watches again from its last resourceVersion.
			s.log.Debug("watch ended", "path", r.URL.Path, "err", err)
		}
	}
	return nil
}

// watchWriter frames watch events on the response: JSON lines or
// length-prefixed protobuf WatchEvents, flushed one by one.
type watchWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	enc encoding
	res *resource
	// tab renders each event's object as a one-row Table (kubectl get
	// -w); only the first event carries the column definitions.
	tab        *tabler
	sentHeader bool
	// writeTimeout bounds each write (DefaultWatchWriteTimeout).
	writeTimeout time.Duration
	// stall is armed while a write is under way, and ends it when it has
	// been blocked for writeTimeout (stalled). Setting a write deadline
	// before each batch and lifting it after did the same at a cost: over
	// HTTP/2 each goes through the connection's serving goroutine and
	// makes a timer. hack/watch-fanout.sh (1,000 watchers, 50 updates/s,
	// CPU profiles): SetWriteDeadline was 4.9-5.3% of the server's CPU,
	// the timer's Reset and Stop are 1.3%.
	stall   *time.Timer
	stallMu sync.Mutex // held by stalled; done set under it
	done    bool       // the watch has returned: its response is not to be touched
	writing bool       // under stallMu: a write is under way
}

// watchWriteTimeout is Config.WatchWriteTimeout or its default.
func (s *Server) watchWriteTimeout() time.Duration {
	if s.cfg.WatchWriteTimeout > 0 {
		return s.cfg.WatchWriteTimeout
	}
	return DefaultWatchWriteTimeout
}

func newWatchWriter(w http.ResponseWriter, enc encoding, res *resource) *watchWriter {
	return &watchWriter{w: w, rc: http.NewResponseController(w), enc: enc, res: res, writeTimeout: DefaultWatchWriteTimeout}
}

func (ww *watchWriter) start() error {
	if ww.enc == encProtobuf {
		ww.w.Header().Set("Content-Type", respond.MediaProtobuf+";stream=watch")
	} else {
		ww.w.Header().Set("Content-Type", respond.MediaJSON)
	}
	ww.w.Header().Set("Cache-Control", "no-cache, private")
	ww.w.WriteHeader(http.StatusOK)
	return ww.rc.Flush()
}

func (ww *watchWriter) send(frame []byte) error {
	ww.beginWrite()
	defer ww.endWrite()
	if _, err := ww.w.Write(frame); err != nil {
		return err
	}
	return ww.rc.Flush()
}

// beginWrite arms ww's write timeout for the write that follows, and
// endWrite disarms it: the timeout bounds a write, not the quiet between
// events.
func (ww *watchWriter) beginWrite() {
	ww.stallMu.Lock()
	ww.writing = true
	ww.stallMu.Unlock()
	if ww.stall == nil {
		ww.stall = time.AfterFunc(ww.writeTimeout, ww.stalled)
		return
	}
	ww.stall.Reset(ww.writeTimeout)
}

func (ww *watchWriter) endWrite() {
	ww.stall.Stop()
	ww.stallMu.Lock()
	ww.writing = false
	ww.stallMu.Unlock()
}

// stalled ends the write under way, blocked for writeTimeout: a write
// deadline already passed fails it at once (over HTTP/2 it resets the
// stream), and the watch ends.
func (ww *watchWriter) stalled() {
	ww.stallMu.Lock()
	defer ww.stallMu.Unlock()
	if ww.writing && !ww.done {
		_ = ww.rc.SetWriteDeadline(time.Now().Add(-time.Second))
	}
}

// close disarms ww for good, before its handler returns: the response
// must not be touched after.
func (ww *watchWriter) close() {
	ww.stallMu.Lock()
	defer ww.stallMu.Unlock()
	ww.done = true
	if ww.stall != nil {
		ww.stall.Stop()
	}
}

// Batching bounds: a batch is written to the connection whenever it holds
// batchBytes, and flushed after at most batchEvents events, so that a
// watcher that is always behind still sees its events promptly.
const (
	batchBytes  = 32 << 10
	batchEvents = 256
)

// batchPool holds the buffers batches are assembled in; a watcher holds one
// only while writing, so idle watchers cost no buffer.
var batchPool = sync.Pool{New: func() any { b := make([]byte, 0, batchBytes+4<<10); return &b }}

// writeBatch writes first and every event already pending in events, then
// flushes once: a burst costs one flush (and few writes) instead of one per
// event, and a lone event is written and flushed at once, adding no
// latency. open is false when events was found closed.
func (ww *watchWriter) writeBatch(first *watchEvent, events <-chan *watchEvent) (open bool, err error) {
	frame, err := ww.frame(first)
	if err != nil {
		return true, err
	}
	if len(events) == 0 {
		return true, ww.send(frame)
	}
	ww.beginWrite()
	defer ww.endWrite()
	bp := batchPool.Get().(*[]byte)
	defer func() {
		*bp = (*bp)[:0]
		batchPool.Put(bp)
	}()
	buf := append((*bp)[:0], frame...)
	open = true
drain:
	for n := 1; n < batchEvents; n++ {
		select {
		case ev, ok := <-events:
			if !ok {
				open = false
				break drain
			}
			if frame, err = ww.frame(ev); err != nil {
				return open, err
			}
			buf = append(buf, frame...)
			if len(buf) >= batchBytes {
				if _, err := ww.w.Write(buf); err != nil {
					return open, err
				}
				buf = buf[:0]
			}
		default:
			break drain
		}
	}
	*bp = buf
	if len(buf) > 0 {
		if _, err := ww.w.Write(buf); err != nil {
			return open, err
		}
	}
	return open, ww.rc.Flush()
}

// frame returns ev framed for this watcher. Frames are memoized on the
// event under a key naming everything they depend on, so an event fanned
// out to many watchers is framed once per encoding; the object inside is
// itself serialized once per format for as long as the cache holds it.
func (ww *watchWriter) frame(ev *watchEvent) ([]byte, error) {
	if ww.tab != nil {
		if !ww.sentHeader {
			// The first Table event carries the column definitions: it
			// is this watcher's own.
			return ww.tableEvent(ev)
		}
		return ev.Encode("table/"+string(ww.tab.version)+"/"+string(ww.tab.include), ww.tableEvent)
	}
	if ww.enc == encProtobuf {
		return ev.Encode("protobuf", func(ev *watchEvent) ([]byte, error) {
			msg, err := wire.EventProto(ev, ww.res.GVK)
			if err != nil {
				return nil, err
			}
			return wire.ProtoEventFrame(ev.Type, ww.res.APIVersion(), ww.res.GVK.Kind, msg), nil
		})
	}
	return ev.Encode("json", func(ev *watchEvent) ([]byte, error) {
		obj, err := wire.EventJSON(ev, ww.res.ServedAsStored())
		if err != nil {
			return nil, err
		}
		return wire.JSONEventFrame(ev.Type, obj), nil
	})
}

// tableEvent frames ev with its object as a Table: a one-row Table for
// object events, an empty one carrying the resourceVersion for BOOKMARKs.
func (ww *watchWriter) tableEvent(ev *watchEvent) ([]byte, error) {
	if ev.Type == watch.Bookmark {
		tbl, err := ww.tab.table(nil, metav1.ListMeta{ResourceVersion: ev.Object().GetResourceVersion()}, false)
		if err != nil {
			return nil, err
		}
		return wire.JSONEvent(ev.Type, tbl)
	}
	obj := ev.Object()
	tbl, err := ww.tab.table([]*unstructured.Unstructured{obj}, metav1.ListMeta{ResourceVersion: obj.GetResourceVersion()}, !ww.sentHeader)
	if err != nil {
		return nil, err
	}
	// Only this watcher's goroutine reads or sets sentHeader; a frame
	// memoized for other watchers is built with it already set.
	ww.sentHeader = true
	return wire.JSONEvent(ev.Type, tbl)
}

// writeError sends an ERROR event carrying err as a Status.
func (ww *watchWriter) writeError(err error) error {
	st := statusOf(err)
	st.Kind, st.APIVersion = "Status", "v1"
	var frame []byte
	if ww.enc == encProtobuf {
		frame, err = wire.ProtoEvent(watch.Error, &st)
	} else {
		frame, err = wire.JSONEvent(watch.Error, &st)
	}
	if err != nil {
		return err
	}
	return ww.send(frame)
}

// stalledWait is how long kube-apiserver's watch cache lets a read that
// needs it as fresh as storage wait for it (its blockTimeout).
const stalledWait = 3 * time.Second

// stalledWatch is the error kube-apiserver's watch of req's collection
// with options o starts with when its watch cache has stopped at an
// object it cannot decode (a custom resource whose conversion webhook
// fails): a watch from now (no resourceVersion, which the WatchList
// feature makes a consistent read) waits for the cache to reach storage's
// revision and, as the cache stays before that object, fails with 504 Too
// large resource version, sooner when ctx (the watch's timeout) ends
// first. nil when the watch starts as usual; err is storage's.
func (s *Server) stalledWatch(ctx context.Context, req request, o listOptions) (streamErr, err error) {
	if o.rv != "" || !s.gates().watchList || (o.sendInitialEvents != nil && !*o.sendInitialEvents) {
		return nil, nil
	}
	errs, first, err := s.stillUndecodable(ctx, req)
	if err != nil || len(errs) == 0 {
		return nil, err
	}
	rev, err := s.cfg.Storage.Revision(ctx)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(stalledWait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return kubestorage.NewTooLargeResourceVersionError(uint64(rev), uint64(first-1), 1), nil
}
