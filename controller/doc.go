// Package controller holds what every controller shares: the worker loop
// that drains a workqueue into a sync function, expectations that keep a
// controller from acting on a stale cache, slow-start batches, pod creation
// and deletion over a REST client, adoption and release of pods through
// controller owner references, and the order in which surplus pods are
// deleted.
//
// It depends on no informer code: caches are awaited through HasSynced
// functions.
package controller
