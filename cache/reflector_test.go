package cache_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/client"
)

type podSource = cachetest.Source[*corev1.Pod]

func newPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// recStore is a Store that also records what the Reflector did to it.
type recStore struct {
	cache.Store[*corev1.Pod]
	mu       sync.Mutex
	ops      []string
	replaces int
	resyncs  int
}

func newRecStore() *recStore { return &recStore{Store: cache.NewStore[*corev1.Pod](nil)} }

func (s *recStore) record(op string, p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops = append(s.ops, fmt.Sprintf("%s %s/%s@%s", op, p.Namespace, p.Name, p.ResourceVersion))
}

// do records op when the store accepted it.
func (s *recStore) do(op string, p *corev1.Pod, f func(*corev1.Pod) error) error {
	if err := f(p); err != nil {
		return err
	}
	s.record(op, p)
	return nil
}

func (s *recStore) Add(p *corev1.Pod) error    { return s.do("add", p, s.Store.Add) }
func (s *recStore) Update(p *corev1.Pod) error { return s.do("update", p, s.Store.Update) }
func (s *recStore) Delete(p *corev1.Pod) error { return s.do("delete", p, s.Store.Delete) }
func (s *recStore) Replace(l []*corev1.Pod, rv string) error {
	s.mu.Lock()
	s.replaces++
	s.ops = append(s.ops, fmt.Sprintf("replace %d@%s", len(l), rv))
	s.mu.Unlock()
	return s.Store.Replace(l, rv)
}
func (s *recStore) Resync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resyncs++
	return nil
}

func (s *recStore) counts() (replaces, resyncs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replaces, s.resyncs
}

func (s *recStore) takeOps() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.ops
	s.ops = nil
	return out
}

// errLog collects what the watch-error handler was told.
type errLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errLog) handle(_ context.Context, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *errLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

// rig runs a Reflector over a Source inside a synctest bubble.
type rig struct {
	t      *testing.T
	src    *podSource
	store  *recStore
	errs   *errLog
	r      *cache.Reflector[*corev1.Pod]
	cancel context.CancelFunc
	done   chan struct{}
}

// startRig starts a reflector that lists: most tests here are of the list
// and watch path, which is also every reflector's fallback.
func startRig(t *testing.T, src *podSource, lw cache.ListerWatcher[*corev1.Pod], opts cache.ReflectorOptions) *rig {
	t.Helper()
	opts.DisableWatchList = true
	return startStreamingRig(t, src, lw, opts)
}

// startStreamingRig starts a reflector with opts as given, which, by
// default, starts with a streaming list.
func startStreamingRig(t *testing.T, src *podSource, lw cache.ListerWatcher[*corev1.Pod], opts cache.ReflectorOptions) *rig {
	t.Helper()
	if lw == nil {
		lw = src
	}
	g := &rig{t: t, src: src, store: newRecStore(), errs: &errLog{}, done: make(chan struct{})}
	if opts.WatchErrorHandler == nil {
		opts.WatchErrorHandler = g.errs.handle
	}
	g.r = cache.NewReflector(lw, g.store, opts)
	ctx, cancel := context.WithCancel(t.Context())
	g.cancel = cancel
	go func() {
		defer close(g.done)
		g.r.Run(ctx)
	}()
	t.Cleanup(g.stop)
	synctest.Wait()
	return g
}

func (g *rig) stop() {
	g.cancel()
	<-g.done
}

func (g *rig) storeKeys() []string {
	keys := g.store.ListKeys()
	slices.Sort(keys)
	return keys
}

func mustCreate(t *testing.T, src *podSource, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := src.Create(newPod(ns, name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// expireWatch ends the open watches and makes the next watch answer 410
// Expired, as when history was compacted past the watcher.
func expireWatch(src *podSource) {
	src.FailNext(cachetest.OpWatch, 1, apierrors.NewResourceExpired("too old resource version"))
	src.DropWatches()
}

func TestReflector_FirstListAtRV0WithLimitThenWatchFromListRV(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		mustCreate(t, src, "ns", "b")
		g := startRig(t, src, nil, cache.ReflectorOptions{})

		lists := src.Requests(cachetest.OpList)
		if len(lists) != 1 || lists[0].ResourceVersion != "0" || lists[0].Limit != 500 {
			t.Fatalf("list requests = %+v, want one at resourceVersion 0 with limit 500", lists)
		}
		watches := src.Requests(cachetest.OpWatch)
		if len(watches) != 1 {
			t.Fatalf("watch requests = %d, want 1", len(watches))
		}
		w := watches[0]
		if w.ResourceVersion != "2" || !w.AllowWatchBookmarks {
			t.Errorf("watch = %+v, want from resourceVersion 2 with bookmarks", w)
		}
		if w.TimeoutSeconds == nil || *w.TimeoutSeconds < 300 || *w.TimeoutSeconds > 600 {
			t.Errorf("watch timeoutSeconds = %v, want within [300, 600]", w.TimeoutSeconds)
		}
		if got := g.storeKeys(); !slices.Equal(got, []string{"ns/a", "ns/b"}) {
			t.Errorf("store = %v", got)
		}
		if got := g.r.LastSyncResourceVersion(); got != "2" {
			t.Errorf("LastSyncResourceVersion = %q, want 2", got)
		}
	})
}

func TestReflector_WatchTimeoutsAreRandomised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		startRig(t, src, nil, cache.ReflectorOptions{})
		// Each watch ends at its server-side timeout; the reflector resumes.
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		seen := map[int64]bool{}
		for _, w := range src.Requests(cachetest.OpWatch) {
			seen[*w.TimeoutSeconds] = true
		}
		if len(seen) < 3 {
			t.Errorf("%d watches used only %d distinct timeouts", src.WatchCalls(), len(seen))
		}
		if n := src.ListCalls(); n != 1 {
			t.Errorf("list calls = %d, want 1: timeouts must not relist", n)
		}
	})
}

