package workqueue

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimiter decides how long an item waits before it is retried.
type RateLimiter[T comparable] interface {
	// When records a failure of item and returns how long it should wait.
	When(item T) time.Duration
	// Forget drops what the limiter knows of item, as after a success.
	Forget(item T)
	// NumRequeues returns the failures recorded for item since it was last
	// forgotten.
	NumRequeues(item T) int
}

// Defaults of the limiters, as Kubernetes controllers use them.
const (
	DefaultBaseDelay = 5 * time.Millisecond
	DefaultMaxDelay  = 1000 * time.Second
	DefaultQPS       = 10
	DefaultBurst     = 100
)

// minForgetAfter is the shortest time a failure count is kept without a
// new failure, whatever the delays.
const minForgetAfter = time.Minute

// DefaultControllerRateLimiter returns the limiter controllers use unless
// told otherwise: per-item exponential backoff from 5ms to 1000s, and an
// overall token bucket of 10 qps with a burst of 100, the larger delay
// winning.
func DefaultControllerRateLimiter[T comparable]() RateLimiter[T] {
	return NewMaxOfRateLimiter[T](
		NewItemExponentialFailureRateLimiter[T](DefaultBaseDelay, DefaultMaxDelay),
		NewBucketRateLimiter[T](DefaultQPS, DefaultBurst),
	)
}

// failureTracker counts failures per item. So that items never forgotten
// cannot grow it without bound, an item whose last failure is older than
// ttl is dropped by a sweep that runs at most every ttl/2, which keeps the
// cost amortised O(1) per failure.
type failureTracker[T comparable] struct {
	mu        sync.Mutex
	failures  map[T]failureEntry
	lastSweep time.Time
}

type failureEntry struct {
	n    int
	last time.Time
}

// fail records a failure of item and returns its failure count, this one
// included.
func (f *failureTracker[T]) fail(item T, ttl time.Duration) int {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures == nil {
		f.failures = make(map[T]failureEntry)
		f.lastSweep = now
	}
	if now.Sub(f.lastSweep) >= ttl/2 {
		f.lastSweep = now
		for k, e := range f.failures {
			if now.Sub(e.last) > ttl {
				delete(f.failures, k)
			}
		}
	}
	e := f.failures[item]
	if e.n < math.MaxInt {
		e.n++
	}
	e.last = now
	f.failures[item] = e
	return e.n
}

func (f *failureTracker[T]) forget(item T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.failures, item)
}

func (f *failureTracker[T]) count(item T) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failures[item].n
}

func (f *failureTracker[T]) tracked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.failures)
}

// ItemExponentialFailureRateLimiter delays the n-th failure of an item by
// BaseDelay·2^(n-1), capped at MaxDelay. The zero value uses 5ms and 1000s.
type ItemExponentialFailureRateLimiter[T comparable] struct {
	// BaseDelay is the first delay; zero means DefaultBaseDelay.
	BaseDelay time.Duration
	// MaxDelay caps the delay; zero means DefaultMaxDelay.
	MaxDelay time.Duration
	// ForgetAfter is how long an item's failures are kept after its last
	// one when Forget is never called; zero means twice the largest delay
	// (at least a minute), so that an item in full backoff keeps its count.
	ForgetAfter time.Duration

	failures failureTracker[T]
}

// NewItemExponentialFailureRateLimiter returns a limiter doubling from base
// to max.
func NewItemExponentialFailureRateLimiter[T comparable](base, max time.Duration) *ItemExponentialFailureRateLimiter[T] {
	return &ItemExponentialFailureRateLimiter[T]{BaseDelay: base, MaxDelay: max}
}

func (l *ItemExponentialFailureRateLimiter[T]) limits() (base, maxDelay time.Duration) {
	base, maxDelay = l.BaseDelay, l.MaxDelay
	if base <= 0 {
		base = DefaultBaseDelay
	}
	if maxDelay <= 0 {
		maxDelay = DefaultMaxDelay
	}
	return base, max(base, maxDelay)
}

func (l *ItemExponentialFailureRateLimiter[T]) ttl() time.Duration {
	if l.ForgetAfter > 0 {
		return l.ForgetAfter
	}
	_, maxDelay := l.limits()
	return forgetAfter(maxDelay)
}

// forgetAfter is twice d, at least minForgetAfter, without overflow.
func forgetAfter(d time.Duration) time.Duration {
	if d > math.MaxInt64/2 {
		return math.MaxInt64
	}
	return max(2*d, minForgetAfter)
}

// When records a failure and returns the backoff for it.
func (l *ItemExponentialFailureRateLimiter[T]) When(item T) time.Duration {
	n := l.failures.fail(item, l.ttl())
	base, maxDelay := l.limits()
	return exponential(base, maxDelay, n-1)
}

