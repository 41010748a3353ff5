package cache

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// listenerBatch is how many pending keys the delivery goroutine takes per
// lock acquisition: enough to keep the lock off the hot path of a fast
// handler, few enough that merging still covers nearly all of a slow one's
// backlog.
const listenerBatch = 32

// idleSpins is how many times an idle delivery goroutine yields before it
// parks.
const idleSpins = 16

// listenerShrinkAbove is the slab size past which an emptied backlog drops
// its storage, so a burst does not pin its peak memory forever.
const listenerShrinkAbove = 4096

// nilNode marks the end of the pending list.
const nilNode = -1

// pendingNode is the backlog entry of one key: at most a delete followed by
// at most one live notification (an add, or an update chain merged into one).
// Holding both is needed for delete-then-add: the handler saw the old object
// and must be told it went before it hears of the new one.
type pendingNode[T Object] struct {
	key        string
	del, live  Notification[T]
	hasDel     bool
	hasLive    bool
	since      time.Time // when the oldest notification merged here arrived
	prev, next int32
}

// listener delivers notifications to one handler from its own goroutine,
// through a backlog that holds at most one entry per key, so a handler that
// falls behind costs memory bounded by the number of keys, never by the
// number of changes, and the informer never waits for it. An ordered
// listener (HandlerOptions.InOrder) merges nothing: its backlog holds every
// notification, in the order made.
type listener[T Object] struct {
	handler   ResourceEventHandler[T]
	nhandler  NotificationHandler[T] // handler as a NotificationHandler, or nil
	log       *slog.Logger
	onPanic   func(recovered any, n Notification[T])
	requested time.Duration // resync period asked for (after the 1 s floor)
	ordered   bool

	// Resync bookkeeping, guarded by the processor's mutex.
	resyncPeriod time.Duration
	nextResync   time.Time
	// syncing is set by shouldResync for listeners due for a resync, and
	// read when Sync notifications are distributed.
	syncing atomic.Bool

	mu sync.Mutex
	// index is the node of each pending key; for an ordered listener, the
	// number of nodes each pending key has.
	index   map[string]int32
	nodes   []pendingNode[T]
	free    int32 // head of the free list, linked through next
	head    int32
	tail    int32
	count   int // pending keys
	idle    bool
	stopped bool
	wake    chan struct{}

	// The delivery goroutine's view, readable without the lock.
	inFlight      atomic.Int64 // notifications taken but not yet delivered
	inFlightSince atomic.Int64 // UnixNano of the oldest of them, 0 if none
	// initialPending counts initial-list adds not yet delivered: the
	// registration has synced when it is zero and the informer has synced.
	initialPending atomic.Int64
	stoppedFlag    atomic.Bool
	panics         atomic.Uint64
	delivered      atomic.Uint64
}

func newListener[T Object](h ResourceEventHandler[T], ordered bool, requested, effective time.Duration, now time.Time, log *slog.Logger, onPanic func(any, Notification[T])) *listener[T] {
	l := &listener[T]{
		handler:      h,
		ordered:      ordered,
		log:          log,
		onPanic:      onPanic,
		requested:    requested,
		resyncPeriod: effective,
		nextResync:   now.Add(effective),
		index:        map[string]int32{},
		free:         nilNode,
		head:         nilNode,
		tail:         nilNode,
		wake:         make(chan struct{}, 1),
	}
	// Checked once here, so that delivery makes no type assertion.
	if nh, ok := h.(NotificationHandler[T]); ok {
		l.nhandler = nh
	}
	return l
}

// alloc returns a free node, growing the slab when none is left.
func (l *listener[T]) alloc() int32 {
	if l.free != nilNode {
		i := l.free
		l.free = l.nodes[i].next
		return i
	}
	l.nodes = append(l.nodes, pendingNode[T]{})
	return int32(len(l.nodes) - 1)
}