// noRV0 makes a source behave like a server without a watch cache, that
// pages even lists at resourceVersion "0".
type noRV0 struct{ *podSource }

func (s noRV0) List(ctx context.Context, opts metav1.ListOptions) (*cache.List[*corev1.Pod], error) {
	if opts.ResourceVersion == "0" {
		opts.ResourceVersion = ""
	}
	return s.podSource.List(ctx, opts)
}

func TestReflector_PagedListReadsEveryPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		for i := range 12 {
			mustCreate(t, src, "ns", fmt.Sprintf("p%02d", i))
		}
		g := startRig(t, src, noRV0{src}, cache.ReflectorOptions{PageSize: 5})
		if n := src.ListCalls(); n != 3 {
			t.Errorf("list calls = %d, want 3 pages of 5", n)
		}
		if got := len(g.storeKeys()); got != 12 {
			t.Errorf("store has %d items, want 12", got)
		}
		reqs := src.Requests(cachetest.OpList)
		if reqs[1].Continue == "" || reqs[1].ResourceVersion != "" {
			t.Errorf("second page request = %+v, want a continue token and no resourceVersion", reqs[1])
		}
	})
}

func TestReflector_ListFailingHalfwayLeavesStoreAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		for i := range 12 {
			mustCreate(t, src, "ns", fmt.Sprintf("p%02d", i))
		}
		boom := apierrors.NewInternalError(errors.New("boom"))
		src.FailListAfterPages(1, boom)
		g := startRig(t, src, noRV0{src}, cache.ReflectorOptions{PageSize: 5})
		if r, _ := g.store.counts(); r != 0 {
			t.Fatalf("store replaced %d times by a failed list", r)
		}
		errs := g.errs.all()
		if len(errs) != 1 || !apierrors.IsInternalError(errs[0]) {
			t.Fatalf("handler errors = %v, want the internal error", errs)
		}
		time.Sleep(2 * time.Second) // past the first backoff (0.8–1.6 s)
		synctest.Wait()
		if got := len(g.storeKeys()); got != 12 {
			t.Errorf("after retry the store has %d items, want 12", got)
		}
	})
}

func TestReflector_EventsMapToStoreOperations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		g := startRig(t, src, nil, cache.ReflectorOptions{})
		g.store.takeOps()
		mustCreate(t, src, "ns", "b")
		p, _ := src.Get("ns", "a")
		p = p.DeepCopy()
		p.Labels = map[string]string{"x": "y"}
		if _, err := src.Update(p); err != nil {
			t.Fatal(err)
		}
		if _, err := src.Delete("ns", "b"); err != nil {
			t.Fatal(err)
		}
		src.Bookmark()
		synctest.Wait()
		want := []string{"add ns/b@2", "update ns/a@3", "delete ns/b@4"}
		if got := g.store.takeOps(); !slices.Equal(got, want) {
			t.Errorf("ops = %v, want %v", got, want)
		}
		mustCreate(t, src, "other", "c") // moves the revision to 5
		synctest.Wait()
		g.store.takeOps()
		// A bookmark moves only the resourceVersion.
		src.Bookmark()
		synctest.Wait()
		if ops := g.store.takeOps(); len(ops) != 0 {
			t.Errorf("bookmark touched the store: %v", ops)
		}
		if got := g.r.LastSyncResourceVersion(); got != "5" {
			t.Errorf("LastSyncResourceVersion = %q, want 5", got)
		}
	})
}

func TestReflector_BookmarkMovesResourceVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		g := startRig(t, src, nil, cache.ReflectorOptions{})
		// A write the reflector does not see (another namespace filtered
		// out) would be the same; here: bookmark after a write to a key
		// then a normal close, and the watch resumes from the bookmark.
		src.InjectEvent(cache.Event[*corev1.Pod]{Type: cache.EventBookmark, Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}}})
		synctest.Wait()
		if got := g.r.LastSyncResourceVersion(); got != "7" {
			t.Errorf("LastSyncResourceVersion = %q, want 7", got)
		}
	})
}

func TestReflector_NormalCloseResumesWithoutRelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		g := startRig(t, src, nil, cache.ReflectorOptions{})
		mustCreate(t, src, "ns", "b")
		synctest.Wait()
		src.DropWatches()
		synctest.Wait()
		mustCreate(t, src, "ns", "c")
		synctest.Wait()
		if n := src.ListCalls(); n != 1 {
			t.Errorf("list calls = %d, want 1", n)
		}
		watches := src.Requests(cachetest.OpWatch)
		if len(watches) != 2 || watches[1].ResourceVersion != "2" {
			t.Errorf("watches = %+v, want a second one from resourceVersion 2", watches)
		}
		if got := g.storeKeys(); !slices.Equal(got, []string{"ns/a", "ns/b", "ns/c"}) {
			t.Errorf("store = %v", got)
		}
		if errs := g.errs.all(); len(errs) != 0 {
			t.Errorf("a normal close reported errors: %v", errs)
		}
	})
}

func TestReflector_ExpiredWatchRelists(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("errorReturnedDirectly=%v", direct), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opts []cachetest.Option[*corev1.Pod]
				if direct {
					opts = append(opts, cachetest.ReturnWatchErrors[*corev1.Pod]())
				}
				src := cachetest.New(opts...)
				mustCreate(t, src, "ns", "a")
				g := startRig(t, src, nil, cache.ReflectorOptions{})
				// While the watch is down, b is created and a deleted, and
				// history is compacted past what the reflector saw.
				src.SetDelay(cachetest.OpWatch, time.Second)
				src.DropWatches()
				mustCreate(t, src, "ns", "b")
				if _, err := src.Delete("ns", "a"); err != nil {
					t.Fatal(err)
				}
				src.Compact(src.Revision())
				time.Sleep(5 * time.Second)
				synctest.Wait()
				if n := src.ListCalls(); n != 2 {
					t.Errorf("list calls = %d, want 2 (a relist)", n)
				}
				if got := g.storeKeys(); !slices.Equal(got, []string{"ns/b"}) {
					t.Errorf("store = %v, want [ns/b]", got)
				}
				if lists := src.Requests(cachetest.OpList); len(lists) == 2 {
					if lists[1].ResourceVersion != "1" {
						t.Errorf("relist at resourceVersion %q, want the last seen (1)", lists[1].ResourceVersion)
					}
					// Paged, it would ask for exactly version 1, which
					// compaction removed: the server could only refuse it.
					if lists[1].Limit != 0 {
						t.Errorf("relist at resourceVersion 1 with limit %d, want no limit (not older than, from the watch cache)", lists[1].Limit)
					}
				}
			})
		})
	}
}

func TestReflector_ExpiredListFallsBackToLatest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		src.FailNext(cachetest.OpList, 1, apierrors.NewResourceExpired("too old"))
		g := startRig(t, src, nil, cache.ReflectorOptions{})
		lists := src.Requests(cachetest.OpList)
		if len(lists) != 2 || lists[0].ResourceVersion != "0" || lists[1].ResourceVersion != "" {
			t.Fatalf("lists = %+v, want resourceVersion 0 then \"\"", lists)
		}
		if got := g.storeKeys(); !slices.Equal(got, []string{"ns/a"}) {
			t.Errorf("store = %v", got)
		}
		if errs := g.errs.all(); len(errs) != 0 {
			t.Errorf("an expired list reported errors: %v", errs)
		}
	})
}

func TestReflector_ErrorEventExpiredRelists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		startRig(t, src, nil, cache.ReflectorOptions{})
		st := apierrors.NewResourceExpired("gone").ErrStatus
		src.InjectEvent(cache.Event[*corev1.Pod]{Type: cache.EventError, Status: &st})
		synctest.Wait()
		if n := src.ListCalls(); n != 2 {
			t.Errorf("list calls = %d, want a relist", n)
		}
	})
}

// failTimes lists with every call failing, recording when each came.
type failTimes struct {
	*podSource
	mu    sync.Mutex
	times []time.Time
	fail  bool
}

func (f *failTimes) List(ctx context.Context, opts metav1.ListOptions) (*cache.List[*corev1.Pod], error) {
	f.mu.Lock()
	f.times = append(f.times, time.Now())
	fail := f.fail
	f.mu.Unlock()
	if fail {
		return nil, apierrors.NewServiceUnavailable("down")
	}
	return f.podSource.List(ctx, opts)
}

func (f *failTimes) setFail(v bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = v
}

func (f *failTimes) gaps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(f.times); i++ {
		out = append(out, f.times[i].Sub(f.times[i-1]))
	}
	return out
}

