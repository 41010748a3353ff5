package workqueue

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Interface is the contract of Queue, for callers that want to substitute
// their own.
type Interface[T comparable] interface {
	Add(item T) bool
	Len() int
	Get() (item T, ok bool)
	Done(item T)
	ShutDown()
	ShutDownWithDrain(ctx context.Context) error
	ShuttingDown() bool
}

// Config names a queue and selects its metrics. The zero Config makes a
// queue without metrics.
type Config struct {
	// Name labels the queue's metrics. Metrics are recorded only when both
	// Name and MetricsProvider are set.
	Name string
	// MetricsProvider makes the queue's metrics; nil turns them off, and
	// with them every clock read on the hot path.
	MetricsProvider MetricsProvider
	// UnfinishedWorkUpdatePeriod is how often the unfinished-work and
	// longest-running gauges are recomputed; zero means 500ms.
	UnfinishedWorkUpdatePeriod time.Duration
}

const defaultUnfinishedWorkUpdatePeriod = 500 * time.Millisecond

// itemState is a bit set: one map entry per known item records both whether
// it waits to be processed (dirty) and whether a worker holds it
// (processing), which halves the map operations of separate sets.
type itemState uint8

const (
	stateDirty itemState = 1 << iota
	stateProcessing
)

// getSpinYields is how many times Get yields the processor, watching for
// an item, before it parks.
const getSpinYields = 4

// numShards splits the item states so that an Add of an item already
// waiting, the common case when events outpace workers, takes a lock that
// workers rarely touch instead of the FIFO's.
const numShards = 64

type shard[T comparable] struct {
	mu    sync.Mutex
	state map[T]itemState
	// Pad to a cache line so that neighbouring shards' locks do not share
	// one and bounce between cores together.
	_ [64 - 16]byte
}

// shardSeed is shared by every queue: it only spreads items over shards.
var shardSeed = maphash.MakeSeed()

// Queue is a FIFO work queue that deduplicates items.
//
// An item added while it is already waiting is not queued twice. An item
// added while a worker processes it is queued again only when the worker
// calls Done, so it is never held by two workers at once. The zero Queue is
// ready to use, without metrics; a Queue must not be copied after first use.
type Queue[T comparable] struct {
	shards [numShards]shard[T]

	// Lock order: a shard's mu, then mu. mu guards the FIFO and the fields
	// up to metrics.
	mu      sync.Mutex
	cond    sync.Cond
	items   ring[T]
	waiters int // goroutines blocked in Get
	woken   int // waiters signalled and not yet running

	drained     chan struct{} // closed when a drain has finished
	drainClosed bool

	// Written under mu, read without it on the fast paths.
	shuttingDown atomic.Bool
	draining     atomic.Bool
	processing   atomic.Int64 // items handed out by Get and not yet Done
	queued       atomic.Int64 // items.len(), for Get to poll without mu

	metrics     *queueMetrics[T]
	metricsMu   sync.Mutex // guards metrics' maps
	stopMetrics chan struct{}
	metricsDone chan struct{}
}

// NewQueue returns an empty Queue configured by cfg. With metrics on, a
// goroutine updates the unfinished-work gauges until ShutDown.
func NewQueue[T comparable](cfg Config) *Queue[T] {
	q := &Queue[T]{}
	q.init(cfg)
	return q
}

func (q *Queue[T]) init(cfg Config) {
	q.metrics = newQueueMetrics[T](cfg.Name, cfg.MetricsProvider)
	if q.metrics == nil {
		return
	}
	period := cfg.UnfinishedWorkUpdatePeriod
	if period <= 0 {
		period = defaultUnfinishedWorkUpdatePeriod
	}
	q.stopMetrics = make(chan struct{})
	q.metricsDone = make(chan struct{})
	go q.updateUnfinishedLoop(period, q.stopMetrics)
}

func (q *Queue[T]) updateUnfinishedLoop(period time.Duration, stop <-chan struct{}) {
	defer close(q.metricsDone)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			q.metricsMu.Lock()
			q.metrics.updateUnfinished()
			q.metricsMu.Unlock()
		}
	}
}

