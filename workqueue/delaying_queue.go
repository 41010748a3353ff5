package workqueue

import (
	"context"
	"math"
	"runtime"
	"sync"
	"time"
)

// DelayingInterface is the contract of DelayingQueue.
type DelayingInterface[T comparable] interface {
	Interface[T]
	AddAfter(item T, delay time.Duration) bool
}

// DelayingQueue is a Queue whose items can also be added after a delay.
//
// Waiting items sit in a min-heap ordered by the time they are due; a single
// timer is armed for the earliest one, so an idle queue costs no goroutine
// and no polling. Only while items fall due less than spinWindow apart does
// one goroutine stay to deliver them. The zero DelayingQueue is ready to use,
// without metrics.
type DelayingQueue[T comparable] struct {
	Queue[T]

	dmu sync.Mutex // guards the fields below; taken before Queue.mu
	// heap may hold stale entries for an item whose due time was moved
	// earlier; due holds the one that counts, and the others are skipped
	// when they surface. This keeps the heap free of index bookkeeping.
	heap []waitEntry[T]
	due  map[T]int64
	// Due times are nanoseconds on the monotonic clock since epoch, set at
	// the first AddAfter: an int64 compares in one instruction, and a heap
	// entry holding one is 16 bytes smaller than with a time.Time.
	epoch   time.Time
	timer   *time.Timer
	armedAt int64 // when timer fires, if armed
	armed   bool
	stopped bool
	// spinning is set while fire's delivery loop runs; see spinWindow.
	spinning bool
	ready    []T // the batch being delivered, kept for reuse
}

type waitEntry[T any] struct {
	at   int64
	item T
}

// NewDelayingQueue returns an empty DelayingQueue configured by cfg.
func NewDelayingQueue[T comparable](cfg Config) *DelayingQueue[T] {
	q := &DelayingQueue[T]{}
	q.Queue.init(cfg)
	return q
}

// AddAfter adds item once delay has passed; a delay that is not positive
// adds it at once. If item is already waiting, the earlier of the two due
// times wins. It reports false, dropping the item, when the queue is
// shutting down.
func (q *DelayingQueue[T]) AddAfter(item T, delay time.Duration) bool {
	if delay <= 0 {
		return q.Add(item)
	}
	q.dmu.Lock()
	if q.stopped || q.ShuttingDown() {
		q.dmu.Unlock()
		return false
	}
	now := q.nowLocked()
	at := now + int64(delay)
	if at < now {
		at = math.MaxInt64 // beyond any due time that can come
	}
	// Deliver what is already due while we hold the lock and know the time:
	// under load the timer's goroutine may wait for a CPU for a whole
	// scheduler time slice, and a busy producer would make it late. While
	// fire's loop is spinning it delivers, and this only backs it up, for
	// the times its goroutine is kept from running: delivering from both
	// would cost the producer a delivery and a yield on nearly every call.
	late := now
	if q.spinning {
		late -= int64(spinBackstop)
	}
	delivered := len(q.heap) > 0 && q.heap[0].at <= late
	if delivered {
		q.deliverLocked(now)
	}
	ok := q.addAfterLocked(item, at)
	q.dmu.Unlock()
	if delivered {
		// The workers woken for what was delivered were made runnable on
		// this goroutine's processor, behind it: a producer adding in a
		// loop would keep them waiting until the scheduler preempts it,
		// up to a 10ms time slice. Let them run now.
		runtime.Gosched()
	}
	return ok
}

// nowLocked reads the clock as the heap counts time.
func (q *DelayingQueue[T]) nowLocked() int64 {
	if q.epoch.IsZero() {
		q.epoch = time.Now()
	}
	return int64(time.Since(q.epoch))
}

// addAfterLocked makes item due at at, unless it is already due earlier.
func (q *DelayingQueue[T]) addAfterLocked(item T, at int64) bool {
	if q.due == nil {
		q.due = make(map[T]int64)
	}
	if cur, ok := q.due[item]; ok && at >= cur {
		return true
	}
	q.due[item] = at
	q.push(waitEntry[T]{at: at, item: item})
	// A delivery loop that is spinning looks at the heap again before it
	// stops, and arms the timer then.
	if !q.spinning && (!q.armed || at < q.armedAt) {
		q.armLocked(at)
	}
	return true
}

// Waiting returns the number of items waiting for their delay to pass.
func (q *DelayingQueue[T]) Waiting() int {
	q.dmu.Lock()
	defer q.dmu.Unlock()
	return len(q.due)
}

