package workqueue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// step is one action of an ordering test, under synctest's clock.
type step struct {
	op   string // "add", "addPlain", "sleep", "get", "done", "len"
	item string
	p    Priority
	d    time.Duration
	n    int
}

func add(item string, p Priority) step { return step{op: "add", item: item, p: p} }
func addPlain(item string) step        { return step{op: "addPlain", item: item} }
func sleep(d time.Duration) step       { return step{op: "sleep", d: d} }
func get(item string) step             { return step{op: "get", item: item} }
func done(item string) step            { return step{op: "done", item: item} }
func wantLen(n int) step               { return step{op: "len", n: n} }

// TestPriorityOrdering checks the order AddWithPriority's doc states, with
// an aging step of one second: priority first, FIFO within a priority,
// dedup keeping the earlier rank, aging by one level per step, ties to the
// earlier added, re-adds while processing queued at Done.
func TestPriorityOrdering(t *testing.T) {
	const s = time.Second // the aging step
	tests := []struct {
		name  string
		steps []step
		want  []string // the order of the Gets after steps
	}{
		{"higher priority first", []step{
			add("low", PriorityLow), add("normal", PriorityNormal), add("high", PriorityHigh),
		}, []string{"high", "normal", "low"}},
		{"FIFO within a priority", []step{
			add("l1", PriorityLow), add("a", PriorityNormal), add("b", PriorityNormal),
			add("l2", PriorityLow), add("c", PriorityNormal), add("l3", PriorityLow),
		}, []string{"a", "b", "c", "l1", "l2", "l3"}},
		{"Add is PriorityNormal", []step{
			add("low", PriorityLow), addPlain("plain"), add("high", PriorityHigh),
		}, []string{"high", "plain", "low"}},
		{"dedup keeps the higher priority", []step{
			add("a", PriorityLow), add("b", PriorityNormal), add("a", PriorityHigh), add("a", PriorityLow),
			wantLen(2),
		}, []string{"a", "b"}},
		{"dedup never lowers", []step{
			add("a", PriorityHigh), add("b", PriorityNormal), add("a", PriorityLow), addPlain("a"),
			wantLen(2),
		}, []string{"a", "b"}},
		{"dedup keeps the place an item aged into", []step{
			// a ranks at 1s; at 2.5s a High add would rank it at 1.5s,
			// behind b, so it stays where it is.
			add("a", PriorityLow), sleep(2500 * time.Millisecond),
			add("b", PriorityHigh), add("a", PriorityHigh),
		}, []string{"a", "b"}},
		{"dedup raises within the aging window", []step{
			// a ranks at 1s; at 0.5s a High add ranks it at -0.5s.
			add("a", PriorityLow), sleep(500 * time.Millisecond),
			add("b", PriorityHigh), add("a", PriorityHigh),
		}, []string{"b", "a"}},
		{"aging: a low item overtakes normal items added a step after it", []step{
			add("low", PriorityLow), sleep(500 * time.Millisecond),
			add("before", PriorityNormal), sleep(time.Second),
			add("after", PriorityNormal),
		}, []string{"before", "low", "after"}},
		{"aging: one level per step, over two levels", []step{
			add("low", PriorityLow), sleep(1500 * time.Millisecond),
			add("h1", PriorityHigh), sleep(time.Second),
			add("h2", PriorityHigh),
		}, []string{"h1", "low", "h2"}},
		{"a tie goes to the earlier added", []step{
			add("low", PriorityLow), sleep(s), add("normal", PriorityNormal),
			sleep(s), add("high", PriorityHigh),
		}, []string{"low", "normal", "high"}},
		{"re-added while processing: queued at Done at the highest priority", []step{
			add("a", PriorityNormal), get("a"), add("a", PriorityLow), add("a", PriorityHigh),
			add("b", PriorityNormal), sleep(500 * time.Millisecond), wantLen(1), done("a"), wantLen(2),
		}, []string{"a", "b"}},
		{"re-added while processing counts as added at Done", []step{
			add("low", PriorityLow), add("a", PriorityNormal), get("a"), add("a", PriorityNormal),
			sleep(2 * s), done("a"),
		}, []string{"low", "a"}},
		{"items queued before the first AddWithPriority are PriorityNormal", []step{
			addPlain("a"), addPlain("b"), addPlain("busy"), get("a"), addPlain("a"),
			add("low", PriorityLow), add("high", PriorityHigh), done("a"),
		}, []string{"high", "b", "busy", "a", "low"}},
		{"priorities beyond the bounds count as the bounds", []step{
			add("max", MaxPriority), add("above", 100), add("min", MinPriority), add("below", -100),
		}, []string{"max", "above", "min", "below"}},
		{"Done of an item not handed out does nothing", []step{
			add("a", PriorityLow), done("a"), done("never"), wantLen(1),
		}, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := NewQueue[string](Config{AgingStep: s})
				defer q.ShutDown()
				for i, st := range tt.steps {
					switch st.op {
					case "add":
						if !q.AddWithPriority(st.item, st.p) {
							t.Fatalf("step %d: AddWithPriority refused", i)
						}
					case "addPlain":
						q.Add(st.item)
					case "sleep":
						time.Sleep(st.d)
					case "get":
						if got, ok := q.Get(); !ok || got != st.item {
							t.Fatalf("step %d: Get = %q, %v, want %q", i, got, ok, st.item)
						}
					case "done":
						q.Done(st.item)
					case "len":
						if n := q.Len(); n != st.n {
							t.Fatalf("step %d: Len = %d, want %d", i, n, st.n)
						}
					}
				}
				var got []string
				for q.Len() > 0 {
					x, _ := q.Get()
					got = append(got, x)
					q.Done(x)
				}
				if !slices.Equal(got, tt.want) {
					t.Fatalf("order %q, want %q", got, tt.want)
				}
				assertEmpty(t, q)
			})
		})
	}
}

