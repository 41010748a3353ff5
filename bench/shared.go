package main

// Shared-informer workloads: 10 handlers registered on each library's
// SharedIndexInformer (client-go: a goroutine pair and an unbounded ring
// buffer per handler; listwatch: a goroutine and a per-key merged backlog
// per handler), and a stalled handler's heap while 1M updates flow over 1k
// keys. The same pre-built objects feed both, through the in-process
// ListerWatchers of informer.go.
//
// Throughput is measured as events applied per second until every handler
// has seen the final state of every updated key. listwatch merges the
// pending notifications of a handler that falls behind, so its handlers may
// receive fewer notifications than there were events; the notifications
// each handler received are reported too.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	cgcache "k8s.io/client-go/tools/cache"

	lwcache "github.com/listwatch/listwatch/cache"
)

func init() {
	register("shared-events-10h", func(cfg config) ([]Row, error) {
		return benchSharedEvents("shared-events-10h", cfg, 10)
	})
	register("shared-stalled-1m", func(cfg config) ([]Row, error) {
		return benchSharedStalled("shared-stalled-1m", cfg)
	})
}

// finalCounter is a handler that counts notifications and the keys whose
// final state it has seen; done closes when it has seen all of them.
type finalCounter struct {
	final  map[*corev1.Pod]struct{}
	notes  atomic.Int64
	seen   int
	want   int
	done   chan struct{}
	synced chan struct{}
	adds   int
	nAdds  int
	block  <-chan struct{} // when not nil, the first call waits for it
	once   sync.Once
}

func newFinalCounter(final map[*corev1.Pod]struct{}, nAdds int, block <-chan struct{}) *finalCounter {
	return &finalCounter{final: final, want: len(final), done: make(chan struct{}), synced: make(chan struct{}), nAdds: nAdds, block: block}
}

func (c *finalCounter) wait() {
	if c.block != nil {
		c.once.Do(func() { <-c.block })
	}
}

func (c *finalCounter) add(p *corev1.Pod) {
	// A handler that fell behind may get the final state as an add: the
	// initial add merged with the updates that followed.
	c.update(nil, p)
	c.adds++
	if c.adds == c.nAdds && c.synced != nil {
		close(c.synced)
	}
}

func (c *finalCounter) update(_, p *corev1.Pod) {
	c.wait()
	c.notes.Add(1)
	if _, ok := c.final[p]; ok {
		c.seen++
		if c.seen == c.want {
			close(c.done)
		}
	}
}

// informerUnderTest is one running shared informer of either library.

func startListwatchShared(items []*corev1.Pod, events []lwcache.Event[*corev1.Pod], gate <-chan struct{}, hs []*finalCounter) (informerUnderTest, error) {
	lw := lwcache.ListWatch[*corev1.Pod]{
		ListFunc: func(context.Context, metav1.ListOptions) (*lwcache.List[*corev1.Pod], error) {
			return &lwcache.List[*corev1.Pod]{Items: items, ResourceVersion: "1"}, nil
		},
		WatchFunc: func(context.Context, metav1.ListOptions) (lwcache.Watcher[*corev1.Pod], error) {
			return newSliceWatcher(events, gate), nil
		},
		// A replay, not a server: list it, as client-go's side does
		// (noWatchList).
		NoWatchList: true,
	}
	inf := lwcache.NewSharedIndexInformer[*corev1.Pod](lw, lwcache.SharedInformerOptions{})
	for _, h := range hs {
		if _, err := inf.AddEventHandler(lwcache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc:    func(p *corev1.Pod, _ bool) { h.add(p) },
			UpdateFunc: h.update,
		}); err != nil {
			return informerUnderTest{}, err
		}
	}
	return startRunning(inf.Run, inf.HasSynced, inf), nil
}