func (q *DelayingQueue[T]) armLocked(at int64) {
	q.armedAt, q.armed = at, true
	d := time.Duration(at - q.nowLocked())
	if q.timer == nil {
		q.timer = time.AfterFunc(d, q.fire)
		return
	}
	q.timer.Reset(d)
}

// Timers in the Go runtime are coarse once every processor is idle: the
// runtime then sleeps in the poller, which counts in whole milliseconds, so
// an item due in a few microseconds would be half a millisecond late on
// average. When the next item is due within spinWindow, fire's delivery
// loop yields and looks again instead of arming the timer. It gives up
// after spinIdleMax yields that delivered nothing, so that items that fall
// due sparsely do not keep a processor busy, and so that a clock that does
// not move while goroutines run (as in a testing/synctest bubble) cannot
// hold it forever. While it spins, AddAfter delivers only items overdue by
// spinBackstop.
//
// Measured with bench/ (100k AddAfter, 0-100ms delays, 4 workers, 2 CPUs):
// the median round's lateness p99 went from 1.8-3.3ms to 0.5-2.2ms, and the
// process's CPU per item from 0.60 of client-go's to 0.63-0.65.
const (
	spinWindow   = 100 * time.Microsecond
	spinIdleMax  = 256
	spinBackstop = 250 * time.Microsecond
)

// fire moves every due item into the queue. While more items fall due
// within spinWindow it stays to deliver them; then it re-arms the timer for
// the next one.
func (q *DelayingQueue[T]) fire() {
	q.dmu.Lock()
	defer q.dmu.Unlock()
	q.armed = false
	if q.spinning {
		return // the loop that is spinning delivers for this one too
	}
	q.spinning = true
	defer func() { q.spinning = false }()
	idle := 0
	for !q.stopped {
		now := q.nowLocked()
		if q.deliverLocked(now) {
			idle = 0
		} else {
			idle++
		}
		if len(q.heap) == 0 {
			return
		}
		if next := q.heap[0].at; next-now > int64(spinWindow) || idle > spinIdleMax {
			if !q.armed || next < q.armedAt {
				q.armLocked(next)
			}
			return
		}
		q.dmu.Unlock()
		runtime.Gosched()
		q.dmu.Lock()
	}
}

// deliverLocked moves every item due by now into the queue, in one batch:
// the queue's locks are taken once for all of them, and as many workers are
// woken as there are items, so that items due together are not handed out
// one wake-up after another. It reports whether any item was due.
func (q *DelayingQueue[T]) deliverLocked(now int64) bool {
	ready := q.ready[:0]
	for len(q.heap) > 0 && q.heap[0].at <= now {
		e := q.pop()
		if at, ok := q.due[e.item]; ok && at == e.at {
			delete(q.due, e.item)
			ready = append(ready, e.item)
		}
	}
	q.Queue.addBatch(ready)
	delivered := len(ready) > 0
	clear(ready)
	q.ready = ready[:0]
	if cap(q.ready) > ringShrinkCap {
		q.ready = nil
	}
	if len(q.heap) == 0 && cap(q.heap) > ringShrinkCap {
		// Give a burst's memory back once everything has been delivered.
		q.heap = nil
	}
	return delivered
}

// ShutDown drops the waiting items and shuts the queue down as
// Queue.ShutDown does.
func (q *DelayingQueue[T]) ShutDown() {
	q.stopDelays()
	q.Queue.ShutDown()
}

// ShutDownWithDrain drops the items still waiting for their delay and
// drains the queue as Queue.ShutDownWithDrain does.
func (q *DelayingQueue[T]) ShutDownWithDrain(ctx context.Context) error {
	q.stopDelays()
	return q.Queue.ShutDownWithDrain(ctx)
}

func (q *DelayingQueue[T]) stopDelays() {
	q.dmu.Lock()
	defer q.dmu.Unlock()
	q.stopped = true
	if q.timer != nil {
		q.timer.Stop()
	}
	q.heap = nil
	q.due = nil
	q.armed = false
}

// push and pop keep q.heap a binary min-heap on at. They are written out
// rather than through container/heap, which would box every entry in an
// interface and allocate.
func (q *DelayingQueue[T]) push(e waitEntry[T]) {
	h := append(q.heap, e)
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if h[i].at >= h[parent].at {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	q.heap = h
}

func (q *DelayingQueue[T]) pop() waitEntry[T] {
	h := q.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = waitEntry[T]{}
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		least := l
		if r := l + 1; r < len(h) && h[r].at < h[l].at {
			least = r
		}
		if h[least].at >= h[i].at {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	q.heap = h
	return top
}
