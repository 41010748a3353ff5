package cachetest

import (
	"fmt"
	"slices"
	"sync"

	"github.com/listwatch/listwatch/cache"
)

// Informer is a fake cache.Informer for unit tests of controllers: no
// Reflector, no source and no goroutine. The test fills its cache with
// Add, Update and Delete, each of which tells every registered handler at
// once, in the caller's goroutine, so that a test sees the handlers' work
// (keys queued, expectations observed) as soon as the call returns.
//
// Drive it from one goroutine at a time: handlers are called outside its
// lock, in the order of the calls.
type Informer[T cache.Object] struct {
	mu       sync.Mutex
	indexer  cache.Indexer[T]
	handlers []*fakeRegistration[T]
	unsynced bool
}

var _ cache.Informer[cache.Object] = (*Informer[cache.Object])(nil)

// NewInformer returns a synced fake informer whose cache holds objs.
func NewInformer[T cache.Object](objs ...T) *Informer[T] {
	f := &Informer[T]{indexer: cache.NewIndexer(objectKey[T], cache.Indexers[T]{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc[T]})}
	for _, o := range objs {
		// objectKey fails only for an object without a name; a test that
		// passes one finds it missing from the cache.
		_ = f.indexer.Add(o)
	}
	return f
}

func objectKey[T cache.Object](obj T) (string, error) { return cache.MetaNamespaceKeyFunc(obj) }

// SetSynced sets what HasSynced reports (true from NewInformer).
func (f *Informer[T]) SetSynced(synced bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unsynced = !synced
}

// HasSynced reports what SetSynced last set, true at first.
func (f *Informer[T]) HasSynced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.unsynced
}

// GetIndexer returns the fake's cache.
func (f *Informer[T]) GetIndexer() cache.Indexer[T] { return f.indexer }

// AddEventHandler registers h and, before returning, tells it of every
// cached object as an add in the initial list.
func (f *Informer[T]) AddEventHandler(h cache.ResourceEventHandler[T]) (cache.ResourceEventHandlerRegistration, error) {
	if h == nil {
		return nil, fmt.Errorf("cachetest: AddEventHandler: nil handler")
	}
	r := &fakeRegistration[T]{informer: f, handler: h}
	f.mu.Lock()
	f.handlers = append(f.handlers, r)
	f.mu.Unlock()
	for _, o := range f.indexer.List() {
		h.OnAdd(o, true)
	}
	return r, nil
}

// RemoveEventHandler unregisters the handler of reg.
func (f *Informer[T]) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.handlers, func(r *fakeRegistration[T]) bool { return r == reg })
	if i < 0 {
		return cache.ErrUnknownRegistration
	}
	f.handlers = slices.Delete(f.handlers, i, i+1)
	return nil
}

// Handlers returns how many handlers are registered.
func (f *Informer[T]) Handlers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.handlers)
}

// Add caches obj, or replaces the cached object of its key, and tells the
// handlers: an update from the cached object when there was one, an add
// otherwise.
func (f *Informer[T]) Add(obj T) error {
	old, existed, err := f.indexer.Get(obj)
	if err != nil {
		return err
	}
	if err := f.indexer.Update(obj); err != nil {
		return err
	}
	for _, h := range f.registered() {
		if existed {
			h.OnUpdate(old, obj)
		} else {
			h.OnAdd(obj, false)
		}
	}
	return nil
}

// Update is Add: it tells the handlers of an update when obj's key is
// cached.
func (f *Informer[T]) Update(obj T) error { return f.Add(obj) }

// Delete removes obj's key from the cache and tells the handlers, with
// the cached object (obj when none is cached). finalStateUnknown is passed
// on as a relist would.
func (f *Informer[T]) Delete(obj T, finalStateUnknown bool) error {
	old, existed, err := f.indexer.Get(obj)
	if err != nil {
		return err
	}
	if existed {
		obj = old
	}
	if err := f.indexer.Delete(obj); err != nil {
		return err
	}
	for _, h := range f.registered() {
		h.OnDelete(obj, finalStateUnknown)
	}
	return nil
}

func (f *Informer[T]) registered() []cache.ResourceEventHandler[T] {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]cache.ResourceEventHandler[T], len(f.handlers))
	for i, r := range f.handlers {
		out[i] = r.handler
	}
	return out
}

// fakeRegistration is a handler's registration with an Informer.
type fakeRegistration[T cache.Object] struct {
	informer *Informer[T]
	handler  cache.ResourceEventHandler[T]
}

// HasSynced is the informer's: the replay is over when AddEventHandler
// returns.
func (r *fakeRegistration[T]) HasSynced() bool { return r.informer.HasSynced() }
