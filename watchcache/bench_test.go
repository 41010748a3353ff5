package watchcache

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/storage"
)

// benchPods writes n pods over 10 namespaces.
func benchPods(b *testing.B, n int) *Cache[*corev1.Pod] {
	b.Helper()
	st := newStore(b)
	ctx := context.Background()
	for i := range n {
		ns := fmt.Sprint("ns", i%10)
		if _, err := st.Create(ctx, podKey(ns, fmt.Sprintf("pod-%06d", i)), podValue(ns, fmt.Sprintf("pod-%06d", i), map[string]string{"app": fmt.Sprint("a", i%4)}, corev1.PodRunning)); err != nil {
			b.Fatal(err)
		}
	}
	return newPodCache(b, st, nil)
}

// BenchmarkList100k lists 100,000 pods at resourceVersion "0".
func BenchmarkList100k(b *testing.B) {
	c := benchPods(b, 100_000)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		opts ListOptions
	}{
		{"all", ListOptions{ResourceVersion: "0"}},
		{"page500", ListOptions{ResourceVersion: "0", Limit: 500}},
		{"label", ListOptions{ResourceVersion: "0", Label: labels.SelectorFromSet(labels.Set{"app": "a1"})}},
		{"namespace", ListOptions{ResourceVersion: "0", Namespace: "ns3"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := c.List(ctx, bc.opts)
				if err != nil || len(res.Items) == 0 {
					b.Fatalf("List: %d items, %v", len(res.Items), err)
				}
			}
		})
	}
}

// BenchmarkList100kAfterWrite lists 100,000 pods at "0" with one write
// between lists, so every list builds a new snapshot from the previous one.
func BenchmarkList100kAfterWrite(b *testing.B) {
	c := benchPods(b, 100_000)
	ctx := context.Background()
	st := c.cfg.Storage
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		rev := put(b, st, "ns0", "churn", map[string]string{"i": fmt.Sprint(i)}, corev1.PodRunning)
		seen(c, rev)
		res, err := c.List(ctx, ListOptions{ResourceVersion: "0"})
		if err != nil || res.ResourceVersion != rev {
			b.Fatalf("List at %d: %v", res.ResourceVersion, err)
		}
	}
}

// BenchmarkFanOut measures deliveries per second of pod updates to 1,000
// watchers, each drained by its own goroutine, end to end from the storage
// write.
func BenchmarkFanOut(b *testing.B) {
	const watchers, round = 1000, 64
	st := newStore(b)
	put(b, st, "ns", "seed", nil, corev1.PodPending)
	c := newPodCache(b, st, func(cfg *Config[*corev1.Pod]) { cfg.WatcherBuffer = 4 * round })
	ctx := context.Background()
	var roundDone sync.WaitGroup
	var readers sync.WaitGroup
	ws := make([]*Watcher[*corev1.Pod], watchers)
	for i := range ws {
		w, err := c.Watch(ctx, WatchOptions{ResourceVersion: fmt.Sprint(c.ResourceVersion())})
		if err != nil {
			b.Fatal(err)
		}
		ws[i] = w
		readers.Go(func() {
			n := 0
			for range w.Events() {
				if n++; n%round == 0 {
					roundDone.Done()
				}
			}
		})
	}
	b.ResetTimer()
	start := time.Now()
	events := 0
	for events < b.N {
		// Rounds smaller than the buffers: a reader never falls behind by
		// more than a round, so none is cut off.
		roundDone.Add(watchers)
		for i := range round {
			put(b, st, "ns", fmt.Sprint("p", i%50), map[string]string{"n": fmt.Sprint(events)}, corev1.PodRunning)
			events++
		}
		roundDone.Wait()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(events*watchers)/elapsed.Seconds(), "deliveries/s")
	for _, w := range ws {
		w.Stop()
		if w.Err() != nil {
			b.Fatalf("watcher ended: %v", w.Err())
		}
	}
	readers.Wait()
}

// BenchmarkConsistentList10k lists 10,000 pods at resourceVersion "" (a
// consistent read) with a write under another prefix before each list, so
// that storage's revision is always one the cache has seen no event at.
// "progress" is served by the cache once storage's watch reports progress;
// "storage" is what a cache that cannot learn of it does, reading storage
// (a store whose watches report nothing, and no wait for them).
func BenchmarkConsistentList10k(b *testing.B) {
	for _, bc := range []struct {
		name   string
		silent bool
	}{
		{"progress", false},
		{"storage", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			mem := newStore(b)
			var st storage.Interface = mem
			if bc.silent {
				st = silentStore{mem}
			}
			ctx := context.Background()
			for i := range 10_000 {
				ns := fmt.Sprint("ns", i%10)
				if _, err := st.Create(ctx, podKey(ns, fmt.Sprintf("pod-%06d", i)), podValue(ns, fmt.Sprintf("pod-%06d", i), nil, corev1.PodRunning)); err != nil {
					b.Fatal(err)
				}
			}
			c := newPodCache(b, st, func(cfg *Config[*corev1.Pod]) {
				if bc.silent {
					cfg.ProgressTimeout = time.Nanosecond
				}
			})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := st.Create(ctx, fmt.Sprintf("/configmaps/ns/cm-%d", i), []byte("{}")); err != nil {
					b.Fatal(err)
				}
				res, err := c.List(ctx, ListOptions{})
				if err != nil || len(res.Items) != 10_000 {
					b.Fatalf("List: %v", err)
				}
			}
			s := c.Stats()
			b.ReportMetric(float64(s.FreshFallbacks)/float64(s.FreshReads+s.FreshFallbacks), "fallbacks/op")
		})
	}
}
