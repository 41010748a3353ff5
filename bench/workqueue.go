package main

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cgworkqueue "k8s.io/client-go/util/workqueue"

	"github.com/listwatch/listwatch/workqueue"
)

func init() {
	register("workqueue/add-get-done", benchAddGetDone)
	register("workqueue/add-after", benchAddAfter)
}

// queueUnderTest is what both implementations offer the workloads.
type queueUnderTest[T comparable] struct {
	add      func(T)
	addAfter func(T, time.Duration)
	len      func() int
	get      func() (T, bool)
	done     func(T)
	drain    func()
}

func listwatchQueue[T comparable]() queueUnderTest[T] {
	q := workqueue.NewDelayingQueue[T](workqueue.Config{})
	return queueUnderTest[T]{
		add:      func(x T) { q.Add(x) },
		addAfter: func(x T, d time.Duration) { q.AddAfter(x, d) },
		len:      q.Len,
		get:      q.Get,
		done:     q.Done,
		drain:    func() { _ = q.ShutDownWithDrain(context.Background()) },
	}
}

func clientGoQueue[T comparable]() queueUnderTest[T] {
	q := cgworkqueue.NewTypedDelayingQueue[T]()
	return queueUnderTest[T]{
		add:      q.Add,
		addAfter: q.AddAfter,
		len:      q.Len,
		get: func() (T, bool) {
			x, shutdown := q.Get()
			return x, !shutdown
		},
		done:  q.Done,
		drain: q.ShutDownWithDrain,
	}
}

// workqueueRounds is how many rounds each workqueue workload runs per
// implementation, alternating them; each reports its median round. Both
// workloads keep the two CPUs of the machines they run on busy, and a round
// that other processes interrupt is slower by a large factor, and the speed
// of the machine drifts by as much as 40% from one minute to the next:
// fifteen rounds keep two or three such rounds from moving the median far.
const workqueueRounds = 15

