package cache

// Option is one of an informer's options that names its object type: an
// index, a key function, a transform, a handler-panic hook. They follow the
// untyped options (InformerOptions, SharedInformerOptions) as arguments,
// so the object type is inferred from them and never spelled out for
// options that have nothing typed in them:
//
//	inf := cache.NewSharedIndexInformer(lw, cache.SharedInformerOptions{ResyncPeriod: time.Minute},
//		cache.WithIndexers(cache.Indexers[*corev1.Pod]{"node": byNode}),
//		cache.WithTransform(stripManagedFields))
type Option[T Object] func(*typedOptions[T])

// typedOptions are the Options given, applied in order.
type typedOptions[T Object] struct {
	indexers       Indexers[T]
	keyFunc        KeyFunc[T]
	transform      TransformFunc[T]
	onHandlerPanic func(recovered any, n Notification[T])
}

func applyOptions[T Object](opts []Option[T]) typedOptions[T] {
	var t typedOptions[T]
	for _, o := range opts {
		if o != nil {
			o(&t)
		}
	}
	return t
}

// WithIndexers adds indexers to the informer's Indexer (NewInformer, whose
// cache is a plain Store, has none); the namespace index is always there.
// Several WithIndexers add up; a later one replaces an index of the same
// name.
func WithIndexers[T Object](indexers Indexers[T]) Option[T] {
	return func(t *typedOptions[T]) {
		if t.indexers == nil {
			t.indexers = Indexers[T]{}
		}
		for name, f := range indexers {
			t.indexers[name] = f
		}
	}
}

// WithKeyFunc keys the informer's objects with f instead of
// MetaNamespaceKeyFunc.
func WithKeyFunc[T Object](f KeyFunc[T]) Option[T] {
	return func(t *typedOptions[T]) { t.keyFunc = f }
}

// WithTransform rewrites each object with f before it is cached (to drop
// what no handler reads, such as managed fields). A SharedIndexInformer's
// transform can also be set with SetTransform before Run.
func WithTransform[T Object](f TransformFunc[T]) Option[T] {
	return func(t *typedOptions[T]) { t.transform = f }
}

// OnHandlerPanic tells f of each panic a SharedIndexInformer's handler
// raised, after it was recovered and logged. f runs on the handler's
// goroutine.
func OnHandlerPanic[T Object](f func(recovered any, n Notification[T])) Option[T] {
	return func(t *typedOptions[T]) { t.onHandlerPanic = f }
}