func startClientGoShared(list *corev1.PodList, events []watch.Event, gate <-chan struct{}, hs []*finalCounter) (informerUnderTest, error) {
	lw := noWatchList{&cgcache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (k8sruntime.Object, error) {
			return list, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return newChanWatcher(events, gate), nil
		},
	}}
	inf := cgcache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cgcache.Indexers{cgcache.NamespaceIndex: cgcache.MetaNamespaceIndexFunc})
	for _, h := range hs {
		if _, err := inf.AddEventHandler(cgcache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { h.add(obj.(*corev1.Pod)) },
			UpdateFunc: func(oldObj, newObj any) { h.update(oldObj.(*corev1.Pod), newObj.(*corev1.Pod)) },
		}); err != nil {
			return informerUnderTest{}, err
		}
	}
	return startRunning(inf.RunWithContext, inf.HasSynced, inf), nil
}

func waitChans(d time.Duration, what string, chans ...<-chan struct{}) error {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for _, ch := range chans {
		select {
		case <-ch:
		case <-timeout.C:
			return fmt.Errorf("%s timed out", what)
		}
	}
	return nil
}

func waitHasSynced(hasSynced func() bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !pollSynced(ctx, 50*time.Microsecond, hasSynced) {
		return fmt.Errorf("HasSynced timed out")
	}
	return nil
}