// benchAddGetDone: one producer adds random keys out of 10k, four workers
// Get and Done them; the clock stops when the drained queue has shut down.
func benchAddGetDone(cfg config) ([]Row, error) {
	const keys, workers = 10_000, 4
	n := cfg.size(1_000_000)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("namespace-%d/object-%d", i%97, i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seq := make([]string, n)
	for i := range seq {
		seq[i] = names[rng.IntN(keys)]
	}

	run := func(impl string, q queueUnderTest[string]) []Row {
		var wg sync.WaitGroup
		var processed [workers]int
		var ms0, ms1 runtime.MemStats
		for w := range workers {
			wg.Go(func() {
				// Count locally: adjacent counters would share a cache
				// line and slow both implementations down.
				n := 0
				for {
					x, ok := q.get()
					if !ok {
						processed[w] = n
						return
					}
					n++
					q.done(x)
				}
			})
		}
		// Warm up: every key once through the queue, so that the
		// allocations counted are those of the steady state, not the
		// first sight of each key or the growth of either queue's maps.
		// It is neither timed nor counted.
		for _, k := range names {
			q.add(k)
		}
		for q.len() > 0 {
			time.Sleep(time.Millisecond)
		}
		// Start each round from a collected heap, so that neither
		// implementation pays during its round for the garbage of the
		// round before it.
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		start := time.Now()
		for _, k := range seq {
			q.add(k)
		}
		q.drain()
		wg.Wait()
		elapsed := time.Since(start)
		runtime.ReadMemStats(&ms1)
		total := 0
		for _, p := range processed {
			total += p
		}
		// Each key was processed exactly once in the warm-up.
		total -= keys
		w := "workqueue/add-get-done"
		// Throughput counts every queue operation: the n Adds plus a Get
		// and a Done per item processed. Adds per second alone would
		// reward a queue for handing items out slowly, since a longer
		// backlog deduplicates more Adds into cheap no-ops while the
		// workers do less; counting the Gets and Dones credits the work
		// the queue actually delivered.
		ops := float64(n + 2*total)
		return []Row{
			{w, impl, "Add+Get+Done ops/s", ops / elapsed.Seconds(), "ops/s"},
			{w, impl, "adds/s", float64(n) / elapsed.Seconds(), "ops/s"},
			{w, impl, "processed", float64(total), "items"},
			// The rate at which the workers got items: a queue whose Adds
			// are faster deduplicates more and processes fewer items in
			// all, which says nothing about how fast it hands them out.
			{w, impl, "processed/s", float64(total) / elapsed.Seconds(), "items/s"},
			{w, impl, "allocs per add", float64(ms1.Mallocs-ms0.Mallocs) / float64(n), "allocs"},
			{w, impl, "bytes per add", float64(ms1.TotalAlloc-ms0.TotalAlloc) / float64(n), "B"},
		}
	}
	// The machine may be shared: alternate the implementations over a few
	// rounds and keep each one's median round, by throughput.
	results := map[string][][]Row{}
	load := loadAverage()
	// Each listwatch round over the client-go round just before it: the
	// two run back to back, so a machine whose speed drifts from minute to
	// minute moves both sides of each pair alike, where it can move the
	// two medians apart.
	paired := make([]float64, 0, workqueueRounds)
	for range workqueueRounds {
		cg := run(implClientGo, clientGoQueue[string]())
		lw := run(implListwatch, listwatchQueue[string]())
		results[implClientGo] = append(results[implClientGo], cg)
		results[implListwatch] = append(results[implListwatch], lw)
		paired = append(paired, lw[0].Value/cg[0].Value)
	}
	var rows []Row
	for _, impl := range []string{implClientGo, implListwatch} {
		rs := results[impl]
		slices.SortFunc(rs, func(a, b []Row) int { return cmp.Compare(a[0].Value, b[0].Value) })
		rows = append(rows, rs[len(rs)/2]...)
		rows = append(rows,
			Row{"workqueue/add-get-done", impl, "Add+Get+Done ops/s, worst round", rs[0][0].Value, "ops/s"},
			Row{"workqueue/add-get-done", impl, "Add+Get+Done ops/s, best round", rs[len(rs)-1][0].Value, "ops/s"})
		rows = append(rows, conditions("workqueue/add-get-done", impl, load)...)
	}
	slices.Sort(paired)
	rows = append(rows, Row{"workqueue/add-get-done", implListwatch, "Add+Get+Done ops/s, median of paired rounds' ratios", paired[len(paired)/2], "x client-go"})
	return rows, nil
}

// conditions records what the figures depend on besides the code: both
// workloads are bound by how much CPU the process gets, and lateness by how
// soon a woken goroutine runs, which on a shared machine is mostly up to the
// other processes on it.
func conditions(workload, impl string, load float64) []Row {
	rows := []Row{{workload, impl, "GOMAXPROCS", float64(runtime.GOMAXPROCS(0)), "procs"}}
	if load >= 0 {
		rows = append(rows, Row{workload, impl, "load average (1 min) before", load, "tasks"})
	}
	return rows
}

// loadAverage returns the machine's one-minute load average, or -1 where
// /proc/loadavg cannot tell it.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// benchAddAfter: 100k distinct items added with random delays of 0–100ms;
// four workers record how late each was delivered.
func benchAddAfter(cfg config) ([]Row, error) {
	const workers = 4
	n := cfg.size(100_000)
	rng := rand.New(rand.NewPCG(3, 4))
	delays := make([]time.Duration, n)
	for i := range delays {
		delays[i] = time.Duration(rng.Int64N(int64(100 * time.Millisecond)))
	}

	run := func(impl string, q queueUnderTest[int]) ([]Row, []time.Duration, error) {
		due := make([]time.Time, n)
		late := make([]time.Duration, n)
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := 0
		all := make(chan struct{})
		for range workers {
			wg.Go(func() {
				for {
					x, ok := q.get()
					if !ok {
						return
					}
					late[x] = time.Since(due[x])
					q.done(x)
					mu.Lock()
					got++
					if got == n {
						close(all)
					}
					mu.Unlock()
				}
			})
		}
		// As in add-get-done: from a collected heap, so that neither pays
		// for the other's garbage during its round.
		runtime.GC()
		cpu0, cpuOK := processCPU()
		start := time.Now()
		for i, d := range delays {
			// due[i] is written before the item enters the queue, which
			// orders it before the worker that reads it.
			due[i] = time.Now().Add(d)
			q.addAfter(i, d)
		}
		addElapsed := time.Since(start)
		select {
		case <-all:
		case <-time.After(30 * time.Second):
			q.drain()
			wg.Wait()
			return nil, nil, fmt.Errorf("%s: only %d of %d delivered", impl, got, n)
		}
		cpu1, _ := processCPU()
		q.drain()
		wg.Wait()
		slices.Sort(late)
		w := "workqueue/add-after"
		rows := []Row{
			{w, impl, "AddAfter calls/s", float64(n) / addElapsed.Seconds(), "ops/s"},
			{w, impl, "lateness p50", percentileMs(late, 0.50), "ms"},
			{w, impl, "lateness p99", percentileMs(late, 0.99), "ms"},
			{w, impl, "lateness max", percentileMs(late, 1), "ms"},
		}
		if cpuOK {
			// The whole process's CPU, from the first AddAfter to the last
			// item processed: the producer, the workers, the queue's own
			// goroutines and the runtime's, timers included. Lateness can
			// be bought with CPU; this row shows the price.
			rows = append(rows, Row{w, impl, "CPU per item", float64(cpu1-cpu0) / float64(time.Microsecond) / float64(n), "µs"})
		}
		return rows, late, nil
	}
	// Median round by p99 lateness, as for add-get-done.
	results := map[string][][]Row{}
	// Every delivery of every round, for the p99 of them all: the bad
	// rounds count with the weight of their items, not just as one round
	// past the median.
	pooled := map[string][]time.Duration{}
	load := loadAverage()
	for range workqueueRounds {
		for _, impl := range []string{implClientGo, implListwatch} {
			q := listwatchQueue[int]()
			if impl == implClientGo {
				q = clientGoQueue[int]()
			}
			r, late, err := run(impl, q)
			if err != nil {
				return nil, err
			}
			results[impl] = append(results[impl], r)
			pooled[impl] = append(pooled[impl], late...)
		}
	}
	var rows []Row
	for _, impl := range []string{implClientGo, implListwatch} {
		rs := results[impl]
		slices.SortFunc(rs, func(a, b []Row) int { return cmp.Compare(a[2].Value, b[2].Value) })
		rows = append(rows, rs[len(rs)/2]...)
		under := 0
		for _, r := range rs {
			if r[2].Value < 2 {
				under++
			}
		}
		all := pooled[impl]
		slices.Sort(all)
		rows = append(rows,
			Row{"workqueue/add-after", impl, "lateness p99 of all rounds' items", percentileMs(all, 0.99), "ms"},
			Row{"workqueue/add-after", impl, "lateness p99, best round", rs[0][2].Value, "ms"},
			Row{"workqueue/add-after", impl, "lateness p99, worst round", rs[len(rs)-1][2].Value, "ms"},
			Row{"workqueue/add-after", impl, "rounds with lateness p99 under 2ms", float64(under) / float64(len(rs)), "share"})
		rows = append(rows, conditions("workqueue/add-after", impl, load)...)
	}
	return rows, nil
}

// percentileMs returns the p-quantile (0 to 1) of sorted, non-empty
// durations, in milliseconds.
func percentileMs(sorted []time.Duration, p float64) float64 {
	i := min(len(sorted)-1, int(p*float64(len(sorted))))
	return float64(sorted[i]) / float64(time.Millisecond)
}
