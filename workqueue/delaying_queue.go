package workqueue

import (
	"context"
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
// and no polling. The zero DelayingQueue is ready to use, without metrics.
type DelayingQueue[T comparable] struct {
	Queue[T]

	dmu sync.Mutex // guards the fields below; taken before Queue.mu
	// heap may hold stale entries for an item whose due time was moved
	// earlier; due holds the one that counts, and the others are skipped
	// when they surface. This keeps the heap free of index bookkeeping.
	heap    []waitEntry[T]
	due     map[T]time.Time
	timer   *time.Timer
	armedAt time.Time // when timer fires; zero when it is not armed
	stopped bool
}

type waitEntry[T any] struct {
	at   time.Time
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
	now := time.Now()
	at := now.Add(delay)
	q.dmu.Lock()
	if q.stopped || q.ShuttingDown() {
		q.dmu.Unlock()
		return false
	}
	// Deliver what is already due while we hold the lock and know the time:
	// under load the timer's goroutine may wait for a CPU for a whole
	// scheduler time slice, and a busy producer would make it late.
	delivered := len(q.heap) > 0 && !q.heap[0].at.After(now)
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

// addAfterLocked makes item due at at, unless it is already due earlier.
func (q *DelayingQueue[T]) addAfterLocked(item T, at time.Time) bool {
	if q.due == nil {
		q.due = make(map[T]time.Time)
	}
	if cur, ok := q.due[item]; ok && !at.Before(cur) {
		return true
	}
	q.due[item] = at
	q.push(waitEntry[T]{at: at, item: item})
	if q.armedAt.IsZero() || at.Before(q.armedAt) {
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

func (q *DelayingQueue[T]) armLocked(at time.Time) {
	q.armedAt = at
	d := time.Until(at)
	if q.timer == nil {
		q.timer = time.AfterFunc(d, q.fire)
		return
	}
	q.timer.Reset(d)
}

// fire moves every due item into the queue and re-arms the timer for the
// next one.
func (q *DelayingQueue[T]) fire() {
	q.dmu.Lock()
	defer q.dmu.Unlock()
	if q.stopped {
		return
	}
	q.armedAt = time.Time{}
	q.deliverLocked(time.Now())
	if len(q.heap) > 0 {
		q.armLocked(q.heap[0].at)
	}
}

// deliverLocked moves every item due by now into the queue.
func (q *DelayingQueue[T]) deliverLocked(now time.Time) {
	for len(q.heap) > 0 && !q.heap[0].at.After(now) {
		e := q.pop()
		if at, ok := q.due[e.item]; ok && at.Equal(e.at) {
			delete(q.due, e.item)
			q.Add(e.item)
		}
	}
	if len(q.heap) == 0 && cap(q.heap) > ringShrinkCap {
		// Give a burst's memory back once everything has been delivered.
		q.heap = nil
	}
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
	q.armedAt = time.Time{}
}

// push and pop keep q.heap a binary min-heap on at. They are written out
// rather than through container/heap, which would box every entry in an
// interface and allocate.
func (q *DelayingQueue[T]) push(e waitEntry[T]) {
	h := append(q.heap, e)
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !h[i].at.Before(h[parent].at) {
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
		if r := l + 1; r < len(h) && h[r].at.Before(h[l].at) {
			least = r
		}
		if !h[least].at.Before(h[i].at) {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	q.heap = h
	return top
}
