package cache

import (
	"fmt"
	"slices"
	"sync"
)

// index maps an index value to the set of keys filed under it. A value
// whose set becomes empty is removed, so an index does not grow with history.
type index map[string]map[string]struct{}

// userIndex is one index the user asked for.
type userIndex[T Object] struct {
	name string
	fn   IndexFunc[T]
	idx  index
}

// threadSafeStore is the Store and Indexer implementation: a map from key to
// object plus the indices, under one lock. It holds no I/O and calls nothing
// that could block, so every method is short.
type threadSafeStore[T Object] struct {
	mu      sync.RWMutex
	keyFunc KeyFunc[T]
	items   map[string]T
	// nsIndex says the built-in namespace index ns is kept. It is apart from
	// the user's indices because it is on the path of every Add and Update
	// and its single value needs no slice, so it costs no allocation.
	nsIndex bool
	ns      index
	// user holds the user's indices in a slice, not a map, so that put can
	// pair each with the values it computed for it.
	user []userIndex[T]
}

// NewStore returns a Store keyed by keyFunc (MetaNamespaceKeyFunc when nil).
func NewStore[T Object](keyFunc KeyFunc[T]) Store[T] {
	return newThreadSafeStore(keyFunc, nil, false)
}

// NewIndexer returns an Indexer keyed by keyFunc (MetaNamespaceKeyFunc when
// nil) with the given indexers. The namespace index (NamespaceIndex) is always
// present; an entry for it in indexers is ignored.
func NewIndexer[T Object](keyFunc KeyFunc[T], indexers Indexers[T]) Indexer[T] {
	return newThreadSafeStore(keyFunc, indexers, true)
}

func newThreadSafeStore[T Object](keyFunc KeyFunc[T], indexers Indexers[T], nsIndex bool) *threadSafeStore[T] {
	if keyFunc == nil {
		keyFunc = metaKey[T]
	}
	s := &threadSafeStore[T]{keyFunc: keyFunc, items: map[string]T{}, nsIndex: nsIndex}
	if nsIndex {
		s.ns = index{}
	}
	for name, fn := range indexers {
		if (nsIndex && name == NamespaceIndex) || fn == nil {
			continue
		}
		s.user = append(s.user, userIndex[T]{name: name, fn: fn, idx: index{}})
	}
	return s
}

// lookup finds index name. fn is nil for the namespace index.
func (s *threadSafeStore[T]) lookup(name string) (idx index, fn IndexFunc[T], ok bool) {
	if s.nsIndex && name == NamespaceIndex {
		return s.ns, nil, true
	}
	for _, ix := range s.user {
		if ix.name == name {
			return ix.idx, ix.fn, true
		}
	}
	return nil, nil, false
}

func (s *threadSafeStore[T]) key(obj T) (string, error) {
	if isNil(obj) {
		return "", fmt.Errorf("cache: nil object: %w", ErrNoName)
	}
	return s.keyFunc(obj)
}

// Add implements Store.
func (s *threadSafeStore[T]) Add(obj T) error {
	key, err := s.key(obj)
	if err != nil {
		return err
	}
	_, _, err = s.put(key, obj)
	return err
}

// Update implements Store.
func (s *threadSafeStore[T]) Update(obj T) error { return s.Add(obj) }

// Delete implements Store.
func (s *threadSafeStore[T]) Delete(obj T) error {
	key, err := s.key(obj)
	if err != nil {
		return err
	}
	s.deleteKey(key)
	return nil
}

