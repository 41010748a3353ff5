package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/listwatch/listwatch/internal/defaults"
	"github.com/listwatch/listwatch/workqueue"
)

// SyncHandler brings the world in line with the desired state of the
// object key names, reading it from an informer's cache; it must be
// idempotent, since a key is synced again after every change and every
// failure. It is never called concurrently for one key.
//
// A nil error forgets the key's backoff, and Result.RequeueAfter, when
// positive, syncs the key again after that delay. An error syncs it again
// with rate limiting (Result is then ignored), unless it is Terminal: a
// terminal error is logged and the key is not retried until something
// queues it again.
type SyncHandler[K comparable] func(ctx context.Context, key K) (Result, error)

// Result is what a sync asks of the queue besides retries.
type Result struct {
	// RequeueAfter, when positive, queues the key again after this delay:
	// for what no event will announce (a pod becoming available
	// minReadySeconds after it is ready, a grace period ending).
	RequeueAfter time.Duration
}

// Terminal marks err as one that retrying cannot mend (a malformed key, an
// object the controller will never be able to act on): the key is
// forgotten rather than retried. Terminal(nil) is nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &TerminalError{Err: err}
}

// TerminalError is the error Terminal returns.
type TerminalError struct{ Err error }

func (e *TerminalError) Error() string { return "terminal: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *TerminalError) Unwrap() error { return e.Err }

// IsTerminal reports whether err, or an error it wraps, is Terminal.
func IsTerminal(err error) bool {
	var te *TerminalError
	return errors.As(err, &te)
}

// Options tune a Controller. The zero value works: one worker,
// workqueue.DefaultControllerRateLimiter's backoff, slog.Default().
type Options struct {
	// Workers is the number of goroutines syncing keys; 1 when not
	// positive.
	Workers int
	// Logger receives sync errors, panics and the workers' start and
	// stop, with the controller's name; slog.Default() when nil.
	Logger *slog.Logger
	// Metrics, when set, records the workqueue's metrics under the
	// controller's name.
	Metrics workqueue.MetricsProvider
	// RetryBaseDelay and RetryMaxDelay bound the per-key exponential
	// backoff of failed syncs (doubling from base to max);
	// workqueue.DefaultBaseDelay and DefaultMaxDelay when zero.
	RetryBaseDelay, RetryMaxDelay time.Duration
	// RetryQPS and RetryBurst bound the retries of all keys together (a
	// token bucket); workqueue.DefaultQPS and DefaultBurst when zero.
	RetryQPS   float64
	RetryBurst int
	// DrainTimeout bounds how long Run lets workers finish the queued and
	// in-flight keys after ctx ends; when it is up, queued keys are
	// dropped and in-flight syncs see their context cancelled. Zero means
	// 10s; a negative value means no drain at all.
	DrainTimeout time.Duration
	// CacheSyncPollInterval is how often the sources' HasSynced are polled
	// before the workers start; zero means 100ms.
	CacheSyncPollInterval time.Duration
	// StaleReadTimeout bounds how long a key's sync waits for the
	// informers to show the controller's own last write of it (stale-read
	// protection, see StaleSyncs); zero means 10s, and a negative value
	// turns the protection off.
	StaleReadTimeout time.Duration
	// Recorder, when set, receives the Warning events (reason
	// StaleReadTimeoutReason) of stale-read protection's timeouts, one per
	// object whose write an informer had not shown; the log and the
	// metrics have them either way.
	Recorder EventRecorder
	// PriorityQueue, when true, queues the keys that For, Owns and Watches
	// take from an informer's initial list and from its resyncs (updates
	// that change nothing) at workqueue.PriorityLow, so that after a
	// restart live changes are synced before the backlog of the initial
	// list; every other key goes at workqueue.PriorityNormal, as Add
	// queues it. Aging bounds the wait: a key of the initial list goes
	// before every live change that comes more than AgingStep after it
	// (see workqueue.Queue.AddWithPriority). Off, the queue is FIFO.
	PriorityQueue bool
	// AgingStep is the priority queue's aging step;
	// workqueue.DefaultAgingStep when zero.
	AgingStep time.Duration
}

const (
	defaultDrainTimeout          = 10 * time.Second
	defaultCacheSyncPollInterval = 100 * time.Millisecond
)

// rateLimiter is the queue's limiter: per-key exponential backoff, and an
// overall token bucket, as workqueue.DefaultControllerRateLimiter.
func (o Options) rateLimiter() (base, maxDelay time.Duration, qps float64, burst int) {
	base, maxDelay = o.RetryBaseDelay, o.RetryMaxDelay
	defaults.Positive(&base, workqueue.DefaultBaseDelay)
	defaults.Positive(&maxDelay, workqueue.DefaultMaxDelay)
	qps, burst = o.RetryQPS, o.RetryBurst
	defaults.Positive(&qps, workqueue.DefaultQPS)
	defaults.Positive(&burst, workqueue.DefaultBurst)
	return base, maxDelay, qps, burst
}

// Controller is the pattern of client-go's controllers, which the seeds
// teach: informer event handlers (AddEventHandler) put keys on a
// rate-limited workqueue, and workers take them off one at a time
// (processNextWorkItem) and hand them to the sync handler. Make one with
// New and Run it once.
type Controller[K comparable] struct {
	name    string
	sync    SyncHandler[K]
	sources []Source[K]
	opts    Options
	log     *slog.Logger
	ran     atomic.Bool
	working atomic.Bool

	// queue is made by the first call of Queue (Run's, or a handler's or
	// test's before it), since a queue with metrics runs a goroutine.
	queueOnce sync.Once
	queue     *workqueue.RateLimitingQueue[K]

	// fresh is stale-read protection's record of the syncs' writes; nil
	// when Options turn it off.
	fresh *freshness[K]
}

// ErrAlreadyRun is returned by a second call of Run.
var ErrAlreadyRun = errors.New("controller: already run")

// ErrStopNow, as the cause of the end of Run's context, stops the
// controller at once, with no drain: for a replica that lost the Lease
// under which it worked, whose writes must end before another replica's
// may begin.
var ErrStopNow = errors.New("controller: stop at once")

// ErrCacheSyncAborted is returned by Run when ctx ends before the caches
// have synced.
var ErrCacheSyncAborted = errors.New("controller: caches did not sync")

// New returns the controller called name (in logs and queue metrics) that
// syncs keys with sync, fed by sources. It starts nothing: the sources'
// handlers are registered by Run, so New may be called before or after
// the informers start, and a controller that is never run leaves nothing
// behind.
func New[K comparable](name string, sync SyncHandler[K], opts Options, sources ...Source[K]) (*Controller[K], error) {
	if name == "" || sync == nil {
		return nil, errors.New("controller: New needs a name and a sync handler")
	}
	for i, s := range sources {
		if s == nil {
			return nil, fmt.Errorf("controller %q: source %d is nil", name, i)
		}
	}
	log := cmp.Or(opts.Logger, slog.Default())
	c := &Controller[K]{
		name:    name,
		sync:    sync,
		sources: sources,
		opts:    opts,
		log:     log.With("controller", name),
	}
	if opts.StaleReadTimeout >= 0 {
		c.fresh = &freshness[K]{timeout: opts.StaleReadTimeout, events: opts.Recorder}
		if c.fresh.timeout == 0 {
			c.fresh.timeout = DefaultStaleReadTimeout
		}
		if m, ok := opts.Metrics.(StaleSyncMetricsProvider); ok {
			c.fresh.skips = m.NewStaleSyncSkipsMetric(name)
			c.fresh.timeouts = m.NewStaleSyncTimeoutsMetric(name)
		}
	}
	return c, nil
}

// Name returns the controller's name.
func (c *Controller[K]) Name() string { return c.name }

// Queue returns the controller's workqueue, for event handlers that queue
// keys themselves (Handle) and for tests. A sync asks for a later look
// through its Result rather than through the queue. The queue is made on
// the first call; Run shuts it down, and a test that calls Queue without
// Run shuts it down itself.
func (c *Controller[K]) Queue() *workqueue.RateLimitingQueue[K] {
	c.queueOnce.Do(func() {
		base, maxDelay, qps, burst := c.opts.rateLimiter()
		limiter := workqueue.NewMaxOfRateLimiter(
			workqueue.NewItemExponentialFailureRateLimiter[K](base, maxDelay),
			workqueue.NewBucketRateLimiter[K](qps, burst),
		)
		c.queue = workqueue.NewRateLimitingQueue(limiter, workqueue.Config{
			Name: c.name, MetricsProvider: c.opts.Metrics, AgingStep: c.opts.AgingStep,
		})
	})
	return c.queue
}

// Logger returns the controller's logger, which names it.
func (c *Controller[K]) Logger() *slog.Logger { return c.log }

// HasSynced reports whether the workers are running: Run has registered
// every source and their caches have synced. It is false again once ctx
// has ended.
func (c *Controller[K]) HasSynced() bool { return c.working.Load() }

// Run registers the sources' event handlers, waits until every source has
// synced, then runs the workers until ctx ends. It then removes the
// handlers (the informers may be shared and outlive the controller),
// drains the queue within Options.DrainTimeout, and returns once every
// worker has stopped, leaving no goroutine behind. The sync handler
// receives a context that stays live during the drain and is cancelled
// when the drain is over or its time is up.
//
// A ctx cancelled with ErrStopNow as its cause (context.WithCancelCause)
// skips the drain: queued keys are dropped and in-flight syncs see their
// context cancelled at once.
//
// Run returns nil when ctx ends, ErrCacheSyncAborted (wrapped) when it
// ends before the caches sync, the error of a source that cannot
// register, and ErrAlreadyRun when called twice.
func (c *Controller[K]) Run(ctx context.Context) error {
	if !c.ran.CompareAndSwap(false, true) {
		return fmt.Errorf("controller %q: %w", c.name, ErrAlreadyRun)
	}
	c.Queue()
	synced, removeHandlers, err := c.register()
	if err != nil {
		c.queue.ShutDown()
		return fmt.Errorf("controller %q: %w", c.name, err)
	}
	defer removeHandlers()
	if err := waitForCacheSync(ctx, c.opts.CacheSyncPollInterval, synced...); err != nil {
		c.queue.ShutDown()
		return fmt.Errorf("controller %q: %w", c.name, err)
	}
	workers := max(c.opts.Workers, 1)
	c.log.Debug("starting workers", "workers", workers)
	c.working.Store(true)

	// Syncs outlive ctx by the drain, so they get their own context.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.processNextWorkItem(workCtx) {
			}
		})
	}
	<-ctx.Done()
	c.working.Store(false)
	c.log.Debug("shutting down workers")
	// No more events: what is queued is drained, nothing new comes in.
	removeHandlers()
	if errors.Is(context.Cause(ctx), ErrStopNow) {
		c.queue.ShutDown()
	} else {
		c.drain(ctx)
	}
	// In-flight syncs past the drain time are told to stop.
	cancelWork()
	wg.Wait()
	return nil
}

