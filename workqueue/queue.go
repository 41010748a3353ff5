package workqueue

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
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

// Bits of an entry's state: whether its item waits to be processed (dirty)
// and whether a worker holds it (processing). An entry with neither is idle.
const (
	stateDirty uint32 = 1 << iota
	stateProcessing
)

// getSpinYields is how many times Get yields the processor, watching for
// an item, before it parks.
const getSpinYields = 4

// Idle entries are kept for items that are neither waiting nor processing,
// so that the next Add of a recently processed item finds its entry instead
// of inserting one (and, at its Done, deleting it), and can take the fast
// path. At most idleMin + (number of busy entries) are kept, which bounds
// memory to a constant plus the live set; past that, idle entries found by
// a scan of the map from a random place are evicted. They are counted, not
// listed: a list would have every Done and every requeue write the links
// of two other entries, whose lines the producer, reading their states at
// each Add, would then have to fetch back from the worker's core.
// The constant is large enough for a live set of ten thousand keys or so
// to stay whole: smaller, the idle end of such a set is evicted over and
// over, and each next Add of an evicted key pays a delete and an insert in
// the map and goes the slow way, through the workers' lock.
const idleMin = 16384

// entry is the whole state of one known item, in one place. The FIFO holds
// entries rather than items, so Get touches no map.
type entry[T comparable] struct {
	item T
	// state changes by compare-and-swap: under Queue.indexMu by Add's fast
	// path, and under Queue.mu by everything else.
	state atomic.Uint32
}

// entrySlabBytes is about how much memory each allocation of new entries
// takes; see newEntryIndexLocked.
const entrySlabBytes = 4096

// inboxNewMax bounds the inbox, with the number of entries: an entry is in
// it at most once, but a new item once per Add.
const inboxNewMax = 1024

// pending is an Add handed over to the holders of mu; e is nil when the
// item had no entry.
type pending[T comparable] struct {
	e    *entry[T]
	item T
	// kind is set by the drain: what to do with e.
	kind pendingKind
}

type pendingKind uint8

const (
	// pendQueue: Add found e idle and marked it dirty; queue it.
	pendQueue pendingKind = iota
	// pendFresh: the drain made e for a new item; push it.
	pendFresh
	// pendAdd: the item was new to Add but has an entry by the drain; add
	// it as addLocked would.
	pendAdd
)

// Queue is a FIFO work queue that deduplicates items.
//
// An item added while it is already waiting is not queued twice. An item
// added while a worker processes it is queued again only when the worker
// calls Done, so it is never held by two workers at once. The zero Queue is
// ready to use, without metrics; a Queue must not be copied after first use.
//
// Add mostly stays off the lock that Get and Done take: it finds the item's
// entry under a lock of its own and changes its state atomically, and an
// item that must enter the FIFO goes to an inbox that the next Get, Done or
// Len moves over in one batch. Add takes the workers' lock itself only to
// wake a worker when every worker sleeps and none has been signalled yet,
// or when metrics are on.
type Queue[T comparable] struct {
	// indexMu guards the inbox and the reads of entries made without mu.
	// Writers of entries hold both locks, mu first, so holders of mu read
	// it freely.
	indexMu seqMutex
	entries map[T]*entry[T]
	inbox   []pending[T]
	// closed and withMetrics are the producers' copies of shuttingDown and
	// of metrics != nil, which Add reads on every call. Each side reads
	// its own copy, so that neither side's reads keep taking a cache line
	// the other writes: a worker reading this line would cost the next Add
	// a miss on indexMu, and Add reading the workers' line a miss on every
	// Done. closed is set with shuttingDown, holding both locks;
	// withMetrics at construction.
	closed      atomic.Bool
	withMetrics bool

	// Pad so that the producers' lock and the workers' do not share a
	// cache line.
	_ [64]byte

	// inboxLen is len(inbox), for the workers to poll. Add writes it only
	// when it hands an item over, the workers read it at every lock: on a
	// line of its own, their reads do not take indexMu's line away from a
	// producer whose Adds are deduplicated.
	inboxLen atomic.Int64
	_        [64]byte

	// waiters counts the goroutines blocked in Get, and woken those of
	// them signalled and not yet running; both change under mu. A Get
	// waits only when the FIFO runs dry, so they change seldom in a busy
	// queue, while the Add that hands an item over reads them every time:
	// on a line of their own, away from what the workers write at every
	// Get and Done, those reads hit the producer's cache.
	waiters atomic.Int64
	woken   atomic.Int64
	_       [64]byte

	// mu guards the rest, up to queued.
	mu    sync.Mutex
	cond  sync.Cond
	items ring[*entry[T]]
	spare []pending[T] // an emptied inbox, to swap in at the next drain
	// nIdle counts the idle entries: those Done left neither dirty nor
	// processing, until they are evicted or queued again. An entry an Add
	// revived is counted until the holder of mu queues it.
	nIdle int
	// free holds evicted entries, cleared, for reuse, so that a steady
	// state allocates nothing. It is bounded by peak, the most entries the
	// map has held: that much memory the map's table keeps anyway, since Go
	// maps never shrink. ShutDown gives both back.
	free       []*entry[T]
	peak       int
	slab       []entry[T] // entries not handed out yet, from the last slab made
	processing int        // items handed out by Get and not yet Done

	drained     chan struct{} // closed when a drain has finished
	drainClosed bool

	// entriesW is entries, for the workers to read: see closed.
	entriesW map[T]*entry[T]

	// Written under mu (shuttingDown and draining holding indexMu too),
	// read without it on the fast paths.
	queued       atomic.Int64 // items.len(), for Get to poll without mu
	shuttingDown atomic.Bool
	draining     atomic.Bool

	metrics *queueMetrics[T] // set by init; recorded under mu

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
	q.withMetrics = q.metrics != nil
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
			q.mu.Lock()
			q.metrics.updateUnfinished()
			q.mu.Unlock()
		}
	}
}