// put stores obj under key, which the caller has already computed (the
// informer's hot path knows the key from the DeltaFIFO and must not pay for
// it twice), and returns the object it replaced, if any.
func (s *threadSafeStore[T]) put(key string, obj T) (old T, had bool, err error) {
	if isNil(obj) {
		return old, false, fmt.Errorf("cache: nil object for key %q: %w", key, ErrNoName)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Compute every new index value before changing anything, so a failing
	// IndexFunc leaves the store as it was. Each IndexFunc runs once on obj.
	var newVals [][]string
	if len(s.user) > 0 {
		newVals = make([][]string, len(s.user))
		for i, ix := range s.user {
			vals, err := ix.fn(obj)
			if err != nil {
				return old, false, fmt.Errorf("cache: indexing %q: index %q: %w", key, ix.name, err)
			}
			newVals[i] = vals
		}
	}
	old, had = s.items[key]
	s.items[key] = obj
	if s.nsIndex {
		ns := obj.GetNamespace()
		if !had {
			s.addEntry(s.ns, ns, key)
		} else if oldNS := old.GetNamespace(); oldNS != ns {
			s.removeEntry(s.ns, oldNS, key)
			s.addEntry(s.ns, ns, key)
		}
	}
	for i, ix := range s.user {
		var oldVals []string
		if had {
			// old was indexed when stored, so fn succeeded on it then; an
			// IndexFunc that is not deterministic cannot be unindexed.
			oldVals, _ = ix.fn(old)
		}
		for _, v := range oldVals {
			if !slices.Contains(newVals[i], v) {
				s.removeEntry(ix.idx, v, key)
			}
		}
		for _, v := range newVals[i] {
			if !slices.Contains(oldVals, v) {
				s.addEntry(ix.idx, v, key)
			}
		}
	}
	return old, had, nil
}

// deleteKey removes key and its index entries.
func (s *threadSafeStore[T]) deleteKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.items[key]
	if !had {
		return
	}
	delete(s.items, key)
	if s.nsIndex {
		s.removeEntry(s.ns, old.GetNamespace(), key)
	}
	for _, ix := range s.user {
		vals, _ := ix.fn(old)
		for _, v := range vals {
			s.removeEntry(ix.idx, v, key)
		}
	}
}

func (s *threadSafeStore[T]) addEntry(idx index, value, key string) {
	set := idx[value]
	if set == nil {
		set = map[string]struct{}{}
		idx[value] = set
	}
	set[key] = struct{}{}
}

func (s *threadSafeStore[T]) removeEntry(idx index, value, key string) {
	set := idx[value]
	if set == nil {
		return
	}
	delete(set, key)
	if len(set) == 0 {
		delete(idx, value)
	}
}

// List implements Store.
func (s *threadSafeStore[T]) List() []T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]T, 0, len(s.items))
	for _, obj := range s.items {
		out = append(out, obj)
	}
	return out
}

// ListKeys implements Store.
func (s *threadSafeStore[T]) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.items))
	for key := range s.items {
		out = append(out, key)
	}
	return out
}

// Get implements Store.
func (s *threadSafeStore[T]) Get(obj T) (T, bool, error) {
	key, err := s.key(obj)
	if err != nil {
		var zero T
		return zero, false, err
	}
	return s.GetByKey(key)
}

// GetByKey implements Store.
func (s *threadSafeStore[T]) GetByKey(key string) (T, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	obj, ok := s.items[key]
	return obj, ok, nil
}