// register registers every source, returning their HasSynced and a func,
// safe to call more than once, that removes what was registered.
func (c *Controller[K]) register() (synced []func() bool, remove func(), err error) {
	var removes []func()
	var once sync.Once
	remove = func() {
		once.Do(func() {
			for _, r := range removes {
				r()
			}
		})
	}
	for _, s := range c.sources {
		hasSynced, rm, err := s.Register(c)
		if err != nil {
			remove()
			return nil, nil, err
		}
		synced = append(synced, hasSynced)
		if rm != nil {
			removes = append(removes, rm)
		}
	}
	return synced, remove, nil
}

func (c *Controller[K]) drain(ctx context.Context) {
	d := c.opts.DrainTimeout
	if d == 0 {
		d = defaultDrainTimeout
	}
	if d < 0 {
		c.queue.ShutDown()
		return
	}
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	if err := c.queue.ShutDownWithDrain(drainCtx); err != nil {
		c.log.Warn("queue not drained in time", "timeout", d, "err", err)
	}
}

// waitForCacheSync polls every interval (100ms when not positive) until
// each function in cacheSyncs reports true, and fails with
// ErrCacheSyncAborted if ctx ends first.
func waitForCacheSync(ctx context.Context, interval time.Duration, cacheSyncs ...func() bool) error {
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
	defaults.Positive(&interval, defaultCacheSyncPollInterval)
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
