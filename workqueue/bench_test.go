package workqueue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%d/object-%d", i%97, i)
	}
	return keys
}

// BenchmarkAddGetDoneSerial is one goroutine doing Add, Get, Done on string
// keys: the steady state must not allocate.
func BenchmarkAddGetDoneSerial(b *testing.B) {
	keys := benchKeys(1024)
	q := NewQueue[string](Config{})
	defer q.ShutDown()
	// Warm the map and the ring up so the loop measures the steady state.
	for _, k := range keys {
		q.Add(k)
	}
	for range keys {
		k, _ := q.Get()
		q.Done(k)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := keys[i&1023]
		q.Add(k)
		got, _ := q.Get()
		q.Done(got)
	}
}

// BenchmarkAddGetDoneParallel is the bench/ load: one producer adding random
// keys out of 10k and four workers doing Get and Done.
func BenchmarkAddGetDoneParallel(b *testing.B) {
	keys := benchKeys(10_000)
	rng := rand.New(rand.NewPCG(1, 2))
	seq := make([]string, 1<<16)
	for i := range seq {
		seq[i] = keys[rng.IntN(len(keys))]
	}
	q := NewQueue[string](Config{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				k, ok := q.Get()
				if !ok {
					return
				}
				q.Done(k)
			}
		})
	}
	// Warm up with every key once, so that the loop measures the steady
	// state rather than the first sight of each key.
	for _, k := range keys {
		q.Add(k)
	}
	for q.Len() > 0 {
		time.Sleep(time.Millisecond)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q.Add(seq[i&(len(seq)-1)])
	}
	_ = q.ShutDownWithDrain(context.Background())
	wg.Wait()
}

// BenchmarkAddAfter measures AddAfter into a growing heap.
func BenchmarkAddAfter(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	q := NewDelayingQueue[int](Config{})
	defer q.ShutDown()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q.AddAfter(i, time.Hour+time.Duration(rng.Int64N(int64(time.Hour))))
	}
}

// BenchmarkAddGetDoneSerialMetrics is the serial loop with no-op metrics, to show their
// bookkeeping cost.
func BenchmarkAddGetDoneSerialMetrics(b *testing.B) {
	keys := benchKeys(1024)
	q := NewQueue[string](Config{Name: "bench", MetricsProvider: NoopMetricsProvider{}})
	defer q.ShutDown()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := keys[i&1023]
		q.Add(k)
		got, _ := q.Get()
		q.Done(got)
	}
}
