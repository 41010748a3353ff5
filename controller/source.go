package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/workqueue"
)

// Source feeds a controller's workqueue from an informer's events. For,
// Owns, Watches and Handle make the usual ones; WaitFor only holds the
// workers back until caches fed by other means have synced.
type Source[K comparable] interface {
	// Register adds the source's event handlers, which queue keys on
	// c.Queue(). It returns the HasSynced that c's workers wait for, and
	// a func that removes the handlers (nil when there is nothing to
	// remove). Run calls it once, before the workers start.
	Register(c *Controller[K]) (hasSynced func() bool, remove func(), err error)
}

// sourceFunc adapts a function to Source.
type sourceFunc[K comparable] func(c *Controller[K]) (func() bool, func(), error)

func (f sourceFunc[K]) Register(c *Controller[K]) (func() bool, func(), error) { return f(c) }

// Handle is the source that registers handler on inf as it is: for
// handlers that do more than map an object to keys (count expectations,
// filter updates, delay keys), and that queue keys themselves through the
// controller's Queue. K, the controller's key type, is not inferred:
// Handle[string](pods, handler).
func Handle[K comparable, T cache.Object](inf cache.Informer[T], handler cache.ResourceEventHandler[T]) Source[K] {
	return sourceFunc[K](func(c *Controller[K]) (func() bool, func(), error) {
		if s, ok := inf.(versionedStore); ok && c.fresh != nil {
			c.fresh.addStore(s)
		}
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			return nil, nil, err
		}
		return reg.HasSynced, func() { _ = inf.RemoveEventHandler(reg) }, nil
	})
}

// Watches is the source that queues the keys toKeys maps each object of
// inf to, on every add, update and delete; an update queues the keys of
// the old object too (it may have left a selector or changed owner), except
// on a resync, where old and new are the same. With Options.PriorityQueue,
// the keys of the initial list's adds and of resyncs go at
// workqueue.PriorityLow.
func Watches[T cache.Object, K comparable](inf cache.Informer[T], toKeys func(obj T) []K) Source[K] {
	return sourceFunc[K](func(c *Controller[K]) (func() bool, func(), error) {
		enqueue := func(obj T, backlog bool) {
			for _, k := range toKeys(obj) {
				if backlog && c.opts.PriorityQueue {
					c.Queue().AddWithPriority(k, workqueue.PriorityLow)
				} else {
					c.Queue().Add(k)
				}
			}
		}
		return Handle[K](inf, cache.ResourceEventHandlerFuncs[T]{
			AddFunc: func(obj T, isInInitialList bool) { enqueue(obj, isInInitialList) },
			UpdateFunc: func(old, cur T) {
				resync := old.GetResourceVersion() == cur.GetResourceVersion()
				if !resync {
					enqueue(old, false)
				}
				enqueue(cur, resync)
			},
			DeleteFunc: func(obj T, _ bool) { enqueue(obj, false) },
		}).Register(c)
	})
}

// For is the source of the controller's own objects: every add, update
// and delete of an object of inf queues its key, "namespace/name" (or
// "name" for a cluster-scoped object), which cache.SplitMetaNamespaceKey
// splits and the informer's indexer finds with GetByKey.
func For[T cache.Object](inf cache.Informer[T]) Source[string] {
	return Watches(inf, func(obj T) []string {
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return nil
		}
		return []string{key}
	})
}

// Owns is the source of the objects the controller's own objects create:
// every add, update and delete of an object of inf whose controller
// ownerReference names an owner of kind owner (group and kind compared,
// not version) queues that owner's key, in the object's namespace.
// Objects without such an owner are ignored.
func Owns[T cache.Object](inf cache.Informer[T], owner schema.GroupVersionKind) Source[string] {
	return Watches(inf, func(obj T) []string {
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil || ref.Kind != owner.Kind {
			return nil
		}
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != owner.Group {
			return nil
		}
		if ns := obj.GetNamespace(); ns != "" {
			return []string{ns + "/" + ref.Name}
		}
		return []string{ref.Name}
	})
}

// WaitFor is the source of no events: the workers wait for every hasSynced
// before they start. It serves controllers whose handlers are registered
// by other means, such as the garbage collector's on informers made at run
// time.
func WaitFor[K comparable](hasSynced ...func() bool) Source[K] {
	return sourceFunc[K](func(*Controller[K]) (func() bool, func(), error) {
		return func() bool {
			for _, f := range hasSynced {
				if !f() {
					return false
				}
			}
			return true
		}, nil, nil
	})
}
