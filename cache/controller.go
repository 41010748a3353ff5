package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// Queue is what a Controller drains: a store the Reflector fills, popped one
// key at a time. DeltaFIFO is the implementation.
type Queue[T Object] interface {
	ReflectorStore[T]
	Pop(process PopProcessFunc[T]) error
	HasSynced() bool
	Close()
}

// Config configures a Controller.
type Config[T Object] struct {
	// Queue receives what the Reflector reads and is drained into Process.
	Queue Queue[T]
	// ListerWatcher is where the Reflector reads from.
	ListerWatcher ListerWatcher[T]
	// Process handles one key's deltas. It runs while the queue is locked,
	// so it must not call back into the queue.
	Process PopProcessFunc[T]
	// FullResyncPeriod and ShouldResync set the Reflector's resync.
	FullResyncPeriod time.Duration
	ShouldResync     func() bool
	// RetryOnError puts a key's deltas back in the queue when Process fails.
	RetryOnError bool
	// Reflector holds the rest of the Reflector's options; its ResyncPeriod
	// and ShouldResync are taken from the fields above.
	Reflector ReflectorOptions
}

// Controller is the low-level loop of an informer: a Reflector filling a
// Queue and a processLoop draining it into Process.
type Controller[T Object] struct {
	cfg Config[T]
	log *slog.Logger

	mu        sync.Mutex
	reflector *Reflector[T]
	started   bool
}

// NewController returns a Controller for cfg; Run starts it.
func NewController[T Object](cfg Config[T]) *Controller[T] {
	log := cmp.Or(cfg.Reflector.Logger, slog.Default())
	return &Controller[T]{cfg: cfg, log: log}
}

// Run runs the Reflector and the processLoop until ctx is done, and returns
// once both have stopped. A Controller runs once: later calls return at once.
func (c *Controller[T]) Run(ctx context.Context) {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		c.log.WarnContext(ctx, "cache: Controller.Run called twice")
		return
	}
	c.started = true
	opts := c.cfg.Reflector
	opts.ResyncPeriod = c.cfg.FullResyncPeriod
	opts.ShouldResync = c.cfg.ShouldResync
	r := NewReflector(c.cfg.ListerWatcher, c.cfg.Queue, opts)
	c.reflector = r
	c.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	// Closing the queue is what wakes a Pop waiting for work.
	stop := context.AfterFunc(ctx, c.cfg.Queue.Close)
	defer stop()
	c.processLoop(ctx)
	c.cfg.Queue.Close()
	wg.Wait()
}

func (c *Controller[T]) processLoop(ctx context.Context) {
	process := c.cfg.Process
	if c.cfg.RetryOnError {
		inner := process
		process = func(key string, d Deltas[T], initial bool) error {
			if err := inner(key, d, initial); err != nil {
				return ErrRequeue{Err: err}
			}
			return nil
		}
	}
	for ctx.Err() == nil {
		err := c.pop(process)
		if errors.Is(err, ErrFIFOClosed) {
			return
		}
		if err != nil {
			c.log.ErrorContext(ctx, "cache: processing deltas failed", "err", err)
		}
	}
}

// pop pops one key, turning a panic in Process into an error: a buggy
// handler must not take the informer down with it.
func (c *Controller[T]) pop(process PopProcessFunc[T]) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cache: panic in Process: %v\n%s", p, debug.Stack())
		}
	}()
	return c.cfg.Queue.Pop(process)
}

// HasSynced reports whether the first list has been fully processed.
func (c *Controller[T]) HasSynced() bool {
	return c.cfg.Queue.HasSynced()
}

// LastSyncResourceVersion returns the resourceVersion the Reflector last
// applied, or "" before Run.
func (c *Controller[T]) LastSyncResourceVersion() string {
	c.mu.Lock()
	r := c.reflector
	c.mu.Unlock()
	if r == nil {
		return ""
	}
	return r.LastSyncResourceVersion()
}

// WaitForCacheSync waits until every hasSynced reports true, checking every
// 100 ms, and reports false if ctx ended first.
func WaitForCacheSync(ctx context.Context, hasSynced ...func() bool) bool {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		all := true
		for _, f := range hasSynced {
			if !f() {
				all = false
				break
			}
		}
		if all {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}