// assertEmpty checks that a queue with nothing queued or held keeps
// nothing of what went through it.
func assertEmpty[T comparable](t *testing.T, q *Queue[T]) {
	t.Helper()
	q.lock()
	defer q.mu.Unlock()
	if q.items.len() != 0 || len(q.dirty) != 0 || len(q.processing) != 0 {
		t.Errorf("len %d, dirty %d, processing %d, want 0", q.items.len(), len(q.dirty), len(q.processing))
	}
	if pq := q.prio; pq != nil {
		entries := 0
		for l := range pq.levels {
			entries += pq.levels[l].len()
		}
		if pq.n != 0 || len(pq.slots) != 0 || entries != 0 || pq.used != 0 {
			t.Errorf("priority queue: n %d, slots %d, entries %d, levels in use %b, want 0",
				pq.n, len(pq.slots), entries, pq.used)
		}
	}
}

// TestPriorityStarvation runs workers under a constant stream of
// higher-priority work: each worker, as it takes an item, adds a new one,
// so that the queue is never without higher-priority items and a strict
// priority queue would never hand the lower-priority item out. With aging
// it must be handed out within the bound AddWithPriority's doc states: an
// item of priority p added at t goes before every item of priority q added
// after t + (q − p) × AgingStep. The stream keeps `outstanding` items
// queued or held, so at that moment at most outstanding − workers items
// rank ahead of it, each worker finishes its current item within `work`,
// and then the items ahead take (outstanding − workers) / workers × work:
// the item is handed out in [t + (q−p)·step, t + (q−p)·step + bound].
func TestPriorityStarvation(t *testing.T) {
	const (
		workers     = 2
		outstanding = 8
		work        = 100 * time.Millisecond
		slack       = work + (outstanding-workers)/workers*work
	)
	tests := []struct {
		name           string
		stream, item   Priority
		step           time.Duration
		starves        bool // the step is so long that the test sees starvation
		wantAfterSteps int  // q − p
	}{
		{"low item, high stream", PriorityHigh, PriorityLow, 10 * time.Second, false, 2},
		{"low item, normal stream", PriorityNormal, PriorityLow, 10 * time.Second, false, 1},
		{"normal item, high stream", PriorityHigh, PriorityNormal, 30 * time.Second, false, 1},
		{"lowest item, highest stream", MaxPriority, MinPriority, time.Second, false, 6},
		{"low item, high stream, default step", PriorityHigh, PriorityLow, 0, false, 2},
		{"an aging step longer than the test: starvation", PriorityHigh, PriorityLow, 1000 * time.Hour, true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := NewQueue[string](Config{AgingStep: tt.step})
				step := tt.step
				if step == 0 {
					step = DefaultAgingStep
				}
				var next atomic.Int64
				addStream := func() {
					q.AddWithPriority(fmt.Sprintf("stream-%d", next.Add(1)), tt.stream)
				}
				for range outstanding {
					addStream()
				}
				gotAt := make(chan time.Time, 1)
				var streamed atomic.Int64
				var wg sync.WaitGroup
				for range workers {
					wg.Go(func() {
						for {
							x, ok := q.Get()
							if !ok {
								return
							}
							if x == "item" {
								gotAt <- time.Now()
							} else {
								streamed.Add(1)
								addStream()
							}
							time.Sleep(work)
							q.Done(x)
						}
					})
				}
				time.Sleep(5 * time.Second)
				start := time.Now()
				q.AddWithPriority("item", tt.item)
				horizon := time.Duration(tt.wantAfterSteps)*step + slack
				if tt.starves {
					horizon = 10 * time.Minute
				}
				timeout := time.After(horizon + time.Nanosecond)
				select {
				case at := <-gotAt:
					waited := at.Sub(start)
					earliest := time.Duration(tt.wantAfterSteps) * step
					t.Logf("handed out after %v (bound [%v, %v]), %d stream items processed", waited, earliest, horizon, streamed.Load())
					if tt.starves {
						t.Errorf("handed out after %v with an aging step of %v", waited, step)
					} else if waited < earliest {
						t.Errorf("handed out after %v, before the stream items added within %v of it", waited, earliest)
					}
				case <-timeout:
					if !tt.starves {
						t.Errorf("not handed out within %v", horizon)
					} else {
						t.Logf("starved for %v, %d stream items processed", horizon, streamed.Load())
					}
				}
				// The stream never ran dry: the workers were busy all along.
				if n, want := streamed.Load(), int64(workers*(horizon/work)/2); n < want {
					t.Errorf("%d stream items processed, want at least %d", n, want)
				}
				q.ShutDown()
				wg.Wait()
			})
		})
	}
}