func TestReflector_BackoffIsExponentialWithJitterCappedAndResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		lw := &failTimes{podSource: src, fail: true}
		g := startRig(t, src, lw, cache.ReflectorOptions{})
		// Ten retries take at most 350 s: 0.8 s doubling to the 30 s cap,
		// each stretched by up to 2× (1.6+3.2+6.4+12.8+25.6 s, then five
		// of at most 60 s). Five minutes, as this test first waited, fit
		// only nine when the jitter drew high.
		time.Sleep(6 * time.Minute)
		synctest.Wait()
		gaps := lw.gaps()
		if len(gaps) < 10 {
			t.Fatalf("only %d retries in 6 minutes", len(gaps))
		}
		base := 800 * time.Millisecond
		for i, gap := range gaps {
			want := min(base<<i, 30*time.Second)
			if gap < want || gap > 2*want {
				t.Errorf("retry %d after %v, want within [%v, %v]", i+1, gap, want, 2*want)
			}
		}
		// Without jitter every gap would be its base exactly.
		exact := 0
		for i, gap := range gaps {
			if gap == min(base<<i, 30*time.Second) {
				exact++
			}
		}
		if exact == len(gaps) {
			t.Errorf("every retry came exactly at its base delay: no jitter (gaps %v)", gaps)
		}
		if n := len(g.errs.all()); n != len(gaps)+1 {
			t.Errorf("handler told %d times for %d failures", n, len(gaps)+1)
		}
		// Healthy for longer than the reset period, then failing again:
		// the backoff starts over from 0.8 s.
		lw.setFail(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(g.storeKeys()) != 0 || src.WatchCalls() == 0 {
			t.Fatal("reflector did not recover")
		}
		time.Sleep(3 * time.Minute)
		lw.setFail(true)
		lw.mu.Lock()
		lw.times = nil
		lw.mu.Unlock()
		// Lists only come after an expired resourceVersion: force one.
		expireWatch(src)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		gaps = lw.gaps()
		if len(gaps) == 0 || gaps[0] < base || gaps[0] > 2*base {
			t.Errorf("after a healthy period the first retry came after %v, want within [0.8s, 1.6s]", gaps)
		}
	})
}

// TestReflector_BackoffJitterSpreadsReflectors fails several reflectors at
// the same instant, as a server outage does, and checks that their retries
// do not come in lockstep: for each attempt the reflectors wait different
// times, and the stretch each draws is spread over the jitter range.
func TestReflector_BackoffJitterSpreadsReflectors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const reflectors, attempts = 6, 6
		src := cachetest.New[*corev1.Pod]()
		lws := make([]*failTimes, reflectors)
		for i := range lws {
			lws[i] = &failTimes{podSource: src, fail: true}
			startRig(t, src, lws[i], cache.ReflectorOptions{})
		}
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		base := 800 * time.Millisecond
		var lower, upper int // stretches below and above half the base
		for a := range attempts {
			want := min(base<<a, 30*time.Second)
			seen := map[time.Duration]int{}
			for r, lw := range lws {
				gaps := lw.gaps()
				if len(gaps) < attempts {
					t.Fatalf("reflector %d retried only %d times", r, len(gaps))
				}
				gap := gaps[a]
				if gap < want || gap > 2*want {
					t.Errorf("reflector %d retry %d after %v, want within [%v, %v]", r, a+1, gap, want, 2*want)
				}
				seen[gap]++
				if gap-want < want/2 {
					lower++
				} else {
					upper++
				}
			}
			if len(seen) < reflectors {
				t.Errorf("retry %d: %d reflectors waited only %d distinct delays %v: retries in lockstep", a+1, reflectors, len(seen), seen)
			}
		}
		// With uniform jitter, 36 stretches all in one half has odds 2^-35.
		if lower == 0 || upper == 0 {
			t.Errorf("jitter stretches: %d below half the base, %d above; want both", lower, upper)
		}
	})
}

func TestReflector_WatchFailureBacksOffAndRewatchesWithoutRelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		g := startRig(t, src, nil, cache.ReflectorOptions{})
		src.FailNext(cachetest.OpWatch, 2, apierrors.NewServiceUnavailable("down"))
		src.BreakWatches(errors.New("connection reset"))
		mustCreate(t, src, "ns", "b")
		time.Sleep(15 * time.Second) // three backoffs: at most 1.6 + 3.2 + 6.4 s
		synctest.Wait()
		if n := src.ListCalls(); n != 1 {
			t.Errorf("list calls = %d, want 1", n)
		}
		if errs := g.errs.all(); len(errs) != 3 {
			t.Errorf("handler errors = %v, want the broken watch and two failed watches", errs)
		}
		if got := g.storeKeys(); !slices.Equal(got, []string{"ns/a", "ns/b"}) {
			t.Errorf("store = %v", got)
		}
	})
}

func TestReflector_ShortEmptyWatchBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		g := startRig(t, src, nil, cache.ReflectorOptions{})
		for range 3 {
			src.DropWatches()
			synctest.Wait()
		}
		if errs := g.errs.all(); len(errs) == 0 {
			t.Errorf("watches closing at once with nothing in them reported no error")
		}
		if n := src.WatchCalls(); n > 2 {
			t.Errorf("watch calls = %d: the reflector spun instead of backing off", n)
		}
	})
}

