package cache

// Informer is what a controller needs of an informer: to register the
// event handlers that fill its workqueue (and remove them when it stops,
// since a shared informer outlives its users), to read the cache, and to
// know when the cache holds the first list.
//
// *SharedIndexInformer[T] implements it, and so does the factory's
// informers.Informer[T], which embeds one; cachetest.Informer[T] is a fake
// that tests drive by hand. Controllers take an Informer[T] rather than a
// concrete informer so that they can be tested without an API server.
type Informer[T Object] interface {
	// AddEventHandler registers handler, which is then told of every
	// change, one notification at a time; a handler added after the
	// informer started is first told of every cached object as an add.
	AddEventHandler(handler ResourceEventHandler[T]) (ResourceEventHandlerRegistration, error)
	// RemoveEventHandler unregisters the handler of reg.
	RemoveEventHandler(reg ResourceEventHandlerRegistration) error
	// GetIndexer returns the cache. Its objects are shared: never mutate
	// them.
	GetIndexer() Indexer[T]
	// HasSynced reports whether the cache holds the first list.
	HasSynced() bool
}

// ResourceEventHandlerRegistration is a handler's registration with an
// Informer. *Registration[T] is one.
type ResourceEventHandlerRegistration interface {
	// HasSynced reports whether the informer has synced and the handler
	// has been told of every object of the first list (or of the cache,
	// for a handler added after start): a controller whose workers wait
	// for it sees every object at least once.
	HasSynced() bool
}

var _ Informer[Object] = (*SharedIndexInformer[Object])(nil)