// model is the reference a priority queue is checked against: the rules
// of AddWithPriority written out naively.
type model struct {
	step       time.Duration
	start      time.Time
	seq        int
	queued     map[int]modelEntry
	pending    map[int]Priority // added while processing
	processing map[int]bool
}

type modelEntry struct {
	p   Priority
	at  time.Duration
	seq int
}

func (m *model) rank(e modelEntry) time.Duration { return e.at - time.Duration(e.p)*m.step }

func (m *model) now() time.Duration { return time.Since(m.start) }

func (m *model) add(x int, p Priority) {
	p = min(max(p, MinPriority), MaxPriority)
	if m.processing[x] {
		if old, ok := m.pending[x]; !ok || p > old {
			m.pending[x] = p
		}
		return
	}
	e := modelEntry{p: p, at: m.now()}
	if old, ok := m.queued[x]; ok && m.rank(e) >= m.rank(old) {
		return
	}
	m.seq++
	e.seq = m.seq
	m.queued[x] = e
}

// first returns the item Get must hand out.
func (m *model) first() (int, modelEntry) {
	best, be := -1, modelEntry{}
	for x, e := range m.queued {
		if best < 0 || m.rank(e) < m.rank(be) ||
			m.rank(e) == m.rank(be) && (e.at < be.at || e.at == be.at && e.seq < be.seq) {
			best, be = x, e
		}
	}
	return best, be
}

