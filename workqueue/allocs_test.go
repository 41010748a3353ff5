package workqueue

import (
	"fmt"
	"testing"
)

// TestAddGetDoneNoAllocs asserts what the benchmarks only print: once a
// queue has seen its keys, Add, Get and Done of string keys allocate
// nothing, for the plain queue and for the delaying and rate-limiting
// queues, whose Add, Get and Done are the embedded Queue's. Each run cycles
// through more keys than the ring starts with, adds duplicates, leaves items
// waiting across Gets and re-adds some while they are held, so that the
// ring, the sets, the requeue at Done and the dedup of waiting items are all exercised,
// not only the one-item fast path. The rate-limiting queue also calls
// Forget, as a controller's worker does after a successful sync. The race
// detector adds no allocations here, so the test runs under -race too.
func TestAddGetDoneNoAllocs(t *testing.T) {
	const nkeys = 256
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%d/object-%d", i%7, i)
	}
	type queue interface {
		Add(string) bool
		Get() (string, bool)
		Done(string)
		Len() int
		ShutDown()
	}
	rl := NewRateLimitingQueue[string](nil, Config{})
	tests := []struct {
		name   string
		q      queue
		forget func(string)
	}{
		{"Queue", NewQueue[string](Config{}), nil},
		{"zero Queue", &Queue[string]{}, nil},
		{"DelayingQueue", NewDelayingQueue[string](Config{}), nil},
		{"RateLimitingQueue", rl, rl.Forget},
		{"priority Queue", &prioAdder{Queue: NewQueue[string](Config{})}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.q
			defer q.ShutDown()
			var ops, failures int
			process := func(k string, ok bool) {
				if !ok {
					failures++
					return
				}
				if tt.forget != nil {
					tt.forget(k)
				}
				q.Done(k)
				ops++
			}
			round := func() {
				for _, k := range keys {
					q.Add(k)
				}
				for _, k := range keys[:nkeys/2] {
					q.Add(k) // waiting already: deduplicated
				}
				for i := range nkeys / 2 {
					k, ok := q.Get()
					if ok && i%4 == 0 {
						q.Add(k) // held: comes back at Done
					}
					process(k, ok)
				}
				for q.Len() > 0 {
					process(q.Get())
				}
			}
			// Warm up: ring, sets and limiter state reach their
			// steady sizes.
			for range 4 {
				round()
			}
			allocs := testing.AllocsPerRun(100, round)
			if failures != 0 {
				t.Fatalf("%d Gets found the queue shut down", failures)
			}
			// Every key once, plus the quarter of the first half re-added.
			if want := 105 * (nkeys + nkeys/8); ops != want {
				t.Fatalf("%d items processed over 105 rounds, want %d", ops, want)
			}
			if allocs != 0 {
				t.Fatalf("%v allocations per round of %d Add, %d Get and %d Done, want 0",
					allocs, nkeys+nkeys/2+nkeys/8, nkeys+nkeys/8, nkeys+nkeys/8)
			}
		})
	}
}

// prioAdder adds with AddWithPriority, cycling through low, normal and high,
// so that duplicate adds raise items and leave outdated entries behind.
type prioAdder struct {
	*Queue[string]
	n int
}

func (q *prioAdder) Add(item string) bool {
	q.n++
	return q.AddWithPriority(item, Priority(q.n%3-1))
}