// benchSharedEvents syncs 10k pods, then streams 200k MODIFIED events (each
// a distinct object) to `handlers` handlers on one shared informer.
func benchSharedEvents(name string, cfg config, handlers int) ([]Row, error) {
	const runs = 3
	n, m := cfg.size(10_000), cfg.size(200_000)
	list, pods := buildPods(n, 5)
	rng := rand.New(rand.NewPCG(7, 8))
	lwEvents := make([]lwcache.Event[*corev1.Pod], m)
	cgEvents := make([]watch.Event, m)
	last := map[int]*corev1.Pod{}
	for i := range m {
		k := rng.IntN(n)
		updated := *pods[k]
		updated.ResourceVersion = strconv.Itoa(2_000_000 + i)
		p := &updated
		last[k] = p
		lwEvents[i] = lwcache.Event[*corev1.Pod]{Type: lwcache.EventModified, Object: p}
		cgEvents[i] = watch.Event{Type: watch.Modified, Object: p}
	}
	final := make(map[*corev1.Pod]struct{}, len(last))
	for _, p := range last {
		final[p] = struct{}{}
	}

	rates, allocs, notes := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for r := range runs {
		impls := []string{implListwatch, implClientGo}
		if r%2 == 1 {
			slices.Reverse(impls)
		}
		for _, impl := range impls {
			hs := make([]*finalCounter, handlers)
			for i := range hs {
				hs[i] = newFinalCounter(final, n, nil)
			}
			gate := make(chan struct{})
			var inf informerUnderTest
			var err error
			if impl == implListwatch {
				inf, err = startListwatchShared(slices.Clone(pods), lwEvents, gate, hs)
			} else {
				inf, err = startClientGoShared(list, cgEvents, gate, hs)
			}
			if err != nil {
				return nil, err
			}
			for _, h := range hs {
				if err := waitChans(time.Minute, "sync", h.synced); err != nil {
					inf.stop()
					return nil, err
				}
			}
			if err := waitHasSynced(inf.hasSynced); err != nil {
				inf.stop()
				return nil, err
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			close(gate)
			for _, h := range hs {
				if err := waitChans(5*time.Minute, "events", h.done); err != nil {
					inf.stop()
					return nil, err
				}
			}
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			inf.stop()
			var total int64
			for _, h := range hs {
				total += h.notes.Load() - int64(n) // not the initial adds
			}
			rates[impl] = append(rates[impl], float64(m)/elapsed.Seconds())
			allocs[impl] = append(allocs[impl], float64(after.Mallocs-before.Mallocs)/float64(m))
			notes[impl] = append(notes[impl], float64(total)/float64(handlers))
		}
	}
	var rows []Row
	for _, impl := range []string{implListwatch, implClientGo} {
		rows = append(rows,
			Row{name, impl, "events-per-sec", median(rates[impl]), "events/s"},
			Row{name, impl, "allocs-per-event", median(allocs[impl]), "allocs"},
			Row{name, impl, "notifications-per-handler", median(notes[impl]), "notes"},
		)
	}
	return rows, nil
}

// benchSharedStalled counts every call the stalled handler gets, all of
// which come after it is let go (adds of the initial list included).
//
// benchSharedStalled syncs 1k pods with two handlers, one of which is stuck
// in its first call, then streams 1M updates over the 1k keys. Once the
// healthy handler has seen the final state of every key, it measures the
// heap growth (after GC) since the sync, then lets the stalled handler go
// and measures how long it takes to reach the final state of every key.
func benchSharedStalled(name string, cfg config) ([]Row, error) {
	keys, m := 1000, cfg.size(1_000_000)
	list, pods := buildPods(keys, 9)
	// Three versions per key: two that alternate, so that every event
	// changes the resourceVersion, and the final one, so that handlers can
	// tell it apart. Objects are shared between events: the figure is the
	// backlog's, not the objects'.
	versions := make([][3]*corev1.Pod, keys)
	for k, p := range pods {
		for v := range 3 {
			cp := *p
			cp.ResourceVersion = fmt.Sprintf("%d-%d", k, v)
			versions[k][v] = &cp
		}
	}
	final := make(map[*corev1.Pod]struct{}, keys)
	lwEvents := make([]lwcache.Event[*corev1.Pod], m)
	cgEvents := make([]watch.Event, m)
	for i := range m {
		k := i % keys
		p := versions[k][(i/keys)%2]
		if i >= m-keys {
			p = versions[k][2]
			final[p] = struct{}{}
		}
		lwEvents[i] = lwcache.Event[*corev1.Pod]{Type: lwcache.EventModified, Object: p}
		cgEvents[i] = watch.Event{Type: watch.Modified, Object: p}
	}

	var rows []Row
	for _, impl := range []string{implListwatch, implClientGo} {
		release := make(chan struct{})
		healthy := newFinalCounter(final, keys, nil)
		stalled := newFinalCounter(final, keys, release)
		gate := make(chan struct{})
		var inf informerUnderTest
		var err error
		if impl == implListwatch {
			inf, err = startListwatchShared(slices.Clone(pods), lwEvents, gate, []*finalCounter{healthy, stalled})
		} else {
			inf, err = startClientGoShared(list, cgEvents, gate, []*finalCounter{healthy, stalled})
		}
		if err != nil {
			return nil, err
		}
		fail := func(err error) ([]Row, error) {
			close(release)
			inf.stop()
			return nil, err
		}
		if err := waitChans(time.Minute, "sync", healthy.synced); err != nil {
			return fail(err)
		}
		if err := waitHasSynced(inf.hasSynced); err != nil {
			return fail(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		close(gate)
		if err := waitChans(5*time.Minute, "events", healthy.done); err != nil {
			return fail(err)
		}
		elapsed := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		growth := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
		resumed := time.Now()
		close(release)
		if err := waitChans(5*time.Minute, "catch-up", stalled.done); err != nil {
			inf.stop()
			return nil, err
		}
		catchUp := time.Since(resumed)
		inf.stop()
		runtime.KeepAlive(inf.keepAlive)
		rows = append(rows,
			Row{name, impl, "stalled-heap-growth", growth, "MiB"},
			Row{name, impl, "events-per-sec", float64(m) / elapsed.Seconds(), "events/s"},
			Row{name, impl, "stalled-catch-up", float64(catchUp) / float64(time.Millisecond), "ms"},
			Row{name, impl, "stalled-notifications-after-resume", float64(stalled.notes.Load()), "notes"},
		)
	}
	return rows, nil
}