func (m *model) done(x int) {
	if !m.processing[x] {
		return
	}
	delete(m.processing, x)
	if p, ok := m.pending[x]; ok {
		delete(m.pending, x)
		m.seq++
		m.queued[x] = modelEntry{p: p, at: m.now(), seq: m.seq}
	}
}

// TestPriorityHistories runs random histories of Add and AddWithPriority
// (priorities in and beyond the bounds), Get, Done and time passing under
// synctest, against the model, and checks at every step that no item is
// lost or duplicated (Len and the items handed out match the model), that
// no item is handed out while it is held, that every Get hands out the
// item the rules name, and that no item is ever passed by one added after
// its aging bound, t + (MaxPriority − p) × AgingStep. At the end the queue
// is drained and must hand out exactly what the model still holds, then
// keep nothing. One history in ten is long, over many keys, and half of
// them compact outdated entries at every chance, so that compaction is
// checked against the model too.
func TestPriorityHistories(t *testing.T) {
	histories, ops := 300, 400
	if testing.Short() {
		histories = 50
	}
	const step = time.Second
	for h := range histories {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(h), 39))
			q := NewQueue[int](Config{AgingStep: step})
			defer q.ShutDown()
			m := &model{step: step, start: time.Now(), queued: map[int]modelEntry{},
				pending: map[int]Priority{}, processing: map[int]bool{}}
			keys, ops, sleepScale, twoLevels := 4+rng.IntN(20), ops, 1.0, false
			if h%10 == 0 {
				// Many keys, long queues, two priorities and little time
				// passing: many items are raised.
				keys, ops, sleepScale, twoLevels = 100+rng.IntN(100), 10*ops, 0.05, true
			}
			if h%2 == 0 {
				// Compact as soon as half a level is outdated entries.
				q.lock()
				q.startPriorities()
				q.prio.compactMin = 1
				q.mu.Unlock()
			}
			var handedOut int
			fail := func(i int, format string, args ...any) {
				t.Helper()
				t.Fatalf("history %d, op %d: %s", h, i, fmt.Sprintf(format, args...))
			}
			getAndCheck := func(i int) int {
				want, we := m.first()
				x, ok := q.Get()
				if !ok {
					fail(i, "Get: queue shut down")
				}
				if m.processing[x] {
					fail(i, "Get handed out %d, which is held", x)
				}
				if _, ok := m.queued[x]; !ok {
					fail(i, "Get handed out %d, which was not queued", x)
				}
				for y, e := range m.queued {
					if y != x && m.queued[x].at > e.at+time.Duration(MaxPriority-e.p)*step {
						fail(i, "%d (added at %v, priority %d) passed by %d, added at %v past its bound",
							y, e.at, e.p, x, m.queued[x].at)
					}
				}
				if x != want {
					fail(i, "Get = %d %+v, want %d %+v", x, m.queued[x], want, we)
				}
				delete(m.queued, x)
				m.processing[x] = true
				handedOut++
				return x
			}
			for i := range ops {
				switch r := rng.IntN(100); {
				case r < 35:
					p := Priority(rng.IntN(int(MaxPriority-MinPriority)+3)) + MinPriority - 1
					if twoLevels {
						p = PriorityLow + 2*Priority(rng.IntN(2))
					}
					if r < 5 {
						q.Add(i % keys)
						m.add(i%keys, PriorityNormal)
					} else {
						x := rng.IntN(keys)
						q.AddWithPriority(x, p)
						m.add(x, p)
					}
				case r < 60:
					if q.Len() > 0 {
						getAndCheck(i)
					}
				case r < 85:
					held := make([]int, 0, len(m.processing))
					for x := range m.processing {
						held = append(held, x)
					}
					slices.Sort(held)
					if len(held) > 0 {
						x := held[rng.IntN(len(held))]
						q.Done(x)
						m.done(x)
					} else {
						q.Done(rng.IntN(keys)) // not held: nothing happens
					}
				default:
					// Mostly less than a step, sometimes several.
					time.Sleep(time.Duration(sleepScale * rng.ExpFloat64() * float64(step) / 2).Round(time.Millisecond))
				}
				if n := q.Len(); n != len(m.queued) {
					fail(i, "Len = %d, model has %d queued", n, len(m.queued))
				}
				if err := checkEntries(q); err != nil {
					fail(i, "%v", err)
				}
			}
			// Drain: everything queued or pending comes out, once.
			for len(m.processing) > 0 || len(m.queued) > 0 {
				for x := range m.processing {
					q.Done(x)
					m.done(x)
				}
				for len(m.queued) > 0 {
					getAndCheck(ops)
				}
			}
			if q.Len() != 0 {
				t.Fatalf("history %d: Len = %d after the drain", h, q.Len())
			}
			assertEmpty(t, q)
			if h == 0 {
				t.Logf("history 0: %d keys, %d handed out", keys, handedOut)
			}
		})
	}
}

