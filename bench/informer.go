package main

// Informer workloads: the initial sync of N pods, and the throughput of watch
// events after it, through listwatch's NewIndexerInformer and client-go's
// NewIndexerInformer, each with its library's defaults, fed the very same
// pre-built *corev1.Pod objects by an in-process ListerWatcher (nothing is
// encoded or decoded: that is not what these measure).
//
// client-go's defaults in v0.37 are the RealFIFO with atomic events and batch
// processing (InOrderInformers, AtomicFIFO, UnlockWhileProcessingFIFO,
// InOrderInformersBatchProcess), and WatchListClient on. The in-process
// ListerWatcher serves a plain list and a plain watch, as listwatch's default
// Reflector uses them, so it tells client-go's Reflector it does not support
// streaming lists (IsWatchListSemanticsUnSupported), exactly as client-go's
// own fakes do; both libraries then list once and watch.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	cgcache "k8s.io/client-go/tools/cache"

	lwcache "github.com/listwatch/listwatch/cache"
)

func init() {
	register("informer-sync-10k", func(cfg config) ([]Row, error) {
		return benchInformerSync("informer-sync-10k", cfg.size(10_000), 7)
	})
	register("informer-sync-100k", func(cfg config) ([]Row, error) {
		return benchInformerSync("informer-sync-100k", cfg.size(100_000), 3)
	})
	register("informer-events-1h", func(cfg config) ([]Row, error) {
		return benchInformerEvents("informer-events-1h", cfg, 1)
	})
	// With 10 handlers. listwatch's NewIndexerInformer takes one handler, so
	// for both libraries a single handler fans out to 10 handler funcs, with
	// the same structure in both. shared-events-10h (shared.go) registers 10
	// handlers on each library's SharedIndexInformer instead, with
	// client-go's per-listener goroutines and buffers.
	register("informer-events-10h", func(cfg config) ([]Row, error) {
		return benchInformerEvents("informer-events-10h", cfg, 10)
	})
}

// podCounter is the handler behind both libraries' informers: it counts
// adds and updates and fans each update out to its sinks. The informer calls
// it from one goroutine at a time, so its counters need no lock; the waiting
// goroutine learns of progress through the channels only.
type podCounter struct {
	adds, updates         int
	wantAdds, wantUpdates int
	synced, done          chan struct{}
	sinks                 []func(oldObj, newObj *corev1.Pod)
	hits                  []int
}

func newPodCounter(wantAdds, wantUpdates, sinks int) *podCounter {
	c := &podCounter{
		wantAdds:    wantAdds,
		wantUpdates: wantUpdates,
		synced:      make(chan struct{}),
		done:        make(chan struct{}),
		hits:        make([]int, sinks),
	}
	for i := range sinks {
		c.sinks = append(c.sinks, func(_, _ *corev1.Pod) { c.hits[i]++ })
	}
	return c
}

func (c *podCounter) add(*corev1.Pod) {
	c.adds++
	if c.adds == c.wantAdds {
		close(c.synced)
	}
}

func (c *podCounter) update(oldObj, newObj *corev1.Pod) {
	for _, f := range c.sinks {
		f(oldObj, newObj)
	}
	c.updates++
	if c.updates == c.wantUpdates {
		close(c.done)
	}
}

// listwatchHandler adapts podCounter to listwatch's typed handler.
func listwatchHandler(c *podCounter) lwcache.ResourceEventHandler[*corev1.Pod] {
	return lwcache.ResourceEventHandlerFuncs[*corev1.Pod]{
		AddFunc:    func(obj *corev1.Pod, _ bool) { c.add(obj) },
		UpdateFunc: c.update,
	}
}

// clientGoHandler adapts podCounter to client-go's untyped handler: the type
// assertions are what a client-go user writes.
func clientGoHandler(c *podCounter) cgcache.ResourceEventHandler {
	return cgcache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.add(obj.(*corev1.Pod)) },
		UpdateFunc: func(oldObj, newObj any) {
			c.update(oldObj.(*corev1.Pod), newObj.(*corev1.Pod))
		},
	}
}

// sliceWatcher is listwatch's in-process watch: Next hands out events from a
// pre-built slice once gate is closed (never, when gate is nil), then blocks
// until Stop and returns io.EOF.
type sliceWatcher struct {
	events []lwcache.Event[*corev1.Pod]
	next   int
	gate   <-chan struct{}
	open   bool
	stop   chan struct{}
	once   sync.Once
}

func newSliceWatcher(events []lwcache.Event[*corev1.Pod], gate <-chan struct{}) *sliceWatcher {
	return &sliceWatcher{events: events, gate: gate, stop: make(chan struct{})}
}