// Replace implements Store. An object that cannot be keyed or indexed fails
// the whole call and leaves the store unchanged.
func (s *threadSafeStore[T]) Replace(list []T, _ string) error {
	items := make(map[string]T, len(list))
	for _, obj := range list {
		key, err := s.key(obj)
		if err != nil {
			return err
		}
		items[key] = obj
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ns index
	if s.nsIndex {
		ns = index{}
		for key, obj := range items {
			s.addEntry(ns, obj.GetNamespace(), key)
		}
	}
	user := make([]userIndex[T], len(s.user))
	for i, ix := range s.user {
		idx, err := buildIndex(ix.name, ix.fn, items)
		if err != nil {
			return err
		}
		user[i] = userIndex[T]{name: ix.name, fn: ix.fn, idx: idx}
	}
	s.items, s.ns, s.user = items, ns, user
	return nil
}

// buildIndex files every item under the values fn computes for it.
func buildIndex[T Object](name string, fn IndexFunc[T], items map[string]T) (index, error) {
	idx := index{}
	for key, obj := range items {
		vals, err := fn(obj)
		if err != nil {
			return nil, fmt.Errorf("cache: indexing %q: index %q: %w", key, name, err)
		}
		for _, v := range vals {
			set := idx[v]
			if set == nil {
				set = map[string]struct{}{}
				idx[v] = set
			}
			set[key] = struct{}{}
		}
	}
	return idx, nil
}

// Resync implements Store; a plain store has nothing to resync.
func (s *threadSafeStore[T]) Resync() error { return nil }

// Index implements Indexer.
func (s *threadSafeStore[T]) Index(indexName string, obj T) ([]T, error) {
	if isNil(obj) {
		return nil, fmt.Errorf("cache: Index of nil object: %w", ErrNoName)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, fn, ok := s.lookup(indexName)
	if !ok {
		return nil, fmt.Errorf("cache: index %q does not exist", indexName)
	}
	if fn == nil {
		return s.objects(idx[obj.GetNamespace()]), nil
	}
	vals, err := fn(obj)
	if err != nil {
		return nil, fmt.Errorf("cache: index %q: %w", indexName, err)
	}
	if len(vals) == 1 {
		return s.objects(idx[vals[0]]), nil
	}
	// Several values may file the same key: collect keys once.
	keys := map[string]struct{}{}
	for _, v := range vals {
		for k := range idx[v] {
			keys[k] = struct{}{}
		}
	}
	return s.objects(keys), nil
}

func (s *threadSafeStore[T]) objects(keys map[string]struct{}) []T {
	out := make([]T, 0, len(keys))
	for k := range keys {
		out = append(out, s.items[k])
	}
	return out
}

// ByIndex implements Indexer.
func (s *threadSafeStore[T]) ByIndex(indexName, value string) ([]T, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, _, ok := s.lookup(indexName)
	if !ok {
		return nil, fmt.Errorf("cache: index %q does not exist", indexName)
	}
	return s.objects(idx[value]), nil
}

// IndexKeys implements Indexer.
func (s *threadSafeStore[T]) IndexKeys(indexName, value string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, _, ok := s.lookup(indexName)
	if !ok {
		return nil, fmt.Errorf("cache: index %q does not exist", indexName)
	}
	set := idx[value]
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	return out, nil
}

// ListIndexFuncValues implements Indexer.
func (s *threadSafeStore[T]) ListIndexFuncValues(indexName string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, _, _ := s.lookup(indexName)
	out := make([]string, 0, len(idx))
	for v := range idx {
		out = append(out, v)
	}
	return out
}

// GetIndexers implements Indexer.
func (s *threadSafeStore[T]) GetIndexers() Indexers[T] {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(Indexers[T], len(s.user)+1)
	for _, ix := range s.user {
		out[ix.name] = ix.fn
	}
	if s.nsIndex {
		out[NamespaceIndex] = MetaNamespaceIndexFunc[T]
	}
	return out
}

// AddIndexers implements Indexer. The new indices are built from the objects
// already stored, so it may be called after the store has been filled; if an
// IndexFunc fails on a stored object, no index is added.
func (s *threadSafeStore[T]) AddIndexers(newIndexers Indexers[T]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	added := make([]userIndex[T], 0, len(newIndexers))
	for name, fn := range newIndexers {
		if _, _, exists := s.lookup(name); exists {
			return fmt.Errorf("cache: index %q already exists", name)
		}
		if fn == nil {
			return fmt.Errorf("cache: index %q has no IndexFunc", name)
		}
		idx, err := buildIndex(name, fn, s.items)
		if err != nil {
			return err
		}
		added = append(added, userIndex[T]{name: name, fn: fn, idx: idx})
	}
	s.user = append(s.user, added...)
	return nil
}
