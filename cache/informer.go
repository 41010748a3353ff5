package cache

import "time"

// ResourceEventHandler is told about changes to the objects of an informer.
// Its methods are called one at a time, for a given object in the order the
// changes happened. The objects are shared with the cache: never mutate them.
type ResourceEventHandler[T Object] interface {
	// OnAdd is called for an object new to the cache. isInInitialList is
	// true for the objects of the first list.
	OnAdd(obj T, isInInitialList bool)
	// OnUpdate is called for a change to a cached object, and on resync
	// (then oldObj and newObj are the same object).
	OnUpdate(oldObj, newObj T)
	// OnDelete is called when an object leaves the cache. When
	// finalStateUnknown is true the deletion was not seen, only inferred from
	// a relist, and obj is the last state the cache knew.
	OnDelete(obj T, finalStateUnknown bool)
}

// ResourceEventHandlerFuncs adapts functions to ResourceEventHandler; a nil
// function ignores its notification.
type ResourceEventHandlerFuncs[T Object] struct {
	AddFunc    func(obj T, isInInitialList bool)
	UpdateFunc func(oldObj, newObj T)
	DeleteFunc func(obj T, finalStateUnknown bool)
}

// OnAdd calls AddFunc if set.
func (f ResourceEventHandlerFuncs[T]) OnAdd(obj T, isInInitialList bool) {
	if f.AddFunc != nil {
		f.AddFunc(obj, isInInitialList)
	}
}

// OnUpdate calls UpdateFunc if set.
func (f ResourceEventHandlerFuncs[T]) OnUpdate(oldObj, newObj T) {
	if f.UpdateFunc != nil {
		f.UpdateFunc(oldObj, newObj)
	}
}

// OnDelete calls DeleteFunc if set.
func (f ResourceEventHandlerFuncs[T]) OnDelete(obj T, finalStateUnknown bool) {
	if f.DeleteFunc != nil {
		f.DeleteFunc(obj, finalStateUnknown)
	}
}

// InformerOptions configure NewInformer and NewIndexerInformer; the options
// that name the object type (WithIndexers, WithKeyFunc, WithTransform)
// follow them as arguments. The zero value works.
type InformerOptions struct {
	// ResyncPeriod, when positive, replays every cached object to the
	// handler as an update that often.
	ResyncPeriod time.Duration
	// Reflector holds the Reflector's options (name, watch-error handler,
	// streaming list, paging, backoff, logger).
	Reflector ReflectorOptions
}

// NewInformer returns a Store kept in step with lw and a Controller that
// does it and tells handler about every change. Run the Controller; read the
// Store once the Controller HasSynced.
func NewInformer[T Object](lw ListerWatcher[T], handler ResourceEventHandler[T], opts InformerOptions, typed ...Option[T]) (Store[T], *Controller[T]) {
	t := applyOptions(typed)
	t.indexers = nil // a Store has no indices
	store, c := newInformer(lw, handler, opts, t, false)
	return store, c
}

// NewIndexerInformer is NewInformer with an Indexer for a cache: the
// namespace index and those of WithIndexers.
func NewIndexerInformer[T Object](lw ListerWatcher[T], handler ResourceEventHandler[T], opts InformerOptions, typed ...Option[T]) (Indexer[T], *Controller[T]) {
	return newInformer(lw, handler, opts, applyOptions(typed), true)
}

func newInformer[T Object](lw ListerWatcher[T], handler ResourceEventHandler[T], opts InformerOptions, t typedOptions[T], nsIndex bool) (*threadSafeStore[T], *Controller[T]) {
	store := newThreadSafeStore(t.keyFunc, t.indexers, nsIndex)
	fifo := NewDeltaFIFO(DeltaFIFOOptions[T]{
		KeyFunc:      t.keyFunc,
		KnownObjects: store,
		Transform:    t.transform,
		InOrder:      true,
	})
	if handler == nil {
		handler = ResourceEventHandlerFuncs[T]{}
	}
	c := NewController(Config[T]{
		Queue:            fifo,
		ListerWatcher:    lw,
		FullResyncPeriod: opts.ResyncPeriod,
		Reflector:        opts.Reflector,
		Process: func(key string, deltas Deltas[T], isInInitialList bool) error {
			return processDeltas(handler, store, key, deltas, isInInitialList)
		},
	})
	return store, c
}

// processDeltas applies one key's deltas to the cache and tells the handler,
// each delta in turn: Sync, Replaced, Added and Updated become an update when
// the key is cached and an add when not; Deleted becomes a delete.
func processDeltas[T Object](handler ResourceEventHandler[T], store *threadSafeStore[T], key string, deltas Deltas[T], isInInitialList bool) error {
	for _, d := range deltas {
		switch d.Type {
		case Sync, Replaced, Added, Updated:
			old, exists, err := store.put(key, d.Object)
			if err != nil {
				return err
			}
			if exists {
				handler.OnUpdate(old, d.Object)
			} else {
				handler.OnAdd(d.Object, isInInitialList)
			}
		case Deleted:
			store.deleteKey(key)
			handler.OnDelete(d.Object, d.FinalStateUnknown)
		}
	}
	return nil
}