// lock locks mu, making the zero Queue usable, and moves the inbox into the
// FIFO, so that its holder sees every Add made before.
func (q *Queue[T]) lock() {
	q.mu.Lock()
	if q.cond.L == nil {
		q.cond.L = &q.mu
	}
	q.drainInboxLocked()
}

// Add queues item for processing unless it is already waiting. It reports
// whether the item was accepted: false means the queue is shutting down and
// the item was dropped.
func (q *Queue[T]) Add(item T) bool {
	if q.closed.Load() {
		return false
	}
	if q.withMetrics {
		// Metrics are recorded under mu.
		q.lock()
		defer q.mu.Unlock()
		if q.shuttingDown.Load() {
			return false
		}
		if q.addLocked(item) {
			q.metrics.add(item)
		}
		return true
	}

	q.indexMu.lock()
	// Checked again under indexMu, which the shutdown holds when it sets
	// the flag: an Add either comes before it, in the inbox the shutdown
	// drains, or is refused.
	if q.closed.Load() {
		q.indexMu.unlock()
		return false
	}
	handOver := false
	if e := q.entries[item]; e != nil && q.dedupWaiting(e) {
		// Waiting already: nothing to hand over.
	} else if e == nil {
		if len(q.inbox) >= inboxNewMax+len(q.entries) {
			// A new item is handed over once per Add, not once per
			// item: past this bound, add it under mu, which also
			// empties the inbox.
			q.indexMu.unlock()
			q.lock()
			defer q.mu.Unlock()
			if q.shuttingDown.Load() {
				return false
			}
			q.addLocked(item)
			return true
		}
		q.inbox = append(q.inbox, pending[T]{item: item})
		handOver = true
	} else if markDirty(e) {
		// indexMu kept e from being evicted and reused meanwhile.
		q.inbox = append(q.inbox, pending[T]{e: e, item: item})
		handOver = true
	}
	if handOver {
		q.inboxLen.Add(1)
	}
	q.indexMu.unlock()
	// A Get about to sleep counts itself in waiters before it looks at the
	// inbox a last time; this looks at waiters after filling the inbox.
	// Sequentially consistent atomics make one of the two see the other.
	//
	// A waiter already signalled drains the inbox when it runs, after it
	// has left woken: if woken is still positive here, that drain comes
	// after this Add's hand-over and will see it, and the worker passes the
	// baton on if more is queued. Only with nobody on the way must this
	// goroutine take mu, and then only to signal: the drain itself is left
	// to the worker, since the producer is the one a busy queue waits for.
	if handOver && q.waiters.Load() > 0 && q.woken.Load() == 0 {
		q.wakeForInbox()
	}
	return true
}

// wakeForInbox signals a waiting Get to collect what Add handed over, unless
// one is signalled already.
func (q *Queue[T]) wakeForInbox() {
	q.mu.Lock()
	// A Get waits only after lock() has set cond.L up.
	if q.cond.L != nil && q.woken.Load() == 0 && q.waiters.Load() > 0 {
		q.woken.Add(1)
		q.cond.Signal()
	}
	q.mu.Unlock()
}

