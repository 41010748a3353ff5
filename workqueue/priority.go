package workqueue

import (
	"math/bits"
	"time"
)

// Priority orders the items of a queue: the higher goes first, within the
// bound that aging sets (see AddWithPriority). Priorities outside
// [MinPriority, MaxPriority] count as the nearest bound.
type Priority int8

const (
	// PriorityLow is for work that no change asked for: the keys of an
	// informer's initial list and of its resyncs.
	PriorityLow Priority = -1
	// PriorityNormal is the priority of Add, AddAfter and AddRateLimited:
	// live changes and retries.
	PriorityNormal Priority = 0
	// PriorityHigh is for work that should overtake live changes.
	PriorityHigh Priority = 1

	// MinPriority and MaxPriority bound the priorities a queue tells
	// apart.
	MinPriority Priority = -3
	MaxPriority Priority = 3
)

// DefaultAgingStep is the aging step of a queue whose Config sets none: a
// PriorityLow item waits at most one minute longer than the PriorityNormal
// items added with it, plus the time to process those.
const DefaultAgingStep = time.Minute

// numLevels is the number of priorities a queue tells apart.
const numLevels = int(MaxPriority) - int(MinPriority) + 1

// PriorityInterface is the contract of a queue that takes priorities.
type PriorityInterface[T comparable] interface {
	Interface[T]
	AddWithPriority(item T, p Priority) bool
}

var (
	_ PriorityInterface[int] = (*Queue[int])(nil)
	_ PriorityInterface[int] = (*RateLimitingQueue[int])(nil)
)

// AddWithPriority queues item at priority p unless it is already waiting,
// as Add does; Add is AddWithPriority at PriorityNormal. It reports false,
// dropping the item, when the queue is shutting down.
//
// A queue is a plain FIFO until its first AddWithPriority (one that never
// gets one costs nothing more); from then on it orders its items by rank,
// the time an item was added minus its priority times the queue's aging
// step (Config.AgingStep):
//
//	rank = addedAt − p × AgingStep
//
// and Get hands out the item of least rank: on a tie the earlier added,
// and among items added at once at one priority the first queued.
// Put another way, an item's effective priority is its priority plus one
// level for every AgingStep it has waited, and the highest goes first: at
// one priority the queue is FIFO, and a lower priority item overtakes the
// higher ones added more than (their priority − its priority) × AgingStep
// after it. So an item of priority p added at t is handed out before any
// item added after t + (MaxPriority − p) × AgingStep (after t + (q − p) ×
// AgingStep when no priority above q is in use): it waits at most that
// long plus the time the workers take for the items added before then
// that rank ahead of it, however much higher-priority work keeps coming.
//
// An item added again while it is waiting keeps the lower of its current
// rank and the one the new Add would give it, so it only ever moves
// forward (dedup keeps the higher priority, unless the item has already
// aged past it). An item added while it is being processed is queued at
// its Done, at the highest priority it was added with meanwhile, and
// counts as added at its Done. Items already queued when the first
// AddWithPriority comes count as added then, at PriorityNormal.
//
// Memory stays proportional to the items queued: raising an item leaves
// an outdated entry in its former priority's FIFO, and a FIFO holding 64
// or more of them, more than it holds items, is compacted; so each
// priority's FIFO holds at most twice its items plus 63 entries.
func (q *Queue[T]) AddWithPriority(item T, p Priority) bool {
	q.lock()
	defer q.mu.Unlock()
	if q.shuttingDown.Load() {
		return false
	}
	if q.prio == nil {
		q.startPriorities()
	}
	if q.addPrioLocked(item, min(max(p, MinPriority), MaxPriority)) {
		q.cond.Signal()
	}
	return true
}

// startPriorities turns the FIFO into a priority queue, moving what is
// queued, and what is waiting for a Done, to PriorityNormal.
func (q *Queue[T]) startPriorities() {
	step := q.agingStep
	if step <= 0 {
		step = DefaultAgingStep
	}
	pq := &prioItems[T]{
		step:       int64(step),
		compactMin: compactMin,
		epoch:      time.Now(),
		slots:      make(map[T]prioSlot, len(q.dirty)),
	}
	now := pq.now()
	for q.items.len() > 0 {
		pq.push(q.items.pop(), PriorityNormal, now)
	}
	for item := range q.dirty {
		if _, ok := pq.slots[item]; !ok {
			pq.slots[item] = prioSlot{level: PriorityNormal} // being processed
		}
	}
	q.items.reset()
	q.dirty = nil
	q.prio = pq
}

// addPrioLocked adds item at priority p and reports whether it became
// available to Get.
func (q *Queue[T]) addPrioLocked(item T, p Priority) bool {
	pq := q.prio
	if s, ok := pq.slots[item]; ok {
		pq.raise(item, s, p)
		return false
	}
	if q.metrics != nil {
		q.metrics.add(item)
	}
	if _, ok := q.processing[item]; ok {
		// It is queued at Done.
		pq.slots[item] = prioSlot{level: p}
		return false
	}
	pq.push(item, p, pq.now())
	return true
}

