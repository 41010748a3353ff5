// Package workqueue holds the queues that sit between informer event
// handlers and controller workers.
//
// Queue deduplicates items and guarantees that no item is handed to two
// workers at once; DelayingQueue adds AddAfter; RateLimitingQueue adds
// AddRateLimited, Forget and NumRequeues on top of a RateLimiter. All of them
// are generic over the item type, so workers never type-assert.
//
// Every queue also takes priorities: AddWithPriority makes it a priority
// queue, in which an informer's initial list and resyncs (PriorityLow) go
// after live changes (PriorityNormal, the priority of Add), and aging
// bounds how long any item waits, however much higher-priority work keeps
// coming: an item of priority p added at t goes before every item added
// after t + (MaxPriority − p) × Config.AgingStep.
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