// addBatch adds every item in items as Add would, taking each lock once
// for the whole batch rather than once per item, and wakes as many waiting
// workers as there are items for: a batch of items due at once should not
// wait for the workers to wake one another in turn. Items arriving after
// ShutDown are dropped.
func (q *Queue[T]) addBatch(items []T) {
	if len(items) == 0 || q.closed.Load() {
		return
	}
	if q.withMetrics {
		q.lock()
		if !q.shuttingDown.Load() {
			for _, item := range items {
				if q.addLocked(item) {
					q.metrics.add(item)
				}
			}
			q.wakeNeededLocked()
		}
		q.mu.Unlock()
		return
	}
	q.indexMu.lock()
	// As in Add: the shutdown sets the flag holding indexMu.
	if q.closed.Load() {
		q.indexMu.unlock()
		return
	}
	n := 0
	for _, item := range items {
		// The inbox takes each item at most once here, so the bound Add
		// keeps on it for new items does not apply.
		if e := q.entries[item]; e == nil {
			q.inbox = append(q.inbox, pending[T]{item: item})
			n++
		} else if markDirty(e) {
			q.inbox = append(q.inbox, pending[T]{e: e, item: item})
			n++
		}
	}
	q.inboxLen.Add(int64(n))
	q.indexMu.unlock()
	if n == 0 {
		return
	}
	q.lock()
	q.wakeNeededLocked()
	q.mu.Unlock()
}

// dedupWaiting reports whether e's item is waiting and not being
// processed, in which case the Add that found it so, holding indexMu, has
// nothing to do.
//
// Most Adds to a busy queue find their item waiting. Telling so with a
// load rather than with markDirty's compare-and-swap leaves the entry's
// cache line shared: the swap would take it for writing, away from the
// worker that touched it last, on every such Add. The Get that later
// hands the item out must still synchronize with this Add, as it would
// through a lock, and nothing this Add wrote tells it to: its acquisition
// of indexMu does. That Get swaps the state after this load saw the item
// waiting, and then observes indexMu (see seqMutex), so it sees the
// acquisition.
func (q *Queue[T]) dedupWaiting(e *entry[T]) bool {
	return e.state.Load() == stateDirty
}

// markDirty records that e's item was added and reports whether the caller
// must queue it, because it was idle.
//
// Even an entry already dirty is compare-and-swapped, onto itself: the Get
// that later hands the item out swaps the state this wrote, and so
// synchronizes with this Add as it would through a lock.
func markDirty[T comparable](e *entry[T]) bool {
	// Guess first that the item is waiting already, as most Adds to a busy
	// queue find it. A compare-and-swap fetches the entry's cache line for
	// writing at once, where a load would fetch it shared and the swap
	// after it fetch it again; when the guess is wrong the line is here
	// now, and the loop below costs little.
	if e.state.CompareAndSwap(stateDirty, stateDirty) {
		return false
	}
	for {
		s := e.state.Load()
		switch {
		case s&stateDirty != 0:
			if e.state.CompareAndSwap(s, s) {
				return false
			}
		case s&stateProcessing != 0:
			// It goes back in the FIFO only at Done.
			if e.state.CompareAndSwap(s, s|stateDirty) {
				return false
			}
		default:
			if e.state.CompareAndSwap(s, stateDirty) {
				return true
			}
		}
	}
}

// addLocked adds item and reports whether it was not waiting already.
func (q *Queue[T]) addLocked(item T) bool {
	e := q.entriesW[item]
	if e == nil {
		q.push(q.newEntry(item))
		return true
	}
	if e.state.Load()&stateDirty != 0 {
		return false
	}
	if markDirty(e) {
		q.queueIdle(e)
	}
	return true
}

// drainInboxLocked moves the Adds handed over in the inbox into the FIFO,
// in their order.
//
// The items that had no entry get theirs in the same hold of indexMu that
// takes the batch: once per batch rather than once per new item, because
// every time a worker takes indexMu, the producer's next Lock finds the
// lock's cache line on the worker's core. Its lock parks after a few
// tries: retrying at once for long while the producer holds it, as this
// once did, kept reading the line the producer was about to write, and
// cost 7-13% of the throughput of the bench/ load (one producer, four
// workers).
func (q *Queue[T]) drainInboxLocked() {
	if q.inboxLen.Load() == 0 {
		return
	}
	q.indexMu.lock()
	batch := q.inbox
	q.inbox = q.spare[:0]
	q.inboxLen.Store(0)
	for i := range batch {
		p := &batch[i]
		switch {
		case p.e != nil:
			p.kind = pendQueue
		case q.entries[p.item] != nil:
			p.e = q.entries[p.item]
			p.kind = pendAdd
		default:
			p.e = q.newEntryIndexLocked(p.item)
			p.kind = pendFresh
		}
	}
	q.indexMu.unlock()
	for _, p := range batch {
		switch p.kind {
		case pendQueue:
			q.queueIdle(p.e)
		case pendFresh:
			q.push(p.e)
		case pendAdd:
			// Holding mu, nothing evicts e meanwhile.
			if markDirty(p.e) {
				q.queueIdle(p.e)
			}
		}
	}
	clear(batch)
	q.spare = batch
}