func TestReflector_ResyncTickerCallsStoreWhenShouldResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		var mu sync.Mutex
		allow := true
		g := startRig(t, src, nil, cache.ReflectorOptions{
			ResyncPeriod: 30 * time.Second,
			ShouldResync: func() bool { mu.Lock(); defer mu.Unlock(); return allow },
		})
		time.Sleep(95 * time.Second)
		synctest.Wait()
		if _, n := g.store.counts(); n != 3 {
			t.Errorf("resyncs after 95 s = %d, want 3", n)
		}
		mu.Lock()
		allow = false
		mu.Unlock()
		time.Sleep(60 * time.Second)
		synctest.Wait()
		if _, n := g.store.counts(); n != 3 {
			t.Errorf("resyncs = %d after ShouldResync said no, want still 3", n)
		}
	})
}

func TestReflector_StopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		g := startRig(t, src, nil, cache.ReflectorOptions{ResyncPeriod: time.Second})
		g.stop()
		synctest.Wait()
		if n := src.Watchers(); n != 0 {
			t.Errorf("%d watches still open after stop", n)
		}
	})
}

func TestReflector_StreamingList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		mustCreate(t, src, "ns", "b")
		g := startStreamingRig(t, src, nil, cache.ReflectorOptions{})
		if n := src.ListCalls(); n != 0 {
			t.Errorf("list calls = %d, want none", n)
		}
		w := src.Requests(cachetest.OpWatch)
		if len(w) != 1 || w[0].SendInitialEvents == nil || !*w[0].SendInitialEvents ||
			w[0].ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan || !w[0].AllowWatchBookmarks {
			t.Fatalf("watch requests = %+v, want one streaming list", w)
		}
		if r, _ := g.store.counts(); r != 1 {
			t.Errorf("replaces = %d, want 1 at the end bookmark", r)
		}
		mustCreate(t, src, "ns", "c")
		synctest.Wait()
		if got := g.storeKeys(); !slices.Equal(got, []string{"ns/a", "ns/b", "ns/c"}) {
			t.Errorf("store = %v", got)
		}
		if got := g.r.LastSyncResourceVersion(); got != "3" {
			t.Errorf("LastSyncResourceVersion = %q, want 3", got)
		}
	})
}

// oldServer ignores sendInitialEvents, as servers that predate it do, or
// refuses it with refuse, as servers that have it turned off do.
type oldServer struct {
	*podSource
	refuse error
}

func (s oldServer) Watch(ctx context.Context, opts metav1.ListOptions) (cache.Watcher[*corev1.Pod], error) {
	if opts.SendInitialEvents != nil {
		if s.refuse != nil {
			return nil, s.refuse
		}
		opts.SendInitialEvents = nil
		opts.ResourceVersionMatch = ""
	}
	return s.podSource.Watch(ctx, opts)
}

func TestReflector_StreamingListFallsBackToList(t *testing.T) {
	// What kube-apiserver answers with its WatchList feature gate off.
	gateOff := apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "", field.ErrorList{
		field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"),
	})
	for _, tc := range []struct {
		name   string
		refuse error
		settle time.Duration
	}{
		{"refused as bad request", apierrors.NewBadRequest("unknown parameter sendInitialEvents"), 0},
		{"refused as invalid", gateOff, 0},
		{"no end bookmark within the time limit", nil, 61 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := cachetest.New[*corev1.Pod]()
				mustCreate(t, src, "ns", "a")
				g := startStreamingRig(t, src, oldServer{src, tc.refuse}, cache.ReflectorOptions{})
				time.Sleep(tc.settle)
				synctest.Wait()
				if n := src.ListCalls(); n != 1 {
					t.Errorf("list calls = %d, want 1 after falling back", n)
				}
				if got := g.storeKeys(); !slices.Equal(got, []string{"ns/a"}) {
					t.Errorf("store = %v", got)
				}
				// The fallback is for good: a later relist lists too.
				expireWatch(src)
				time.Sleep(5 * time.Second)
				synctest.Wait()
				if n := src.ListCalls(); n != 2 {
					t.Errorf("list calls = %d, want a second list", n)
				}
			})
		})
	}
}