// prioItems is what a priority queue holds instead of Queue's FIFO and
// dirty set: one FIFO per priority, and where each waiting item is.
//
// Within one priority the FIFO is ordered by the time items were added,
// so its head ranks first among its items, and Get compares only the
// heads. An item raised to a higher priority is pushed again there; the
// entry it leaves behind is outdated, recognised by its sequence number,
// skipped when it reaches the head and counted so that a FIFO mostly made
// of them is compacted.
type prioItems[T comparable] struct {
	step int64 // the aging step in nanoseconds
	// compactMin is the number of outdated entries below which a level
	// is never compacted: a few are cheaper to skip than to copy around.
	// Tests lower it.
	compactMin int
	epoch      time.Time // times are nanoseconds since epoch
	seq        uint64    // the sequence number of the last entry pushed

	levels [numLevels]ring[prioEntry[T]] // by priority − MinPriority
	stale  [numLevels]int                // outdated entries in each level
	used   uint8                         // bit l set when levels[l] holds entries
	// slots holds every item added and not yet handed out (the dirty set):
	// those queued in a level, and those added while being processed.
	slots map[T]prioSlot
	n     int // the items queued in a level
}

type prioEntry[T any] struct {
	item T
	at   int64
	seq  uint64
}

type prioSlot struct {
	at    int64
	seq   uint64 // of its entry; 0 when it waits for its Done
	level Priority
}

// compactMin is prioItems.compactMin's value.
const compactMin = 64

func (pq *prioItems[T]) now() int64 { return int64(time.Since(pq.epoch)) }

func (pq *prioItems[T]) rank(at int64, p Priority) int64 { return at - int64(p)*pq.step }

// push queues item at priority p, added at now.
func (pq *prioItems[T]) push(item T, p Priority, now int64) {
	pq.seq++
	pq.levels[p-MinPriority].push(prioEntry[T]{item: item, at: now, seq: pq.seq})
	pq.used |= 1 << (p - MinPriority)
	pq.slots[item] = prioSlot{at: now, seq: pq.seq, level: p}
	pq.n++
}

// raise handles an Add at priority p of item, already added with slot s.
func (pq *prioItems[T]) raise(item T, s prioSlot, p Priority) {
	if p <= s.level {
		// Since it was added no earlier than now, it ranks no earlier:
		// the common case of a duplicate, settled without the clock.
		return
	}
	if s.seq == 0 {
		// Being processed: it is queued at its Done, where its time is
		// set, at the highest priority asked for.
		pq.slots[item] = prioSlot{level: p}
		return
	}
	now := pq.now()
	if pq.rank(now, p) >= pq.rank(s.at, s.level) {
		return
	}
	l := int(s.level - MinPriority)
	pq.stale[l]++
	pq.n--
	pq.push(item, p, now)
	pq.maybeCompact(int(l))
}

// maybeCompact compacts level l if it holds compactMin or more outdated
// entries, more than it holds items. Called whenever a level loses an
// item, it keeps every level within twice its items plus compactMin − 1
// entries, and the copying is paid for by the raises that left the
// outdated entries.
func (pq *prioItems[T]) maybeCompact(l int) {
	if pq.stale[l] >= pq.compactMin && 2*pq.stale[l] > pq.levels[l].len() {
		pq.compact(l)
	}
}

// compact drops the outdated entries of level l, keeping the order of the
// others.
func (pq *prioItems[T]) compact(l int) {
	r := &pq.levels[l]
	for range r.len() {
		e := r.pop()
		if pq.live(e) {
			r.push(e)
		}
	}
	pq.stale[l] = 0
	pq.noteEmpty(l)
}

// noteEmpty clears level l's bit in used if it holds nothing.
func (pq *prioItems[T]) noteEmpty(l int) {
	if pq.levels[l].len() == 0 {
		pq.used &^= 1 << l
	}
}

func (pq *prioItems[T]) live(e prioEntry[T]) bool {
	s, ok := pq.slots[e.item]
	return ok && s.seq == e.seq
}

// pop removes and returns the item of least rank; one must be queued.
func (pq *prioItems[T]) pop() T {
	best := -1
	var bestRank, bestAt int64
	for m := pq.used; m != 0; {
		l := bits.Len8(m) - 1
		m &^= 1 << l
		r := &pq.levels[l]
		pq.skipStale(l)
		if r.len() == 0 {
			continue
		}
		at := r.buf[r.head].at
		rank := pq.rank(at, Priority(l)+MinPriority)
		// Equal ranks and times mean equal priorities, so the scan never
		// meets a tie that FIFO order should settle.
		if best < 0 || rank < bestRank || rank == bestRank && at < bestAt {
			best, bestRank, bestAt = l, rank, at
		}
	}
	e := pq.levels[best].pop()
	delete(pq.slots, e.item)
	pq.n--
	// With nothing outdated at any head, an empty queue holds no entries.
	pq.skipStale(best)
	pq.maybeCompact(best)
	return e.item
}

// skipStale drops the outdated entries at the head of level l.
func (pq *prioItems[T]) skipStale(l int) {
	r := &pq.levels[l]
	for pq.stale[l] > 0 && r.len() > 0 && !pq.live(r.buf[r.head]) {
		r.pop()
		pq.stale[l]--
	}
	pq.noteEmpty(l)
}

// done queues again, as added now, an item added while it was being
// processed, and reports whether there was one.
func (pq *prioItems[T]) done(item T) bool {
	s, ok := pq.slots[item]
	if !ok {
		return false
	}
	pq.push(item, s.level, pq.now())
	return true
}

// reset drops every item.
func (pq *prioItems[T]) reset() {
	for l := range pq.levels {
		pq.levels[l].reset()
	}
	pq.stale = [numLevels]int{}
	pq.used = 0
	clear(pq.slots)
	pq.n = 0
}
