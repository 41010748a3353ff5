// Package controller is how a controller is written with listwatch, and
// holds what controllers share.
//
// # Writing a controller
//
// A controller is the pattern client-go's controllers follow and seed 002
// teaches: informer event handlers (AddEventHandler) put the keys of
// objects that changed on a rate-limited workqueue, and workers take one
// key at a time (processNextWorkItem) and hand it to a sync handler
// (syncHandler) that reads the informers' caches and brings the world in
// line. New wires those parts; nothing is hidden behind them:
//
//	replicaSets := informers.For[*appsv1.ReplicaSet](factory)
//	pods := informers.For[*corev1.Pod](factory)
//	c, err := controller.New("replicasets", syncHandler, controller.Options{Workers: 2},
//		controller.For(replicaSets),   // a ReplicaSet changed: queue its key
//		controller.Owns(pods, rsKind)) // a pod it controls changed: queue the owner's key
//	factory.Start(ctx)
//	err = c.Run(ctx) // until ctx ends; then drains the queue and returns
//
// The sync handler gets a key, "namespace/name", reads the object from the
// cache (gone: it was deleted), and returns a Result and an error: an error
// retries the key with per-key exponential backoff, a Terminal error does
// not, and Result.RequeueAfter looks at the key again later, for what no
// event will announce. Sources are For (the controller's own objects), Owns
// (objects they control, through the controller ownerReference), Watches
// (any mapping from an object to keys) and Handle (an event handler of
// your own, for expectations or filters, that queues keys through
// Controller.Queue). With Options.PriorityQueue, the keys For, Owns and
// Watches take from an informer's initial list and resyncs wait behind
// live changes, for at most the workqueue's aging bound, so that a
// restarted controller answers new changes before it works through its
// backlog.
//
// Controllers take informers as cache.Informer[T], which the factory's
// informers implement; tests pass cachetest.Informer fakes and need no API
// server (see Example). Every controller has one lifecycle: New, which
// starts nothing, then Run(ctx), which returns when ctx ends and leaves no
// goroutine behind.
//
// # What controllers share
//
// Expectations keep a controller from acting on a stale cache, slow-start
// batches bound a burst of creations, pod control creates and deletes pods
// over a REST client, the controller-ref manager adopts and releases pods
// through controller owner references, and the ranking orders surplus pods
// for deletion.
package controller