func (w *sliceWatcher) Next() (lwcache.Event[*corev1.Pod], error) {
	if !w.open {
		select {
		case <-w.gate:
			w.open = true
		case <-w.stop:
			return lwcache.Event[*corev1.Pod]{}, io.EOF
		}
	}
	if w.next < len(w.events) {
		ev := w.events[w.next]
		w.next++
		return ev, nil
	}
	<-w.stop
	return lwcache.Event[*corev1.Pod]{}, io.EOF
}

func (w *sliceWatcher) Stop() { w.once.Do(func() { close(w.stop) }) }

// chanWatcher is client-go's in-process watch: a goroutine feeds ResultChan
// from a pre-built slice once gate is closed (never, when gate is nil), then
// waits for Stop and closes the channel. The channel is unbuffered, as
// client-go's StreamWatcher's is.
type chanWatcher struct {
	ch   chan watch.Event
	stop chan struct{}
	once sync.Once
}

func newChanWatcher(events []watch.Event, gate <-chan struct{}) *chanWatcher {
	w := &chanWatcher{ch: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.ch)
		select {
		case <-gate:
		case <-w.stop:
			return
		}
		for _, ev := range events {
			select {
			case w.ch <- ev:
			case <-w.stop:
				return
			}
		}
		<-w.stop
	}()
	return w
}

func (w *chanWatcher) ResultChan() <-chan watch.Event { return w.ch }
func (w *chanWatcher) Stop()                          { w.once.Do(func() { close(w.stop) }) }

// noWatchList tells client-go's Reflector that this ListerWatcher serves
// plain lists and watches only (no sendInitialEvents streaming list).
type noWatchList struct{ *cgcache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// informerUnderTest is one running informer of either library.
type informerUnderTest struct {
	hasSynced func() bool
	keepAlive any // the cache, kept reachable while the heap is measured
	stop      func()
}

// startRunning runs run in a goroutine until the returned value's stop, which
// waits for run to return.
func startRunning(run func(context.Context), hasSynced func() bool, keepAlive any) informerUnderTest {
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		run(ctx)
	}()
	return informerUnderTest{hasSynced: hasSynced, keepAlive: keepAlive, stop: func() { cancel(); <-exited }}
}

// startListwatch starts a listwatch informer listing items and then
// watching events (released when gate closes).
func startListwatch(items []*corev1.Pod, events []lwcache.Event[*corev1.Pod], gate <-chan struct{}, c *podCounter) informerUnderTest {
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
	indexer, ctrl := lwcache.NewIndexerInformer[*corev1.Pod](lw, listwatchHandler(c), lwcache.InformerOptions{})
	return startRunning(ctrl.Run, ctrl.HasSynced, indexer)
}

// startClientGo is startListwatch for client-go.
func startClientGo(list *corev1.PodList, events []watch.Event, gate <-chan struct{}, c *podCounter) informerUnderTest {
	lw := noWatchList{&cgcache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (k8sruntime.Object, error) {
			return list, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return newChanWatcher(events, gate), nil
		},
	}}
	indexer, ctrl := cgcache.NewInformerWithOptions(cgcache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Handler:       clientGoHandler(c),
		Indexers:      cgcache.Indexers{cgcache.NamespaceIndex: cgcache.MetaNamespaceIndexFunc},
	})
	return startRunning(ctrl.RunWithContext, ctrl.HasSynced, indexer)
}

// waitSynced waits for the handler to have seen every add and for
// HasSynced, or fails after a minute.
func waitSynced(inf informerUnderTest, c *podCounter) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	select {
	case <-c.synced:
	case <-ctx.Done():
		return fmt.Errorf("sync timed out")
	}
	if !pollSynced(ctx, 10*time.Microsecond, inf.hasSynced) {
		return fmt.Errorf("HasSynced timed out")
	}
	return nil
}

type syncSample struct {
	ms, allocs, bytes, heap float64 // allocs, bytes and heap per object
}

// benchInformerSync measures the initial sync of n pods, runs times per
// implementation, alternating, and reports each metric's median.
func benchInformerSync(name string, n, runs int) ([]Row, error) {
	list, pods := buildPods(n, 1)
	samples := map[string][]syncSample{}
	for r := range runs {
		impls := []string{implListwatch, implClientGo}
		if r%2 == 1 {
			slices.Reverse(impls)
		}
		for _, impl := range impls {
			s, err := syncOnce(impl, list, pods)
			if err != nil {
				return nil, fmt.Errorf("%s run %d: %w", impl, r, err)
			}
			samples[impl] = append(samples[impl], s)
		}
	}
	runtime.KeepAlive(list)
	var rows []Row
	for _, impl := range []string{implListwatch, implClientGo} {
		ss := samples[impl]
		med := func(f func(syncSample) float64) float64 {
			v := make([]float64, len(ss))
			for i, s := range ss {
				v[i] = f(s)
			}
			return median(v)
		}
		rows = append(rows,
			Row{name, impl, "sync-time", med(func(s syncSample) float64 { return s.ms }), "ms"},
			Row{name, impl, "allocs-per-object", med(func(s syncSample) float64 { return s.allocs }), "allocs"},
			Row{name, impl, "bytes-allocated-per-object", med(func(s syncSample) float64 { return s.bytes }), "B"},
			Row{name, impl, "heap-bytes-per-object", med(func(s syncSample) float64 { return s.heap }), "B"},
		)
	}
	return rows, nil
}