// checkEntries checks the memory bound AddWithPriority's doc states: each
// priority's FIFO holds at most twice its items plus compactMin − 1
// entries, and the outdated ones are counted exactly.
func checkEntries[T comparable](q *Queue[T]) error {
	q.lock()
	defer q.mu.Unlock()
	pq := q.prio
	if pq == nil {
		return nil
	}
	for l := range pq.levels {
		r := &pq.levels[l]
		stale := 0
		for i := range r.len() {
			if !pq.live(r.buf[(r.head+i)&(len(r.buf)-1)]) {
				stale++
			}
		}
		items := r.len() - stale
		if stale != pq.stale[l] {
			return fmt.Errorf("priority %d: %d outdated entries, counted %d", l+int(MinPriority), stale, pq.stale[l])
		}
		if r.len() > 2*items+pq.compactMin-1 {
			return fmt.Errorf("priority %d: %d entries for %d items", l+int(MinPriority), r.len(), items)
		}
		if (r.len() > 0) != (pq.used&(1<<l) != 0) {
			return fmt.Errorf("priority %d: %d entries, in use %v", l+int(MinPriority), r.len(), pq.used&(1<<l) != 0)
		}
	}
	return nil
}

// TestPriorityNoItemHeldByTwoWorkers is TestNoItemHeldByTwoWorkers's check
// for a priority queue, with real time and concurrency: random priorities
// from a producer and from workers re-adding what they hold, an in-flight
// flag per key, and a generation per key proving that the last processing
// of every key started after its last Add.
func TestPriorityNoItemHeldByTwoWorkers(t *testing.T) {
	const keys, workers = 500, 8
	adds := stressAdds / 4
	if testing.Short() {
		adds = min(adds, 20_000)
	}
	var inFlight [keys]atomic.Bool
	var added, seen [keys]atomic.Int64
	var violations, processed atomic.Int64
	q := NewQueue[int](Config{AgingStep: time.Millisecond})
	randPrio := func(rng *rand.Rand) Priority { return Priority(rng.IntN(3) - 1) }
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for {
				k, ok := q.Get()
				if !ok {
					return
				}
				processed.Add(1)
				if !inFlight[k].CompareAndSwap(false, true) {
					violations.Add(1)
				}
				seen[k].Store(added[k].Load())
				if rng.IntN(32) == 0 {
					added[k].Add(1)
					if !q.AddWithPriority(k, randPrio(rng)) {
						added[k].Add(-1)
					}
				}
				inFlight[k].Store(false)
				q.Done(k)
			}
		})
	}
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range adds {
		if i%128 == 0 {
			time.Sleep(10 * time.Microsecond)
		}
		k := rng.IntN(keys)
		added[k].Add(1)
		q.AddWithPriority(k, randPrio(rng))
	}
	if err := q.ShutDownWithDrain(context.Background()); err != nil {
		t.Fatalf("drain: %v", err)
	}
	wg.Wait()
	if n := violations.Load(); n != 0 {
		t.Fatalf("%d times an item was held by two workers", n)
	}
	for k := range keys {
		if a, s := added[k].Load(), seen[k].Load(); a != s {
			t.Fatalf("key %d: last processing saw generation %d of %d: an Add was lost", k, s, a)
		}
	}
	t.Logf("%d Adds, %d items processed", adds, processed.Load())
	if processed.Load() < 2*keys {
		t.Errorf("%d items processed, want at least %d", processed.Load(), 2*keys)
	}
}

