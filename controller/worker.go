package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/listwatch/listwatch/workqueue"
)

// Queue is what Runner needs of a workqueue; *workqueue.RateLimitingQueue
// implements it.
type Queue[T comparable] interface {
	Get() (item T, ok bool)
	Done(item T)
	Forget(item T)
	AddRateLimited(item T) bool
	ShutDown()
	ShutDownWithDrain(ctx context.Context) error
}

var _ Queue[string] = (*workqueue.RateLimitingQueue[string])(nil)

// SyncFunc brings the world in line with item's desired state. An error
// retries item with rate limiting; nil forgets its backoff.
type SyncFunc[T comparable] func(ctx context.Context, item T) error

// Runner runs workers that take items from Queue and hand them to Sync.
type Runner[T comparable] struct {
	// Name identifies the controller in logs.
	Name string
	// Queue holds the items to sync.
	Queue Queue[T]
	// Sync processes one item; it is never called concurrently for the
	// same item.
	Sync SyncFunc[T]
	// Logger receives sync errors and panics; nil means slog.Default().
	Logger *slog.Logger
	// DrainTimeout bounds how long Run lets workers finish the queued and
	// in-flight items after ctx ends; when it is up, queued items are
	// dropped and in-flight syncs see their context cancelled. Zero means
	// 10s; a negative value means no drain at all.
	DrainTimeout time.Duration
	// CacheSyncPollInterval is how often caches are polled before the
	// workers start; zero means 100ms.
	CacheSyncPollInterval time.Duration
}

const (
	defaultDrainTimeout          = 10 * time.Second
	defaultCacheSyncPollInterval = 100 * time.Millisecond
)

// ErrCacheSyncAborted is returned by Run when ctx ends before the caches
// have synced.
var ErrCacheSyncAborted = errors.New("controller: caches did not sync")

// Run waits until every cacheSyncs function reports true, then runs workers
// goroutines (at least one) until ctx ends. It then shuts the queue down,
// draining it within DrainTimeout, and returns once every worker has
// stopped, having waited for in-flight syncs to return. Sync receives a
// context that stays live during the drain and is cancelled when the drain
// is over or its time is up.
func (r *Runner[T]) Run(ctx context.Context, workers int, cacheSyncs ...func() bool) error {
	if r.Queue == nil || r.Sync == nil {
		return fmt.Errorf("controller %q: Runner needs a Queue and a Sync", r.Name)
	}
	log := r.logger()
	if err := WaitForCacheSync(ctx, r.pollInterval(), cacheSyncs...); err != nil {
		r.Queue.ShutDown()
		return fmt.Errorf("controller %q: %w", r.Name, err)
	}
	workers = max(workers, 1)
	log.Info("starting workers", "workers", workers)

	// Syncs outlive ctx by the drain, so they get their own context.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for r.processNextWorkItem(workCtx, log) {
			}
		})
	}
	<-ctx.Done()
	log.Info("shutting down workers")
	drain := r.DrainTimeout
	if drain == 0 {
		drain = defaultDrainTimeout
	}
	if drain < 0 {
		r.Queue.ShutDown()
	} else {
		drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
		if err := r.Queue.ShutDownWithDrain(drainCtx); err != nil {
			log.Warn("queue not drained in time", "timeout", drain, "err", err)
		}
		cancel()
	}
	// In-flight syncs past the drain time are told to stop.
	cancelWork()
	wg.Wait()
	return nil
}

func (r *Runner[T]) logger() *slog.Logger {
	l := r.Logger
	if l == nil {
		l = slog.Default()
	}
	return l.With("controller", r.Name)
}

func (r *Runner[T]) pollInterval() time.Duration {
	if r.CacheSyncPollInterval > 0 {
		return r.CacheSyncPollInterval
	}
	return defaultCacheSyncPollInterval
}

// processNextWorkItem syncs one item and reports whether the worker should
// go on.
func (r *Runner[T]) processNextWorkItem(ctx context.Context, log *slog.Logger) bool {
	item, ok := r.Queue.Get()
	if !ok {
		return false
	}
	defer r.Queue.Done(item)
	if err := r.syncOne(ctx, item); err != nil {
		var pe *PanicError
		if errors.As(err, &pe) {
			log.Error("sync panicked; retrying with backoff", "item", item, "panic", pe.Value, "stack", string(pe.Stack))
		} else {
			log.Error("sync failed; retrying with backoff", "item", item, "err", err)
		}
		r.Queue.AddRateLimited(item)
		return true
	}
	r.Queue.Forget(item)
	return true
}

// PanicError is the error a panicking Sync is turned into.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("sync panicked: %v", e.Value) }

// syncOne calls Sync, turning a panic into an error so that one bad item
// cannot take the worker, or the process, down with it.
func (r *Runner[T]) syncOne(ctx context.Context, item T) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return r.Sync(ctx, item)
}

// WaitForCacheSync polls every interval until each function in cacheSyncs
// reports true, and fails with ErrCacheSyncAborted if ctx ends first.
func WaitForCacheSync(ctx context.Context, interval time.Duration, cacheSyncs ...func() bool) error {
	synced := func() bool {
		for _, f := range cacheSyncs {
			if f != nil && !f() {
				return false
			}
		}
		return true
	}
	if synced() {
		return nil
	}
	if interval <= 0 {
		interval = defaultCacheSyncPollInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrCacheSyncAborted, context.Cause(ctx))
		case <-t.C:
			if synced() {
				return nil
			}
		}
	}
}