// release unlinks node i from the pending list and puts it on the free list,
// dropping its object references for the GC.
func (l *listener[T]) release(i int32) {
	n := &l.nodes[i]
	if n.prev != nilNode {
		l.nodes[n.prev].next = n.next
	} else {
		l.head = n.next
	}
	if n.next != nilNode {
		l.nodes[n.next].prev = n.prev
	} else {
		l.tail = n.prev
	}
	if c := l.index[n.key]; l.ordered && c > 1 {
		l.index[n.key] = c - 1
	} else {
		delete(l.index, n.key)
	}
	*n = pendingNode[T]{next: l.free}
	l.free = i
	l.count--
}

// add queues n for key, merging it with what is pending for key. It never
// blocks on the handler. now is the arrival time, taken once per change by
// the caller rather than once per listener.
func (l *listener[T]) add(key string, n *Notification[T], now time.Time) {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	if l.ordered {
		l.index[key]++
	} else if i, ok := l.index[key]; ok {
		l.merge(i, n)
		l.mu.Unlock()
		return
	}
	i := l.alloc()
	node := &l.nodes[i]
	node.key = key
	node.since = now
	if n.Type == NotifyDelete {
		node.del, node.hasDel = *n, true
	} else {
		node.live, node.hasLive = *n, true
		if n.Type == NotifyAdd && n.IsInInitialList {
			l.initialPending.Add(1)
		}
	}
	node.prev, node.next = l.tail, nilNode
	if l.tail != nilNode {
		l.nodes[l.tail].next = i
	} else {
		l.head = i
	}
	l.tail = i
	if !l.ordered {
		l.index[key] = i
	}
	l.count++
	l.unlockAndWake()
}

// merge folds n into pending node i (see the rules on SharedIndexInformer).
func (l *listener[T]) merge(i int32, n *Notification[T]) {
	node := &l.nodes[i]
	switch n.Type {
	case NotifyAdd:
		if node.hasLive && node.live.Type == NotifyAdd {
			// Cannot happen (an add of a cached key is an update); keep the
			// pending add, with the newest object.
			node.live.Object = n.Object
			return
		}
		if node.hasLive && node.live.IsInInitialList {
			l.initialPending.Add(-1)
		}
		node.live, node.hasLive = *n, true
		if n.IsInInitialList {
			l.initialPending.Add(1)
		}
	case NotifyUpdate:
		if !node.hasLive {
			// An update behind a pending delete: the handler will have
			// dropped the object, so it must learn of it as an add.
			node.live = Notification[T]{Type: NotifyAdd, Object: n.Object, Source: n.Source}
			node.hasLive = true
			return
		}
		// add+update is an add of the newest state; update+update goes
		// from the oldest old state to the newest new one. A resync carries
		// no change of its own, so merged into a real change it must not
		// relabel it: a handler skipping resyncs would miss the change.
		node.live.Object = n.Object
		if node.live.Type == NotifyUpdate && (n.Source != SourceResync || node.live.Source == SourceResync) {
			node.live.Source = n.Source
		}
	case NotifyDelete:
		if node.hasLive && node.live.Type == NotifyAdd {
			// The handler never saw this incarnation: drop it.
			if node.live.IsInInitialList {
				l.initialPending.Add(-1)
			}
			node.live, node.hasLive = Notification[T]{}, false
			if !node.hasDel {
				l.release(i)
			}
			return
		}
		// A pending update is superseded: the handler saw the update's old
		// state and now learns the object is gone.
		node.live, node.hasLive = Notification[T]{}, false
		if !node.hasDel {
			node.del, node.hasDel = *n, true
		}
	}
}

// stop discards the backlog and ends the delivery goroutine once the
// notification it is delivering, if any, returns.
func (l *listener[T]) stop() {
	l.stoppedFlag.Store(true)
	l.mu.Lock()
	l.stopped = true
	l.index = nil
	l.nodes = nil
	l.head, l.tail, l.free, l.count = nilNode, nilNode, nilNode, 0
	l.unlockAndWake()
}