// exponential returns base·2^exp capped at maxDelay, without overflowing.
func exponential(base, maxDelay time.Duration, exp int) time.Duration {
	if exp >= 63 || base > maxDelay>>uint(exp) {
		return maxDelay
	}
	return base << uint(exp)
}

// Forget resets item's backoff.
func (l *ItemExponentialFailureRateLimiter[T]) Forget(item T) { l.failures.forget(item) }

// NumRequeues returns item's failures since it was last forgotten.
func (l *ItemExponentialFailureRateLimiter[T]) NumRequeues(item T) int {
	return l.failures.count(item)
}

// ItemFastSlowRateLimiter delays the first MaxFastAttempts failures of an
// item by FastDelay and later ones by SlowDelay.
type ItemFastSlowRateLimiter[T comparable] struct {
	FastDelay       time.Duration
	SlowDelay       time.Duration
	MaxFastAttempts int
	// ForgetAfter is how long an item's failures are kept after its last
	// one when Forget is never called; zero means twice SlowDelay (at least
	// a minute).
	ForgetAfter time.Duration

	failures failureTracker[T]
}

// NewItemFastSlowRateLimiter returns a limiter with maxFastAttempts fast
// retries before slow ones.
func NewItemFastSlowRateLimiter[T comparable](fast, slow time.Duration, maxFastAttempts int) *ItemFastSlowRateLimiter[T] {
	return &ItemFastSlowRateLimiter[T]{FastDelay: fast, SlowDelay: slow, MaxFastAttempts: maxFastAttempts}
}

// When records a failure and returns the fast or the slow delay.
func (l *ItemFastSlowRateLimiter[T]) When(item T) time.Duration {
	ttl := l.ForgetAfter
	if ttl <= 0 {
		ttl = forgetAfter(max(l.FastDelay, l.SlowDelay))
	}
	if l.failures.fail(item, ttl) <= l.MaxFastAttempts {
		return max(l.FastDelay, 0)
	}
	return max(l.SlowDelay, 0)
}

// Forget resets item's attempts.
func (l *ItemFastSlowRateLimiter[T]) Forget(item T) { l.failures.forget(item) }

// NumRequeues returns item's failures since it was last forgotten.
func (l *ItemFastSlowRateLimiter[T]) NumRequeues(item T) int { return l.failures.count(item) }

// BucketRateLimiter limits retries of all items together with a token
// bucket. The zero value allows DefaultQPS with DefaultBurst.
type BucketRateLimiter[T comparable] struct {
	// Limiter is the bucket; nil means rate.NewLimiter(DefaultQPS, DefaultBurst).
	Limiter *rate.Limiter

	once sync.Once
}

// NewBucketRateLimiter returns a limiter of qps tokens a second holding up
// to burst tokens.
func NewBucketRateLimiter[T comparable](qps float64, burst int) *BucketRateLimiter[T] {
	return &BucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(qps), burst)}
}

// When takes a token, returning how long until it is available.
func (l *BucketRateLimiter[T]) When(T) time.Duration {
	l.once.Do(func() {
		if l.Limiter == nil {
			l.Limiter = rate.NewLimiter(DefaultQPS, DefaultBurst)
		}
	})
	return l.Limiter.Reserve().Delay()
}

// Forget does nothing: the bucket does not track items.
func (l *BucketRateLimiter[T]) Forget(T) {}

// NumRequeues is always zero: the bucket does not track items.
func (l *BucketRateLimiter[T]) NumRequeues(T) int { return 0 }

// MaxOfRateLimiter asks every limiter and uses the longest delay.
type MaxOfRateLimiter[T comparable] struct {
	Limiters []RateLimiter[T]
}

// NewMaxOfRateLimiter combines limiters; nil limiters are ignored.
func NewMaxOfRateLimiter[T comparable](limiters ...RateLimiter[T]) *MaxOfRateLimiter[T] {
	l := &MaxOfRateLimiter[T]{}
	for _, lim := range limiters {
		if lim != nil {
			l.Limiters = append(l.Limiters, lim)
		}
	}
	return l
}

// When records the failure with every limiter and returns the longest delay.
func (l *MaxOfRateLimiter[T]) When(item T) time.Duration {
	var d time.Duration
	for _, lim := range l.Limiters {
		d = max(d, lim.When(item))
	}
	return d
}

// Forget forgets item in every limiter.
func (l *MaxOfRateLimiter[T]) Forget(item T) {
	for _, lim := range l.Limiters {
		lim.Forget(item)
	}
}

// NumRequeues returns the largest count any limiter reports.
func (l *MaxOfRateLimiter[T]) NumRequeues(item T) int {
	n := 0
	for _, lim := range l.Limiters {
		n = max(n, lim.NumRequeues(item))
	}
	return n
}