// queueIdle queues e, which was idle and has just been marked dirty.
func (q *Queue[T]) queueIdle(e *entry[T]) {
	q.nIdle--
	q.push(e)
}

// newEntry makes a dirty entry for item, reusing an evicted one if it can.
func (q *Queue[T]) newEntry(item T) *entry[T] {
	q.indexMu.lock()
	e := q.newEntryIndexLocked(item)
	q.indexMu.unlock()
	return e
}

// newEntryIndexLocked is newEntry for a holder of both locks.
func (q *Queue[T]) newEntryIndexLocked(item T) *entry[T] {
	var e *entry[T]
	if n := len(q.free); n > 0 {
		e = q.free[n-1]
		q.free[n-1] = nil
		q.free = q.free[:n-1]
	} else {
		// Entries are made a slab at a time: the queue reaches the most
		// entries it will hold gradually, as its live set first grows
		// that large, which can be long after it started; one allocation
		// per slab rather than per entry keeps that growth from showing
		// as a trickle of allocations in a queue otherwise steady.
		if len(q.slab) == 0 {
			q.slab = make([]entry[T], max(1, entrySlabBytes/int(unsafe.Sizeof(entry[T]{}))))
		}
		e = &q.slab[0]
		q.slab = q.slab[1:]
	}
	e.item = item
	e.state.Store(stateDirty)
	if q.entries == nil {
		q.entries = make(map[T]*entry[T])
		q.entriesW = q.entries
	}
	q.entries[item] = e
	q.peak = max(q.peak, len(q.entriesW))
	return e
}

// Eviction works in batches: once over the bound, it evicts down to an
// eighth below it, scanning at most evictScanMax entries per call. Past
// the bound more than half of the entries are idle, so a scan finds one
// in two entries or so.
const evictScanMax = 256

// makeIdle counts e, just made idle, and evicts idle entries when there
// are too many.
func (q *Queue[T]) makeIdle(e *entry[T]) {
	q.nIdle++
	if q.nIdle <= idleMin+len(q.entriesW)-q.nIdle {
		return
	}
	// Evicting is never urgent: skip it while an Add holds indexMu rather
	// than wait, and catch up next time.
	if !q.indexMu.tryLock() {
		return
	}
	scanned := 0
	for item, old := range q.entries {
		if q.nIdle <= (idleMin+len(q.entries)-q.nIdle)*7/8 || scanned == evictScanMax {
			break
		}
		scanned++
		// Busy, or revived by an Add and on its way to the FIFO.
		if old.state.Load() != 0 {
			continue
		}
		delete(q.entries, item)
		q.nIdle--
		var zero T
		old.item = zero
		if len(q.free) < q.peak {
			q.free = append(q.free, old)
		}
	}
	q.indexMu.unlock()
}

// push appends e to the FIFO and wakes a worker if one is needed.
func (q *Queue[T]) push(e *entry[T]) {
	q.items.push(e)
	q.queued.Add(1)
	q.wakeLocked()
}

// wakeLocked signals one blocked Get when items are queued and no signalled
// waiter is already on its way. Waking one at a time, each woken worker
// waking the next if work remains, spares the scheduler the wake-ups that
// would find the queue already emptied by the first.
func (q *Queue[T]) wakeLocked() {
	if q.woken.Load() == 0 && q.waiters.Load() > 0 && q.items.len() > 0 {
		q.woken.Add(1)
		q.cond.Signal()
	}
}

// wakeNeededLocked signals waiting Gets until every queued item has a
// worker on its way, or no one is left waiting. A signalled waiter leaves
// the wait queue at once but is counted in waiters until it runs, so
// waiters-woken is the number still asleep.
func (q *Queue[T]) wakeNeededLocked() {
	for q.waiters.Load() > q.woken.Load() && int64(q.items.len()) > q.woken.Load() {
		q.woken.Add(1)
		q.cond.Signal()
	}
}

