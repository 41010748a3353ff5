package cache_test

import (
	"context"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

// replayLW lists a fixed set of objects and then replays a fixed slice of
// watch events, so that a benchmark measures the informer, not a server.
type replayLW struct {
	items  []*corev1.Pod
	events []cache.Event[*corev1.Pod]
}

func (l *replayLW) List(context.Context, metav1.ListOptions) (*cache.List[*corev1.Pod], error) {
	return &cache.List[*corev1.Pod]{Items: l.items, ResourceVersion: "1"}, nil
}

// SupportsWatchList says the replay cannot stream a list: reflectors list
// it at once.
func (l *replayLW) SupportsWatchList() bool { return false }

func (l *replayLW) Watch(ctx context.Context, _ metav1.ListOptions) (cache.Watcher[*corev1.Pod], error) {
	return &replayWatcher{ctx: ctx, events: l.events, stop: make(chan struct{})}, nil
}

type replayWatcher struct {
	ctx      context.Context
	events   []cache.Event[*corev1.Pod]
	next     int
	stop     chan struct{}
	stopOnce sync.Once
}

func (w *replayWatcher) Next() (cache.Event[*corev1.Pod], error) {
	if w.next < len(w.events) {
		w.next++
		return w.events[w.next-1], nil
	}
	select {
	case <-w.ctx.Done():
	case <-w.stop:
	}
	return cache.Event[*corev1.Pod]{}, io.EOF
}

func (w *replayWatcher) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

func benchPods(n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace:       "ns-" + strconv.Itoa(i%20),
			Name:            "pod-" + strconv.Itoa(i),
			ResourceVersion: "1",
			Labels:          map[string]string{"app": "web-" + strconv.Itoa(i%50)},
		}}
	}
	return pods
}

// BenchmarkInformerSync measures the initial sync of 10k pods: list,
// DeltaFIFO, Indexer and handler, per pod.
func BenchmarkInformerSync(b *testing.B) {
	lw := &replayLW{items: benchPods(10_000)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var adds atomic.Int64
		done := make(chan struct{})
		_, c := cache.NewIndexerInformer[*corev1.Pod](lw, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc: func(*corev1.Pod, bool) {
				if adds.Add(1) == int64(len(lw.items)) {
					close(done)
				}
			},
		}, cache.InformerOptions{Reflector: cache.ReflectorOptions{Logger: quiet}})
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() { defer close(stopped); c.Run(ctx) }()
		<-done
		cancel()
		<-stopped
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lw.items)), "ns/pod")
}

// BenchmarkInformerEvents measures watch events through the informer to one
// handler: b.N MODIFIED events over 1000 cached pods.
func BenchmarkInformerEvents(b *testing.B) {
	pods := benchPods(1000)
	events := make([]cache.Event[*corev1.Pod], b.N)
	for i := range events {
		p := pods[i%len(pods)].DeepCopy()
		p.ResourceVersion = strconv.Itoa(i + 2)
		events[i] = cache.Event[*corev1.Pod]{Type: cache.EventModified, Object: p}
	}
	lw := &replayLW{items: pods, events: events}
	var updates atomic.Int64
	done := make(chan struct{})
	_, c := cache.NewIndexerInformer[*corev1.Pod](lw, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
		UpdateFunc: func(_, _ *corev1.Pod) {
			if updates.Add(1) == int64(b.N) {
				close(done)
			}
		},
	}, cache.InformerOptions{Reflector: cache.ReflectorOptions{Logger: quiet}})
	b.ReportAllocs()
	b.ResetTimer()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); c.Run(ctx) }()
	<-done
	b.StopTimer()
	cancel()
	<-stopped
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