// A ListerWatcher that says it cannot stream is listed at once, with no
// watch tried first; the wrappers of the package pass the answer on.
func TestReflector_ListsWhenTheListerWatcherCannotStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		lw   func(*podSource) cache.ListerWatcher[*corev1.Pod]
		// streams is whether the first request is a streaming list.
		streams bool
	}{
		{"ListWatch", func(s *podSource) cache.ListerWatcher[*corev1.Pod] {
			return cache.ListWatch[*corev1.Pod]{ListFunc: s.List, WatchFunc: s.Watch}
		}, true},
		{"ListWatch with NoWatchList", func(s *podSource) cache.ListerWatcher[*corev1.Pod] {
			return cache.ListWatch[*corev1.Pod]{ListFunc: s.List, WatchFunc: s.Watch, NoWatchList: true}
		}, false},
		{"erased and back", func(s *podSource) cache.ListerWatcher[*corev1.Pod] {
			noStream := cache.ListWatch[*corev1.Pod]{ListFunc: s.List, WatchFunc: s.Watch, NoWatchList: true}
			return cache.Unerase[*corev1.Pod](cache.Erase[*corev1.Pod](noStream))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := cachetest.New[*corev1.Pod]()
				mustCreate(t, src, "ns", "a")
				g := startStreamingRig(t, src, tc.lw(src), cache.ReflectorOptions{})
				w := src.Requests(cachetest.OpWatch)
				if len(w) == 0 {
					t.Fatal("no watch")
				}
				streamed := w[0].SendInitialEvents != nil && *w[0].SendInitialEvents
				if lists := src.ListCalls(); streamed != tc.streams || lists != map[bool]int{true: 0, false: 1}[tc.streams] {
					t.Errorf("first watch streams: %v, lists: %d; want streaming %v", streamed, lists, tc.streams)
				}
				if got := g.storeKeys(); !slices.Equal(got, []string{"ns/a"}) {
					t.Errorf("store = %v", got)
				}
			})
		})
	}
}

func TestReflector_BadInputIsReportedAndRetried(t *testing.T) {
	st := metav1.Status{Status: metav1.StatusFailure, Code: 500, Message: "etcd gone"}
	for _, tc := range []struct {
		name string
		ev   cache.Event[*corev1.Pod]
	}{
		{"unknown event type", cache.Event[*corev1.Pod]{Type: "EXPLODED", Object: newPod("ns", "z")}},
		{"ERROR event without a Status", cache.Event[*corev1.Pod]{Type: cache.EventError}},
		{"ERROR event with a Status", cache.Event[*corev1.Pod]{Type: cache.EventError, Status: &st}},
		{"nil object", cache.Event[*corev1.Pod]{Type: cache.EventAdded}},
		{"object without a name", cache.Event[*corev1.Pod]{Type: cache.EventAdded, Object: newPod("ns", "")}},
		{"bookmark without an object", cache.Event[*corev1.Pod]{Type: cache.EventBookmark}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := cachetest.New[*corev1.Pod]()
				mustCreate(t, src, "ns", "a")
				g := startRig(t, src, nil, cache.ReflectorOptions{})
				watches := src.WatchCalls()
				g.store.takeOps()
				src.InjectEvent(tc.ev)
				synctest.Wait()
				errs := g.errs.all()
				if len(errs) != 1 {
					t.Fatalf("handler errors = %v, want one", errs)
				}
				t.Logf("reported: %v", errs[0])
				time.Sleep(2 * time.Second)
				synctest.Wait()
				if n := src.WatchCalls(); n != watches+1 {
					t.Errorf("watch calls = %d, want a retry", n-watches)
				}
				if ops := g.store.takeOps(); len(ops) != 0 {
					t.Errorf("bad event reached the store: %v", ops)
				}
				mustCreate(t, src, "ns", "b")
				synctest.Wait()
				if got := g.storeKeys(); !slices.Equal(got, []string{"ns/a", "ns/b"}) {
					t.Errorf("store after retry = %v", got)
				}
			})
		})
	}
}

func TestReflector_WrongKindIsRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
		newObj := func() *unstructured.Unstructured { return &unstructured.Unstructured{Object: map[string]any{}} }
		src := cachetest.New(cachetest.WithNewObject(newObj))
		w := newObj()
		w.SetGroupVersionKind(gvk)
		w.SetNamespace("ns")
		w.SetName("w1")
		if _, err := src.Create(w); err != nil {
			t.Fatal(err)
		}
		store := cache.NewStore[*unstructured.Unstructured](nil)
		errs := &errLog{}
		r := cache.NewReflector(src, store, cache.ReflectorOptions{ExpectedGVK: &gvk, WatchErrorHandler: errs.handle, DisableWatchList: true})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); r.Run(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()
		if n := len(store.ListKeys()); n != 1 {
			t.Fatalf("store has %d items, want 1", n)
		}
		bad := newObj()
		bad.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
		bad.SetNamespace("ns")
		bad.SetName("cm")
		src.InjectEvent(cache.Event[*unstructured.Unstructured]{Type: cache.EventAdded, Object: bad})
		synctest.Wait()
		if got := errs.all(); len(got) != 1 {
			t.Fatalf("handler errors = %v, want one for the wrong kind", got)
		}
		if n := len(store.ListKeys()); n != 1 {
			t.Errorf("wrong-kind object reached the store")
		}
		// The watch is retried from the last good resourceVersion, with no
		// relist, and goes on from there.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		watches := src.Requests(cachetest.OpWatch)
		if len(watches) != 2 || watches[1].ResourceVersion != "1" {
			t.Errorf("watches = %+v, want a retry from resourceVersion 1", watches)
		}
		if n := src.ListCalls(); n != 1 {
			t.Errorf("list calls = %d, want 1", n)
		}
		w2 := newObj()
		w2.SetGroupVersionKind(gvk)
		w2.SetNamespace("ns")
		w2.SetName("w2")
		if _, err := src.Create(w2); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		keys := store.ListKeys()
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"ns/w1", "ns/w2"}) {
			t.Errorf("store after retry = %v, want ns/w1, ns/w2", keys)
		}
		if got := errs.all(); len(got) != 1 {
			t.Errorf("handler errors = %v, want only the wrong kind", got)
		}
	})
}