// Get blocks until an item is available and hands it to the caller, who
// must call Done with it when finished. ok is false once the queue has shut
// down: at once after ShutDown; after ShutDownWithDrain, once nothing is
// queued or being processed, since an item in flight may still be queued
// again by its Done.
func (q *Queue[T]) Get() (item T, ok bool) {
	q.lock()
	if q.items.len() == 0 && !q.shuttingDown.Load() {
		// Yield a few times before parking: an item usually arrives
		// within a scheduler round, and a worker that is still runnable
		// needs no wake-up, which costs the producer far more than the
		// yields cost the worker.
		q.mu.Unlock()
		for i := 0; i < getSpinYields && q.queued.Load() == 0 && q.inboxLen.Load() == 0 && !q.shuttingDown.Load(); i++ {
			runtime.Gosched()
		}
		q.lock()
	}
	for q.items.len() == 0 && q.mustWaitLocked() {
		q.waiters.Add(1)
		// See the end of Add.
		if q.inboxLen.Load() == 0 {
			q.cond.Wait()
			// Before the drain below: see the end of Add.
			if q.woken.Load() > 0 {
				q.woken.Add(-1)
			}
		}
		q.waiters.Add(-1)
		q.drainInboxLocked()
	}
	if q.items.len() == 0 {
		q.mu.Unlock()
		return item, false
	}
	e := q.items.pop()
	q.queued.Add(-1)
	q.processing++
	// A swap, not a store: see markDirty. Then the observation of indexMu:
	// see dedupWaiting.
	e.state.Swap(stateProcessing)
	q.indexMu.observe()
	if q.metrics != nil {
		q.metrics.get(e.item)
	}
	// Pass the baton: more items may be waiting for idle workers.
	q.wakeLocked()
	q.mu.Unlock()
	return e.item, true
}

// Done marks item as processed. If it was added again meanwhile, it is
// queued again now. Done of an item not handed out by Get does nothing.
func (q *Queue[T]) Done(item T) {
	q.lock()
	defer q.mu.Unlock()
	e := q.entriesW[item]
	if e == nil {
		return
	}
	for {
		s := e.state.Load()
		if s&stateProcessing == 0 {
			return
		}
		// After ShutDown nothing is queued; a drain still processes what
		// was added before it began.
		requeue := s&stateDirty != 0 && (!q.shuttingDown.Load() || q.draining.Load())
		next := uint32(0)
		if requeue {
			next = stateDirty
		}
		// Add's fast path may mark it dirty meanwhile: then go round again.
		if !e.state.CompareAndSwap(s, next) {
			continue
		}
		if q.metrics != nil {
			q.metrics.done(item)
		}
		q.processing--
		if requeue {
			q.push(e)
		} else {
			q.makeIdle(e)
		}
		break
	}
	if q.shuttingDown.Load() {
		q.checkDrainedLocked()
	}
}

// Len returns the number of items waiting for Get.
func (q *Queue[T]) Len() int {
	q.lock()
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
	q.lock()
	q.indexMu.lock()
	q.shuttingDown.Store(true)
	q.closed.Store(true)
	q.draining.Store(false)
	q.items.reset()
	q.queued.Store(0)
	clear(q.inbox)
	q.inbox = q.inbox[:0]
	q.inboxLen.Store(0)
	// Forget every item but those being processed, whose Done is still to
	// come; the dropped ones leave the metrics too. Holding indexMu, no Add
	// changes a state meanwhile.
	for item, e := range q.entries {
		s := e.state.Load()
		if s&stateDirty != 0 && q.metrics != nil {
			q.metrics.dropQueued(item)
		}
		if s&stateProcessing != 0 {
			e.state.Store(stateProcessing)
		} else {
			delete(q.entries, item)
		}
	}
	q.indexMu.unlock()
	q.nIdle = 0
	q.free, q.peak, q.slab = nil, 0, nil
	q.checkDrainedLocked()
	q.cond.Broadcast()
	stop, done := q.stopMetrics, q.metricsDone
	q.stopMetrics = nil
	q.mu.Unlock()

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
	q.lock()
	q.indexMu.lock()
	if !q.shuttingDown.Load() {
		q.draining.Store(true)
		q.shuttingDown.Store(true)
		q.closed.Store(true)
	}
	q.indexMu.unlock()
	// What Add handed over before the shutdown is to be processed too.
	q.drainInboxLocked()
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
	if q.drained != nil && !q.drainClosed && q.items.len() == 0 && q.processing == 0 {
		q.drainClosed = true
		close(q.drained)
		// Gets waiting for in-flight items to come back can stop now.
		q.cond.Broadcast()
	}
}