// run delivers notifications until stop. It takes a batch of pending keys
// per lock acquisition and delivers them without the lock held.
func (l *listener[T]) run(ctx context.Context) {
	buf := make([]Notification[T], 0, 2*listenerBatch)
	var since []int64
	for {
		l.mu.Lock()
		for spin := 0; l.count == 0 && !l.stopped && spin < idleSpins; spin++ {
			// Parking and waking a goroutine per notification costs more
			// than the notification: yield a few times first, so that a
			// handler keeping up with a stream takes its next notification
			// without a wake-up.
			l.mu.Unlock()
			runtime.Gosched()
			l.mu.Lock()
		}
		for l.count == 0 && !l.stopped {
			l.idle = true
			l.mu.Unlock()
			<-l.wake
			l.mu.Lock()
		}
		if l.stopped {
			l.mu.Unlock()
			return
		}
		buf, since = l.take(buf[:0], since[:0])
		l.mu.Unlock()

		for j := range buf {
			if l.stoppedFlag.Load() {
				break
			}
			l.inFlightSince.Store(since[j])
			l.deliver(ctx, &buf[j])
			l.inFlight.Add(-1)
			l.delivered.Add(1)
		}
		l.inFlight.Store(0)
		l.inFlightSince.Store(0)
		clear(buf) // drop object references while idle
	}
}

// take moves up to listenerBatch pending keys into buf, with the arrival
// time of each notification in since.
func (l *listener[T]) take(buf []Notification[T], since []int64) ([]Notification[T], []int64) {
	for k := 0; k < listenerBatch && l.head != nilNode; k++ {
		i := l.head
		node := &l.nodes[i]
		t := node.since.UnixNano()
		if node.hasDel {
			buf = append(buf, node.del)
			since = append(since, t)
		}
		if node.hasLive {
			buf = append(buf, node.live)
			since = append(since, t)
		}
		l.release(i)
	}
	l.inFlight.Store(int64(len(buf)))
	if l.count == 0 && len(l.nodes) > listenerShrinkAbove {
		l.nodes, l.free = nil, nilNode
		l.index = map[string]int32{}
	}
	return buf, since
}

// deliver calls the handler with n, recovering a panic so that the handler
// keeps receiving what follows.
func (l *listener[T]) deliver(ctx context.Context, n *Notification[T]) {
	defer func() {
		if r := recover(); r != nil {
			l.panics.Add(1)
			l.log.ErrorContext(ctx, "cache: event handler panicked", "type", n.Type, "source", n.Source,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			if l.onPanic != nil {
				l.onPanic(r, *n)
			}
		}
		if n.Type == NotifyAdd && n.IsInInitialList {
			l.initialPending.Add(-1)
		}
	}()
	if l.nhandler != nil {
		l.nhandler.OnNotification(*n)
		return
	}
	switch n.Type {
	case NotifyAdd:
		l.handler.OnAdd(n.Object, n.IsInInitialList)
	case NotifyUpdate:
		l.handler.OnUpdate(n.OldObject, n.Object)
	case NotifyDelete:
		l.handler.OnDelete(n.Object, n.FinalStateUnknown)
	}
}

// backlog returns the notifications waiting for the handler and the arrival
// time of the oldest, zero when there is none.
func (l *listener[T]) backlog() (n int, oldest time.Time) {
	l.mu.Lock()
	for i := l.head; i != nilNode; i = l.nodes[i].next {
		node := &l.nodes[i]
		if node.hasDel {
			n++
		}
		if node.hasLive {
			n++
		}
	}
	if l.head != nilNode {
		oldest = l.nodes[l.head].since
	}
	l.mu.Unlock()
	n += int(max(l.inFlight.Load(), 0))
	if t := l.inFlightSince.Load(); t != 0 {
		// What the delivery goroutine holds arrived before anything queued.
		oldest = time.Unix(0, t)
	}
	return n, oldest
}

// pendingKeys returns the number of keys with a pending notification.
func (l *listener[T]) pendingKeys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.index)
}

// unlockAndWake releases l.mu and, if the run loop was idle, wakes it. The
// send happens outside the lock so the loop can take the lock as it wakes.
func (l *listener[T]) unlockAndWake() {
	wake := l.idle
	l.idle = false
	l.mu.Unlock()
	if wake {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}