func syncOnce(impl string, list *corev1.PodList, pods []*corev1.Pod) (syncSample, error) {
	n := len(pods)
	// listwatch is handed a fresh list slice per run, made before the
	// baseline, as a decoder would hand it a fresh one.
	items := slices.Clone(pods)
	c := newPodCounter(n, -1, 0)
	var before, after, afterGC runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var inf informerUnderTest
	start := time.Now()
	if impl == implListwatch {
		inf = startListwatch(items, nil, nil, c)
	} else {
		inf = startClientGo(list, nil, nil, c)
	}
	err := waitSynced(inf, c)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	runtime.GC()
	runtime.ReadMemStats(&afterGC)
	runtime.KeepAlive(inf.keepAlive)
	inf.stop()
	runtime.KeepAlive(items)
	if err != nil {
		return syncSample{}, err
	}
	return syncSample{
		ms:     float64(elapsed) / float64(time.Millisecond),
		allocs: float64(after.Mallocs-before.Mallocs) / float64(n),
		bytes:  float64(after.TotalAlloc-before.TotalAlloc) / float64(n),
		heap:   (float64(afterGC.HeapAlloc) - float64(before.HeapAlloc)) / float64(n),
	}, nil
}

// benchInformerEvents syncs 10k pods, then streams m MODIFIED events for
// random pods through the watch to a handler fanning out to sinks funcs, and
// reports events/s from the moment the watch is released until the handler
// has seen every event, with allocations per event.
func benchInformerEvents(name string, cfg config, sinks int) ([]Row, error) {
	const runs = 3
	n, m := cfg.size(10_000), cfg.size(200_000)
	list, pods := buildPods(n, 2)
	rng := rand.New(rand.NewPCG(3, 4))
	lwEvents := make([]lwcache.Event[*corev1.Pod], m)
	cgEvents := make([]watch.Event, m)
	for i := range m {
		updated := *pods[rng.IntN(n)]
		updated.ResourceVersion = strconv.Itoa(2_000_000 + i)
		p := &updated
		lwEvents[i] = lwcache.Event[*corev1.Pod]{Type: lwcache.EventModified, Object: p}
		cgEvents[i] = watch.Event{Type: watch.Modified, Object: p}
	}

	rates := map[string][]float64{}
	allocs := map[string][]float64{}
	for r := range runs {
		impls := []string{implListwatch, implClientGo}
		if r%2 == 1 {
			slices.Reverse(impls)
		}
		for _, impl := range impls {
			rate, a, err := eventsOnce(impl, list, pods, lwEvents, cgEvents, sinks)
			if err != nil {
				return nil, fmt.Errorf("%s run %d: %w", impl, r, err)
			}
			rates[impl] = append(rates[impl], rate)
			allocs[impl] = append(allocs[impl], a)
		}
	}
	var rows []Row
	for _, impl := range []string{implListwatch, implClientGo} {
		rows = append(rows,
			Row{name, impl, "events-per-sec", median(rates[impl]), "events/s"},
			Row{name, impl, "allocs-per-event", median(allocs[impl]), "allocs"},
		)
	}
	return rows, nil
}

func eventsOnce(impl string, list *corev1.PodList, pods []*corev1.Pod, lwEvents []lwcache.Event[*corev1.Pod], cgEvents []watch.Event, sinks int) (rate, allocsPerEvent float64, err error) {
	m := len(lwEvents)
	items := slices.Clone(pods)
	c := newPodCounter(len(pods), m, sinks)
	gate := make(chan struct{})
	var inf informerUnderTest
	if impl == implListwatch {
		inf = startListwatch(items, lwEvents, gate, c)
	} else {
		inf = startClientGo(list, cgEvents, gate, c)
	}
	defer inf.stop()
	if err := waitSynced(inf, c); err != nil {
		return 0, 0, err
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	close(gate)
	select {
	case <-c.done:
	case <-time.After(5 * time.Minute):
		return 0, 0, fmt.Errorf("%d events timed out", m)
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	return float64(m) / elapsed.Seconds(), float64(after.Mallocs-before.Mallocs) / float64(m), nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
