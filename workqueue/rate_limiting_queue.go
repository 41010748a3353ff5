package workqueue

import "sync"

// RateLimitingInterface is the contract of RateLimitingQueue.
type RateLimitingInterface[T comparable] interface {
	DelayingInterface[T]
	AddRateLimited(item T) bool
	Forget(item T)
	NumRequeues(item T) int
}

// RateLimitingQueue is a DelayingQueue that asks a RateLimiter how long an
// item must wait before it is retried. The zero RateLimitingQueue is ready
// to use with DefaultControllerRateLimiter and no metrics.
type RateLimitingQueue[T comparable] struct {
	DelayingQueue[T]

	once    sync.Once
	limiter RateLimiter[T]
}

// NewRateLimitingQueue returns an empty RateLimitingQueue that delays
// retries by limiter (DefaultControllerRateLimiter when nil).
func NewRateLimitingQueue[T comparable](limiter RateLimiter[T], cfg Config) *RateLimitingQueue[T] {
	q := &RateLimitingQueue[T]{limiter: limiter}
	q.Queue.init(cfg)
	return q
}

func (q *RateLimitingQueue[T]) rateLimiter() RateLimiter[T] {
	q.once.Do(func() {
		if q.limiter == nil {
			q.limiter = DefaultControllerRateLimiter[T]()
		}
	})
	return q.limiter
}

// AddRateLimited adds item after the delay the rate limiter assigns it,
// counting a retry. It reports false, dropping the item without consulting
// the limiter, when the queue is shutting down.
func (q *RateLimitingQueue[T]) AddRateLimited(item T) bool {
	if q.ShuttingDown() {
		return false
	}
	if m := q.metrics; m != nil {
		m.retries.Inc()
	}
	return q.AddAfter(item, q.rateLimiter().When(item))
}

// Forget tells the rate limiter that item is done with retrying, resetting
// its backoff. It does not remove item from the queue.
func (q *RateLimitingQueue[T]) Forget(item T) {
	q.rateLimiter().Forget(item)
}

// NumRequeues returns how many times item has been rate limited since it
// was last forgotten.
func (q *RateLimitingQueue[T]) NumRequeues(item T) int {
	return q.rateLimiter().NumRequeues(item)
}