// TestPriorityMemoryBounded raises items over a backlog that never moves,
// leaving an outdated entry behind each time: compaction must keep the
// entries within twice the items queued, plus compactMin.
func TestPriorityMemoryBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const backlog = 1000
		q := NewQueue[int](Config{})
		defer q.ShutDown()
		for i := range backlog {
			q.AddWithPriority(-1-i, PriorityLow)
		}
		for i := range 100 * backlog {
			q.AddWithPriority(i, PriorityLow)
			q.AddWithPriority(i, PriorityHigh)
			if x, _ := q.Get(); x != i {
				t.Fatalf("Get = %d, want %d", x, i)
			}
			q.Done(i)
			if i%61 == 0 {
				if err := checkEntries(q); err != nil {
					t.Fatalf("after %d raises: %v", i+1, err)
				}
			}
		}
		for range backlog {
			q.Done(getNow(t, q))
			if err := checkEntries(q); err != nil {
				t.Fatalf("draining the backlog: %v", err)
			}
		}
		assertEmpty(t, q)
	})
}

func TestPriorityQueueMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakeProvider{}
		q := NewRateLimitingQueue[string](NewItemExponentialFailureRateLimiter[string](time.Second, time.Second),
			Config{Name: "test", MetricsProvider: p})
		q.AddWithPriority("a", PriorityLow)
		q.AddWithPriority("a", PriorityHigh) // raised: not counted again
		q.Add("b")
		if d, a := p.depth.get(), p.adds.get(); d != 2 || a != 2 {
			t.Fatalf("depth %v adds %v, want 2 and 2", d, a)
		}
		time.Sleep(3 * time.Second)
		x, _ := q.Get()
		if x != "a" {
			t.Fatalf("Get = %q, want a", x)
		}
		if got := p.latency.observed(); len(got) != 1 || got[0] != 3 {
			t.Fatalf("latency %v, want [3]", got)
		}
		q.AddWithPriority("a", PriorityLow) // held: counted, queued at Done
		if d, a := p.depth.get(), p.adds.get(); d != 2 || a != 3 {
			t.Fatalf("depth %v adds %v, want 2 and 3", d, a)
		}
		time.Sleep(time.Second)
		q.Done(x)
		if got := p.work.observed(); len(got) != 1 || got[0] != 1 {
			t.Fatalf("work duration %v, want [1]", got)
		}
		q.ShutDown()
		if d := p.depth.get(); d != 0 {
			t.Fatalf("depth after ShutDown %v, want 0", d)
		}
	})
}

// TestAddWithPriorityAfterShutDown: refused, as Add is, whether or not the
// queue took priorities before.
func TestAddWithPriorityAfterShutDown(t *testing.T) {
	for _, before := range []bool{false, true} {
		q := NewQueue[int](Config{})
		if before {
			q.AddWithPriority(1, PriorityLow)
		}
		q.ShutDown()
		if q.AddWithPriority(2, PriorityHigh) {
			t.Errorf("AddWithPriority after ShutDown accepted (priorities before: %v)", before)
		}
		if _, ok := q.Get(); ok {
			t.Errorf("Get after ShutDown returned an item (priorities before: %v)", before)
		}
	}
}
