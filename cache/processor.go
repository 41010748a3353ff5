package cache

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// processor fans notifications out to the listeners of a shared informer.
// The listener set is copy-on-write, so distribute, on the informer's hot
// path, reads it with one atomic load and takes no processor lock.
type processor[T Object] struct {
	mu        sync.Mutex
	listeners atomic.Pointer[[]*listener[T]]
	running   bool
	stopped   bool
	ctx       context.Context
	wg        sync.WaitGroup
}

func newProcessor[T Object]() *processor[T] {
	p := &processor[T]{}
	p.listeners.Store(&[]*listener[T]{})
	return p
}

// addListener registers l, starting its goroutine if the processor runs. It
// reports false when the processor has stopped.
func (p *processor[T]) addListener(l *listener[T]) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	cur := *p.listeners.Load()
	next := append(slices.Clip(cur), l)
	p.listeners.Store(&next)
	if p.running {
		p.wg.Go(func() { l.run(p.ctx) })
	}
	return true
}

// removeListener unregisters l and stops it. It reports whether l was
// registered.
func (p *processor[T]) removeListener(l *listener[T]) bool {
	p.mu.Lock()
	cur := *p.listeners.Load()
	i := slices.Index(cur, l)
	if i >= 0 {
		next := slices.Delete(slices.Clone(cur), i, i+1)
		p.listeners.Store(&next)
	}
	p.mu.Unlock()
	if i < 0 {
		return false
	}
	l.stop()
	return true
}

// run starts every listener's goroutine. ctx is only for their logs: they
// stop on stop, after the informer's reflector has stopped.
func (p *processor[T]) run(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running || p.stopped {
		return
	}
	p.running = true
	p.ctx = context.WithoutCancel(ctx)
	for _, l := range *p.listeners.Load() {
		p.wg.Go(func() { l.run(p.ctx) })
	}
}

// stop stops every listener and waits for their goroutines, which return
// once the notification each is delivering, if any, returns.
func (p *processor[T]) stop() {
	p.mu.Lock()
	p.stopped = true
	ls := *p.listeners.Load()
	p.mu.Unlock()
	for _, l := range ls {
		l.stop()
	}
	p.wg.Wait()
}

// distribute queues n for key on every listener, or, for a resync, on the
// listeners due for one.
func (p *processor[T]) distribute(key string, n *Notification[T], resync bool, now time.Time) {
	for _, l := range *p.listeners.Load() {
		if resync && !l.syncing.Load() {
			continue
		}
		l.add(key, n, now)
	}
}

// shouldResync marks the listeners whose resync is due and reports whether
// any is. The Reflector calls it before each resync.
func (p *processor[T]) shouldResync() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	anyDue := false
	for _, l := range *p.listeners.Load() {
		due := l.resyncPeriod > 0 && !now.Before(l.nextResync)
		l.syncing.Store(due)
		if due {
			anyDue = true
			l.nextResync = now.Add(l.resyncPeriod)
		}
	}
	return anyDue
}

// resyncCheckPeriodChanged recomputes every listener's resync period for a
// new check period.
func (p *processor[T]) resyncCheckPeriodChanged(check time.Duration, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range *p.listeners.Load() {
		l.resyncPeriod = effectiveResync(l.requested, check)
		l.nextResync = now.Add(l.resyncPeriod)
	}
}

// effectiveResync is the resync period a listener asking for requested gets
// from an informer checking every check: none when either is zero, never
// less than check otherwise, since nothing resyncs between checks.
func effectiveResync(requested, check time.Duration) time.Duration {
	if requested <= 0 || check <= 0 {
		return 0
	}
	return max(requested, check)
}
