package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/client"
)

// fanoutEnv sets the size of TestWatchFanout: "full" for the 1,000
// watchers and 10,000 updates, or "<watchers>x<updates>".
const fanoutEnv = "LISTWATCH_E2E_FANOUT"

// defaultFanout keeps the test within seconds with -race on two shared
// cores (a delivery costs about 0.3 ms of CPU under the race detector,
// mostly the write and read system calls of the two ends and the client's
// decoding); the full size is for a deliberate run. 400 updates are more
// than the stalled watcher's server-side buffer (watchcache's default 256)
// and its shrunk sockets hold, so that it is cut off at the default size
// too.
var (
	defaultFanout = fanoutSize{watchers: 100, updates: 400}
	fullFanout    = fanoutSize{watchers: 1000, updates: 10000}
)

type fanoutSize struct{ watchers, updates int }

func fanoutSizeFromEnv(t *testing.T) fanoutSize {
	t.Helper()
	v := os.Getenv(fanoutEnv)
	switch v {
	case "":
		return defaultFanout
	case "full":
		return fullFanout
	}
	ws, us, ok := strings.Cut(v, "x")
	w, err1 := strconv.Atoi(ws)
	u, err2 := strconv.Atoi(us)
	if !ok || err1 != nil || err2 != nil || w < 1 || u < 1 {
		t.Fatalf("%s=%q: want full or <watchers>x<updates>", fanoutEnv, v)
	}
	return fanoutSize{w, u}
}

// stalledIP is the loopback address the stalled watcher connects from, so
// that the server side can tell its connection apart.
var stalledIP = net.IPv4(127, 0, 0, 2)

// stallBuffer is the socket buffer size of the stalled watcher's
// connection, on both ends. Loopback sockets otherwise buffer megabytes,
// which at the default size would hold every event the stalled watcher is
// sent and hide the cut-off: the server's per-watcher buffer never fills
// while the kernel takes everything.
const stallBuffer = 4096

// shrinkStalled shrinks the send buffer of connections from stalledIP.
type shrinkStalled struct{ net.Listener }

func (l shrinkStalled) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok && tc.RemoteAddr().(*net.TCPAddr).IP.Equal(stalledIP) {
		_ = tc.SetWriteBuffer(stallBuffer)
	}
	return c, nil
}

// TestWatchFanout runs one API server over an embedded etcd with many
// concurrent pod watchers over HTTP on 127.0.0.1 while writers update pods,
// twice: first with every watcher reading, then with one more watcher that
// stops reading its response body. Every reading watcher receives every
// update, once, in resourceVersion order, on the one watch it opened: a
// watcher that keeps up is never cut off (the writers stay within maxLag of
// the slowest reader, far inside its server-side buffer, so a cut-off would
// be the server's fault, never the load's). The stalled watcher is cut off
// by the server, having received a gap-free prefix of the updates, and the
// others finish all the same. Delivery latency (write acknowledged → event
// decoded by the watcher) is logged for both runs and bounded by
// maxDeliveryP99: not a performance figure (bench/ measures those) but a
// liveness bound, far above any healthy run, that a watcher starved behind
// the others or a stalled one would break.
// maxDeliveryP99 bounds the 99th percentile of the time from a write's
// acknowledgement to its event reaching a watcher that keeps up, on a
// loaded 2-core machine under the race detector included: healthy runs
// are two orders of magnitude under it.
const maxDeliveryP99 = 10 * time.Second

func TestWatchFanout(t *testing.T) {
	size := fanoutSizeFromEnv(t)
	checkFileLimit(t, 2*size.watchers+200)

	members := startEtcd(t, 1)
	srv := startInProcess(t, openStore(t, endpoints(members)), apiserver.WatchCacheConfig{},
		func(l net.Listener) net.Listener { return shrinkStalled{l} })
	writeClient := newClient(t, srv.URL, nil)
	watchClient := newClient(t, srv.URL, nil)

	// The updates go round-robin over a set of pods, each owned by one
	// writer so that no update conflicts.
	const writers = 4
	objs := make([]*corev1.Pod, min(100, size.updates))
	for i := range objs {
		p, err := podsOf(writeClient).Create(t.Context(), newPod(fmt.Sprintf("fan-%03d", i)), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		objs[i] = p
	}

	for _, stalled := range []bool{false, true} {
		name := "all reading"
		if stalled {
			name = "one stalled"
		}
		t.Run(name, func(t *testing.T) {
			r := runFanout(t, srv.URL, podsOf(writeClient), podsOf(watchClient), objs, writers, size, stalled)
			t.Logf("%d watchers x %d updates (%d writers): %d deliveries in %v (%.0f/s)",
				size.watchers, size.updates, writers, size.watchers*size.updates, r.elapsed.Round(time.Millisecond),
				float64(size.watchers*size.updates)/r.elapsed.Seconds())
			t.Logf("latency ack->receive: p50 %v p99 %v max %v; send->receive: p50 %v p99 %v",
				r.ackLat.p(50), r.ackLat.p(99), r.ackLat.p(100), r.sendLat.p(50), r.sendLat.p(99))
			if p99 := r.ackLat.p(99); p99 > maxDeliveryP99 {
				t.Errorf("p99 delivery latency to watchers that keep up: %v, bound %v", p99, maxDeliveryP99)
			}
		})
	}
}

// checkFileLimit fails the test when the process may not open n files:
// every watch is a connection, with both of its ends in this process.
func checkFileLimit(t *testing.T, n int) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// Go raises the soft limit to the hard one at start-up.
	if lim.Cur < uint64(n) {
		t.Fatalf("open file limit %d, the test needs about %d: raise it (ulimit -n %d)", lim.Cur, n, n)
	}
}