// namelessList adds an object without a name to every list while on, as a
// broken server or a buggy conversion could.
type namelessList struct {
	*podSource
	mu sync.Mutex
	on bool
}

func (n *namelessList) set(on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.on = on
}

func (n *namelessList) List(ctx context.Context, opts metav1.ListOptions) (*cache.List[*corev1.Pod], error) {
	l, err := n.podSource.List(ctx, opts)
	n.mu.Lock()
	on := n.on
	n.mu.Unlock()
	if err != nil || !on {
		return l, err
	}
	out := *l
	out.Items = append(slices.Clone(l.Items), newPod("ns", ""))
	return &out, nil
}

// TestReflector_ListWithNamelessObjectIsRejectedAndRetried relists into a
// list holding an object without a name: the failure is reported as such,
// the store keeps its previous content rather than a partial one, and the
// list is retried until the server answers well.
func TestReflector_ListWithNamelessObjectIsRejectedAndRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		mustCreate(t, src, "ns", "b")
		lw := &namelessList{podSource: src}
		g := startRig(t, src, lw, cache.ReflectorOptions{})
		if got := g.storeKeys(); !slices.Equal(got, []string{"ns/a", "ns/b"}) {
			t.Fatalf("store = %v", got)
		}

		lw.set(true)
		if _, err := src.Delete("ns", "a"); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, src, "ns", "c")
		synctest.Wait()
		expireWatch(src)
		synctest.Wait()
		errs := g.errs.all()
		if len(errs) != 1 || !errors.Is(errs[0], cache.ErrNoName) {
			t.Fatalf("handler errors = %v, want one saying an object has no name", errs)
		}
		t.Logf("reported: %v", errs[0])
		// The watch had applied the delete and the create; the bad list
		// changed nothing.
		if got := g.storeKeys(); !slices.Equal(got, []string{"ns/b", "ns/c"}) {
			t.Errorf("store after the bad list = %v, want ns/b, ns/c", got)
		}
		lists := src.ListCalls()

		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := src.ListCalls(); n != lists+1 {
			t.Errorf("list calls after the backoff = %d, want a retry", n-lists)
		}
		if got := g.storeKeys(); !slices.Equal(got, []string{"ns/b", "ns/c"}) {
			t.Errorf("store after a second bad list = %v, want ns/b, ns/c", got)
		}

		lw.set(false)
		if _, err := src.Delete("ns", "b"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := g.storeKeys(); !slices.Equal(got, []string{"ns/c"}) {
			t.Errorf("store once the list is good = %v, want ns/c", got)
		}
		if got := g.r.LastSyncResourceVersion(); got != strconv.FormatInt(src.Revision(), 10) {
			t.Errorf("LastSyncResourceVersion = %q, want %d", got, src.Revision())
		}
		mustCreate(t, src, "ns", "d")
		synctest.Wait()
		if got := g.storeKeys(); !slices.Equal(got, []string{"ns/c", "ns/d"}) {
			t.Errorf("store after a later write = %v, want ns/c, ns/d", got)
		}
	})
}

// callTimes records when each List and Watch call came.
type callTimes struct {
	*podSource
	mu             sync.Mutex
	lists, watches []time.Time
}

func (c *callTimes) List(ctx context.Context, opts metav1.ListOptions) (*cache.List[*corev1.Pod], error) {
	c.mu.Lock()
	c.lists = append(c.lists, time.Now())
	c.mu.Unlock()
	return c.podSource.List(ctx, opts)
}

func (c *callTimes) Watch(ctx context.Context, opts metav1.ListOptions) (cache.Watcher[*corev1.Pod], error) {
	c.mu.Lock()
	c.watches = append(c.watches, time.Now())
	c.mu.Unlock()
	return c.podSource.Watch(ctx, opts)
}

func (c *callTimes) times() (lists, watches []time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lists), slices.Clone(c.watches)
}

// clientStatus429 is the error listwatch's REST client returns for a 429
// response with "Retry-After: s".
func clientStatus429(s int32) error {
	return &client.StatusError{
		ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusTooManyRequests,
			Reason:  metav1.StatusReasonTooManyRequests,
			Message: "the server has received too many requests",
			Details: &metav1.StatusDetails{RetryAfterSeconds: s},
		},
		Verb: "GET",
		URL:  "/api/v1/pods",
	}
}