// shardOf returns item's shard, locked, with its map allocated.
func (q *Queue[T]) lockShard(item T) *shard[T] {
	sh := &q.shards[maphash.Comparable(shardSeed, item)%numShards]
	sh.mu.Lock()
	if sh.state == nil {
		sh.state = make(map[T]itemState)
	}
	return sh
}

// lockFIFO locks mu, making the zero Queue's condition variable usable.
func (q *Queue[T]) lockFIFO() {
	q.mu.Lock()
	if q.cond.L == nil {
		q.cond.L = &q.mu
	}
}

// Add queues item for processing unless it is already waiting. It reports
// whether the item was accepted: false means the queue is shutting down and
// the item was dropped.
func (q *Queue[T]) Add(item T) bool {
	if q.shuttingDown.Load() {
		return false
	}
	sh := q.lockShard(item)
	s := sh.state[item]
	if s&stateDirty != 0 {
		sh.mu.Unlock()
		return true
	}
	// A processing item goes back in the FIFO only at Done.
	if s&stateProcessing == 0 {
		q.lockFIFO()
		if q.shuttingDown.Load() {
			q.mu.Unlock()
			sh.mu.Unlock()
			return false
		}
		q.items.push(item)
		q.queued.Add(1)
		q.wakeLocked()
		q.mu.Unlock()
	}
	sh.state[item] = s | stateDirty
	if q.metrics != nil {
		q.metricsMu.Lock()
		q.metrics.add(item)
		q.metricsMu.Unlock()
	}
	sh.mu.Unlock()
	return true
}

// wakeLocked signals one blocked Get when items are queued and no signalled
// waiter is already on its way. Waking one at a time, each woken worker
// waking the next if work remains, spares the scheduler the wake-ups that
// would find the queue already emptied by the first.
func (q *Queue[T]) wakeLocked() {
	if q.woken == 0 && q.waiters > 0 && q.items.len() > 0 {
		q.woken++
		q.cond.Signal()
	}
}

// Get blocks until an item is available and hands it to the caller, who
// must call Done with it when finished. ok is false once the queue has shut
// down: at once after ShutDown; after ShutDownWithDrain, once nothing is
// queued or being processed, since an item in flight may still be queued
// again by its Done.
func (q *Queue[T]) Get() (item T, ok bool) {
	q.lockFIFO()
	if q.items.len() == 0 && !q.shuttingDown.Load() {
		// Yield a few times before parking: an item usually arrives
		// within a scheduler round, and a worker that is still runnable
		// needs no wake-up, which costs the producer far more than the
		// yields cost the worker.
		q.mu.Unlock()
		for i := 0; i < getSpinYields && q.queued.Load() == 0 && !q.shuttingDown.Load(); i++ {
			runtime.Gosched()
		}
		q.lockFIFO()
	}
	for q.items.len() == 0 && q.mustWaitLocked() {
		q.waiters++
		q.cond.Wait()
		q.waiters--
		if q.woken > 0 {
			q.woken--
		}
	}
	if q.items.len() == 0 {
		q.mu.Unlock()
		return item, false
	}
	item = q.items.pop()
	q.queued.Add(-1)
	q.processing.Add(1)
	// Pass the baton: more items may be waiting for idle workers.
	q.wakeLocked()
	q.mu.Unlock()

	// Until the shard says processing, an Add of item finds it dirty and
	// does nothing. That is right: Get has not returned, so the caller's
	// processing, which starts later, sees whatever that Add announced.
	sh := q.lockShard(item)
	sh.state[item] = stateProcessing
	if q.metrics != nil {
		q.metricsMu.Lock()
		q.metrics.get(item)
		q.metricsMu.Unlock()
	}
	sh.mu.Unlock()
	return item, true
}