// latencies are delivery latencies, sorted.
type latencies []time.Duration

func (l latencies) p(pct int) time.Duration {
	if len(l) == 0 {
		return 0
	}
	return l[min(len(l)-1, len(l)*pct/100)]
}

// maxLag is how far the writers may get ahead of the slowest reading
// watcher: well within a watcher's server-side buffer (watchcache's
// default 256), so that a reading watcher is never cut off for the
// writers' speed alone.
const maxLag = 64

type fanoutResult struct {
	elapsed         time.Duration
	ackLat, sendLat latencies
}

// received is one event as a watcher got it: its resourceVersion and when,
// in nanoseconds since the run's start.
type received struct{ rv, at int64 }

func runFanout(t *testing.T, url string, writePods, watchPods *client.Resource[*corev1.Pod], objs []*corev1.Pod, writers int, size fanoutSize, stalled bool) fanoutResult {
	// Every watcher starts at the resourceVersion of the last write so far.
	var rv0 int64
	for _, p := range objs {
		rv0 = max(rv0, parseRV(p.ResourceVersion))
	}
	from := strconv.FormatInt(rv0, 10)
	base := time.Now()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	var stall *stalledWatch
	if stalled {
		stall = startStalled(t, ctx, url, from)
		defer stall.close()
	}

	var (
		ready, done sync.WaitGroup
		errs        = make(chan error, size.watchers+writers)
	)
	// fail reports the first failure and stops everyone: writers waiting
	// for a watcher that has given up would otherwise wait forever.
	fail := func(err error) {
		errs <- err
		cancel()
	}
	got := make([][]received, size.watchers)
	counts := make([]atomic.Int64, size.watchers)
	for i := range size.watchers {
		ready.Add(1)
		done.Go(func() {
			recs := make([]received, 0, size.updates)
			defer func() { got[i] = recs }()
			w, err := watchPods.Watch(ctx, metav1.ListOptions{ResourceVersion: from})
			ready.Done()
			if err != nil {
				fail(fmt.Errorf("watcher %d: watch from %s: %w", i, from, err))
				return
			}
			defer w.Stop()
			for len(recs) < size.updates {
				ev, err := w.Next()
				if err != nil {
					if ctx.Err() == nil {
						// No re-watch: a watcher that keeps up must never
						// be cut off.
						fail(fmt.Errorf("watcher %d: its watch ended after %d of %d updates: %w", i, len(recs), size.updates, err))
					}
					return
				}
				if ev.Status != nil {
					fail(fmt.Errorf("watcher %d: %s after %d of %d updates", i, ev.Status.Message, len(recs), size.updates))
					return
				}
				recs = append(recs, received{parseRV(ev.Object.ResourceVersion), int64(time.Since(base))})
				counts[i].Add(1)
			}
		})
	}
	ready.Wait()

	// Writers: each updates its own pods in turn, recording when each
	// update was sent and acknowledged. They stay at most maxLag updates
	// ahead of the slowest reading watcher (the stalled one is not
	// counted), so that the latency measured is the delivery's and not the
	// time spent queued behind a backlog that unthrottled writers build, and
	// so that both runs see the same load whatever the machine's speed.
	slowest := func() int64 {
		m := counts[0].Load()
		for i := range counts {
			m = min(m, counts[i].Load())
		}
		return m
	}
	keepUp := func(n int) bool {
		for int64(n-maxLag) > slowest() {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(100 * time.Microsecond):
			}
		}
		return true
	}
	type sent struct{ rv, sent, acked int64 }
	acks := make([][]sent, writers)
	start := time.Now()
	var wg sync.WaitGroup
	for k := range writers {
		wg.Go(func() {
			var own []*corev1.Pod
			for i := k; i < len(objs); i += writers {
				own = append(own, objs[i])
			}
			for n := k; n < size.updates; n += writers {
				if !keepUp(n) {
					return
				}
				j := (n / writers) % len(own)
				p := own[j].DeepCopy()
				p.Labels["gen"] = strconv.Itoa(n)
				at := int64(time.Since(base))
				up, err := writePods.Update(ctx, p, metav1.UpdateOptions{})
				if err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("update %s: %w", p.Name, err))
					}
					return
				}
				acks[k] = append(acks[k], sent{parseRV(up.ResourceVersion), at, int64(time.Since(base))})
				own[j] = up
			}
			// Leave the pods as they are now for the next run.
			for i, p := range own {
				objs[k+i*writers] = p
			}
		})
	}
	// A guard against a hang, scaled for slow machines: a delivery takes
	// well under a millisecond.
	guard := max(waitTimeout, time.Duration(size.watchers*size.updates)*time.Millisecond)
	finished := make(chan struct{})
	go func() { wg.Wait(); done.Wait(); close(finished) }()
	select {
	case <-finished:
	case err := <-errs:
		cancel()
		<-finished
		t.Fatal(err)
	case <-time.After(guard):
		cancel()
		<-finished
		t.Fatalf("watchers did not receive %d updates within %v", size.updates, guard)
	}
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	var all []sent
	for _, a := range acks {
		all = append(all, a...)
	}
	slices.SortFunc(all, func(a, b sent) int { return int(a.rv - b.rv) })
	want := make([]int64, len(all))
	byRV := make(map[int64]sent, len(all))
	for i, s := range all {
		want[i] = s.rv
		byRV[s.rv] = s
	}
	r := fanoutResult{elapsed: elapsed}
	r.ackLat = make(latencies, 0, size.watchers*size.updates)
	r.sendLat = make(latencies, 0, size.watchers*size.updates)
	for i, recs := range got {
		rvs := make([]int64, len(recs))
		for j, rec := range recs {
			rvs[j] = rec.rv
			s := byRV[rec.rv]
			r.ackLat = append(r.ackLat, time.Duration(rec.at-s.acked))
			r.sendLat = append(r.sendLat, time.Duration(rec.at-s.sent))
		}
		if !slices.Equal(rvs, want) {
			t.Fatalf("watcher %d received %d events, not the %d updates in resourceVersion order (first difference at %d)",
				i, len(rvs), len(want), firstDiff(rvs, want))
		}
	}
	slices.Sort(r.ackLat)
	slices.Sort(r.sendLat)

	if stall != nil {
		stall.check(t, want)
	}
	return r
}