// TestReflector_ServerAskedDelayIsHonoured makes a list, a watch call or a
// watch stream fail with an error asking the client to wait (429 with
// Retry-After, or a ServerTimeout), and checks that the next attempt waits
// at least that long, capped by the backoff's maximum, that the handler is
// still told, and that nothing is relisted that need not be.
func TestReflector_ServerAskedDelayIsHonoured(t *testing.T) {
	var _ apierrors.APIStatus = (*client.StatusError)(nil)
	backoffMin, backoffMax := 800*time.Millisecond, 1600*time.Millisecond
	tests := []struct {
		name     string
		err      error
		min, max time.Duration // bounds of the wait before the next attempt
	}{
		{"apierrors 429 Retry-After 7", apierrors.NewTooManyRequests("slow down", 7), 7 * time.Second, 7 * time.Second},
		{"client.StatusError 429 Retry-After 7", clientStatus429(7), 7 * time.Second, 7 * time.Second},
		{"wrapped 429 Retry-After 7", fmt.Errorf("proxy: %w", apierrors.NewTooManyRequests("slow down", 7)), 7 * time.Second, 7 * time.Second},
		{"ServerTimeout retry after 5", apierrors.NewServerTimeout(schema.GroupResource{Resource: "pods"}, "list", 5), 5 * time.Second, 5 * time.Second},
		{"Retry-After beyond the backoff cap", apierrors.NewTooManyRequests("slow down", 3600), 30 * time.Second, 30 * time.Second},
		{"429 without Retry-After backs off as usual", apierrors.NewTooManyRequests("slow down", 0), backoffMin, backoffMax},
	}
	for _, op := range []string{"list", "watch call", "watch stream"} {
		for _, tc := range tests {
			t.Run(op+"/"+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					src := cachetest.New[*corev1.Pod]()
					mustCreate(t, src, "ns", "a")
					lw := &callTimes{podSource: src}
					if op == "list" {
						src.FailNext(cachetest.OpList, 1, tc.err)
					}
					g := startRig(t, src, lw, cache.ReflectorOptions{})
					var failedAt time.Time
					var next func() (time.Time, bool)
					switch op {
					case "list":
						lists, _ := lw.times()
						failedAt = lists[0]
						next = func() (time.Time, bool) {
							lists, _ := lw.times()
							if len(lists) < 2 {
								return time.Time{}, false
							}
							return lists[1], true
						}
					case "watch call":
						// A watch that ran a while and ended normally is
						// resumed at once; that resumption is refused.
						time.Sleep(2 * time.Second)
						src.FailNext(cachetest.OpWatch, 1, tc.err)
						src.DropWatches()
						synctest.Wait()
						_, watches := lw.times()
						if len(watches) != 2 {
							t.Fatalf("watch calls = %d, want the resumed one", len(watches))
						}
						failedAt = watches[1]
						next = func() (time.Time, bool) {
							_, watches := lw.times()
							if len(watches) < 3 {
								return time.Time{}, false
							}
							return watches[2], true
						}
					case "watch stream":
						time.Sleep(2 * time.Second)
						var as apierrors.APIStatus
						if !errors.As(tc.err, &as) {
							t.Fatal("test error carries no Status")
						}
						st := as.Status()
						failedAt = time.Now()
						src.InjectEvent(cache.Event[*corev1.Pod]{Type: cache.EventError, Status: &st})
						next = func() (time.Time, bool) {
							_, watches := lw.times()
							if len(watches) < 2 {
								return time.Time{}, false
							}
							return watches[1], true
						}
					}
					synctest.Wait()
					time.Sleep(40 * time.Second)
					synctest.Wait()
					at, ok := next()
					if !ok {
						t.Fatal("no retry within 40 s")
					}
					if gap := at.Sub(failedAt); gap < tc.min || gap > max(tc.max, backoffMax) {
						t.Errorf("retried after %v, want within [%v, %v]", gap, tc.min, max(tc.max, backoffMax))
					}
					errs := g.errs.all()
					if len(errs) == 0 || !apierrors.IsTooManyRequests(errs[len(errs)-1]) && !apierrors.IsServerTimeout(errs[len(errs)-1]) {
						t.Errorf("handler errors = %v, want the refusal last", errs)
					}
					// A refusal asks to come back later, not to start over.
					lists := src.Requests(cachetest.OpList)
					wantLists := 1
					if op == "list" {
						wantLists = 2
					}
					if len(lists) != wantLists {
						t.Errorf("list calls = %d, want %d", len(lists), wantLists)
					}
					for i, l := range lists {
						if l.ResourceVersion != "0" {
							t.Errorf("list %d at resourceVersion %q, want 0: the store had no state to keep", i, l.ResourceVersion)
						}
					}
					if ws := src.Requests(cachetest.OpWatch); ws[len(ws)-1].ResourceVersion != "1" {
						t.Errorf("last watch from resourceVersion %q, want 1", ws[len(ws)-1].ResourceVersion)
					}
					if got := g.storeKeys(); !slices.Equal(got, []string{"ns/a"}) {
						t.Errorf("store = %v", got)
					}
				})
			})
		}
	}
}
