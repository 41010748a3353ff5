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
	benchSerial(b, NewQueue[string](Config{}), nil)
}

// BenchmarkPriorityAddGetDoneSerial is BenchmarkAddGetDoneSerial on a
// priority queue: "normal" adds every key at PriorityNormal, "mixed" cycles
// through low, normal and high.
func BenchmarkPriorityAddGetDoneSerial(b *testing.B) {
	for _, bb := range priorityBenches {
		b.Run(bb.name, func(b *testing.B) {
			benchSerial(b, NewQueue[string](Config{}), bb.prio)
		})
	}
}

// priorityBenches are the priority queue's variants of a benchmark: prio
// gives the priority of the i-th Add.
var priorityBenches = []struct {
	name string
	prio func(i int) Priority
}{
	{"normal", func(int) Priority { return PriorityNormal }},
	{"mixed", func(i int) Priority { return Priority(i%3 - 1) }},
}

// benchSerial runs Add, Get, Done in one goroutine; with prio, the Adds
// are AddWithPriority.
func benchSerial(b *testing.B, q *Queue[string], prio func(int) Priority) {
	keys := benchKeys(1024)
	defer q.ShutDown()
	add := func(k string, i int) {
		if prio == nil {
			q.Add(k)
		} else {
			q.AddWithPriority(k, prio(i))
		}
	}
	// Warm the map and the ring up so the loop measures the steady state.
	for i, k := range keys {
		add(k, i)
	}
	for range keys {
		k, _ := q.Get()
		q.Done(k)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		add(keys[i&1023], i)
		got, _ := q.Get()
		q.Done(got)
	}
}

// BenchmarkAddGetDoneParallel is the bench/ load: one producer adding random
// keys out of 10k and four workers doing Get and Done.
func BenchmarkAddGetDoneParallel(b *testing.B) {
	benchParallel(b, nil)
}

// BenchmarkPriorityAddGetDoneParallel is BenchmarkAddGetDoneParallel on a
// priority queue, with the variants of BenchmarkPriorityAddGetDoneSerial.
func BenchmarkPriorityAddGetDoneParallel(b *testing.B) {
	for _, bb := range priorityBenches {
		b.Run(bb.name, func(b *testing.B) { benchParallel(b, bb.prio) })
	}
}

func benchParallel(b *testing.B, prio func(int) Priority) {
	keys := benchKeys(10_000)
	rng := rand.New(rand.NewPCG(1, 2))
	seq := make([]string, 1<<16)
	for i := range seq {
		seq[i] = keys[rng.IntN(len(keys))]
	}
	q := NewQueue[string](Config{})
	add := func(k string, i int) {
		if prio == nil {
			q.Add(k)
		} else {
			q.AddWithPriority(k, prio(i))
		}
	}
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
	for i, k := range keys {
		add(k, i)
	}
	for q.Len() > 0 {
		time.Sleep(time.Millisecond)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		add(seq[i&(len(seq)-1)], i)
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
