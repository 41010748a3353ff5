// Package workqueue holds the queues that sit between informer event
// handlers and controller workers.
//
// Queue deduplicates items and guarantees that no item is handed to two
// workers at once; DelayingQueue adds AddAfter; RateLimitingQueue adds
// AddRateLimited, Forget and NumRequeues on top of a RateLimiter. All of them
// are generic over the item type, so workers never type-assert.
//
// The usual worker loop is:
//
//	for {
//		key, ok := q.Get()
//		if !ok {
//			return // the queue was shut down
//		}
//		if err := sync(key); err != nil {
//			q.AddRateLimited(key)
//		} else {
//			q.Forget(key)
//		}
//		q.Done(key)
//	}
//
// Metrics are off unless a MetricsProvider is given in Config; the
// Prometheus provider registers into any prometheus.Registerer.
package workqueue