func firstDiff(a, b []int64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// stalledWatch is a watch whose client stops reading its response body
// once the headers arrived.
type stalledWatch struct {
	resp *http.Response
	hc   *http.Client
}

// startStalled opens a JSON watch of the pods from rv on a connection from
// stalledIP with a small receive buffer, and reads nothing of it.
func startStalled(t *testing.T, ctx context.Context, url, rv string) *stalledWatch {
	t.Helper()
	dialer := &net.Dialer{
		LocalAddr: &net.TCPAddr{IP: stalledIP},
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, stallBuffer)
			})
			return errors.Join(err, serr)
		},
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/namespaces/default/pods?watch=true&resourceVersion="+rv, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("stalled watch from %s: %v", stalledIP, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("stalled watch: %s", resp.Status)
	}
	return &stalledWatch{resp: resp, hc: hc}
}

func (s *stalledWatch) close() {
	s.resp.Body.Close()
	s.hc.CloseIdleConnections()
}

// check reads what the stalled watch was sent until its stream ends: the
// server must have ended it before all of want was delivered, and what it
// delivered must be a gap-free, ordered prefix of want.
func (s *stalledWatch) check(t *testing.T, want []int64) {
	t.Helper()
	type result struct {
		rvs []int64
		err error
	}
	res := make(chan result, 1)
	go func() {
		var r result
		sc := bufio.NewScanner(s.resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Metadata struct {
						ResourceVersion string `json:"resourceVersion"`
					} `json:"metadata"`
				} `json:"object"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				r.err = err
				break
			}
			r.rvs = append(r.rvs, parseRV(ev.Object.Metadata.ResourceVersion))
		}
		if r.err == nil {
			r.err = sc.Err() // nil: the server ended the response
		}
		res <- r
	}()
	var r result
	select {
	case r = <-res:
	case <-time.After(waitTimeout):
		s.resp.Body.Close()
		<-res
		t.Fatalf("the stalled watch was not ended by the server within %v of reading again", waitTimeout)
	}
	ending := "the server ended the response"
	if r.err != nil {
		ending = fmt.Sprintf("the connection broke (%v)", r.err)
	}
	if len(r.rvs) >= len(want) {
		t.Errorf("the stalled watcher received all %d updates: it was never cut off", len(want))
	}
	if !slices.Equal(r.rvs, want[:min(len(r.rvs), len(want))]) {
		t.Errorf("the stalled watcher's %d events are not a prefix of the updates (first difference at %d)", len(r.rvs), firstDiff(r.rvs, want))
	}
	t.Logf("stalled watcher: cut off after %d of %d updates; %s", len(r.rvs), len(want), ending)
}