// Done marks item as processed. If it was added again meanwhile, it is
// queued again now. Done of an item not handed out by Get does nothing.
func (q *Queue[T]) Done(item T) {
	sh := q.lockShard(item)
	s, ok := sh.state[item]
	if !ok || s&stateProcessing == 0 {
		sh.mu.Unlock()
		return
	}
	if q.metrics != nil {
		q.metricsMu.Lock()
		q.metrics.done(item)
		q.metricsMu.Unlock()
	}
	if s&stateDirty != 0 {
		q.lockFIFO()
		// After ShutDown nothing is queued; a drain still processes what
		// was added before it began.
		if q.shuttingDown.Load() && !q.draining.Load() {
			delete(sh.state, item)
		} else {
			sh.state[item] = stateDirty
			q.items.push(item)
			q.queued.Add(1)
			q.wakeLocked()
		}
		// Decrement only after the push, so that a drain never sees the
		// queue empty and nothing processing in between.
		q.processing.Add(-1)
		q.checkDrainedLocked()
		q.mu.Unlock()
		sh.mu.Unlock()
		return
	}
	delete(sh.state, item)
	sh.mu.Unlock()
	q.processing.Add(-1)
	// Sequentially consistent atomics: either this load sees the
	// shutdown, or the drain's own check sees the decrement above.
	if q.shuttingDown.Load() {
		q.lockFIFO()
		q.checkDrainedLocked()
		q.mu.Unlock()
	}
}

// Len returns the number of items waiting for Get.
func (q *Queue[T]) Len() int {
	q.lockFIFO()
	defer q.mu.Unlock()
	return q.items.len()
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain was called.
func (q *Queue[T]) ShuttingDown() bool {
	return q.shuttingDown.Load()
}

// ShutDown stops the queue at once: later Adds are refused, queued items
// are dropped, and every Get returns ok=false without blocking. Items being
// processed may still be marked Done. ShutDown may be called more than once.
func (q *Queue[T]) ShutDown() {
	q.lockFIFO()
	q.shuttingDown.Store(true)
	q.draining.Store(false)
	q.items.reset()
	q.queued.Store(0)
	q.checkDrainedLocked()
	q.cond.Broadcast()
	stop, done := q.stopMetrics, q.metricsDone
	q.stopMetrics = nil
	q.mu.Unlock()

	// Forget the dropped items. An Add racing with this either saw the
	// shutdown under mu and undid itself, or came before and is undone here.
	for i := range q.shards {
		sh := &q.shards[i]
		sh.mu.Lock()
		for item, s := range sh.state {
			if s&stateDirty == 0 {
				continue
			}
			if q.metrics != nil {
				q.metricsMu.Lock()
				q.metrics.dropQueued(item)
				q.metricsMu.Unlock()
			}
			if s&stateProcessing != 0 {
				sh.state[item] = stateProcessing
			} else {
				delete(sh.state, item)
			}
		}
		sh.mu.Unlock()
	}
	if stop != nil {
		close(stop)
		<-done
	}
}

// ShutDownWithDrain refuses new Adds, lets workers Get every item still
// queued (including items re-added while being processed, which come back
// at their Done), and waits until all of them are Done. Get returns ok=false
// once nothing is queued or in flight; while items are in flight it blocks,
// because their Done may queue them again. Items waiting in a
// DelayingQueue's heap are not queued and are dropped. If ctx ends first, the remaining items are
// dropped as by ShutDown and the context's error is returned; otherwise the
// result is nil. Either way the queue is shut down on return.
func (q *Queue[T]) ShutDownWithDrain(ctx context.Context) error {
	q.lockFIFO()
	if !q.shuttingDown.Load() {
		q.draining.Store(true)
		q.shuttingDown.Store(true)
	}
	if q.drained == nil {
		q.drained = make(chan struct{})
	}
	drained := q.drained
	q.checkDrainedLocked()
	// Waiting Gets must see the shutdown: with nothing queued they return.
	q.cond.Broadcast()
	q.mu.Unlock()

	select {
	case <-drained:
		q.ShutDown()
		return nil
	case <-ctx.Done():
		q.ShutDown()
		return fmt.Errorf("workqueue: drain interrupted: %w", context.Cause(ctx))
	}
}

// mustWaitLocked reports whether a Get finding the FIFO empty must block.
func (q *Queue[T]) mustWaitLocked() bool {
	if !q.shuttingDown.Load() {
		return true
	}
	return q.draining.Load() && !q.drainClosed
}

func (q *Queue[T]) checkDrainedLocked() {
	if q.drained != nil && !q.drainClosed && q.items.len() == 0 && q.processing.Load() == 0 {
		q.drainClosed = true
		close(q.drained)
		// Gets waiting for in-flight items to come back can stop now.
		q.cond.Broadcast()
	}
}
