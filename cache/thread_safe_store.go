package cache

import (
	"fmt"
	"slices"
	"sync"
)

// index maps an index value to the set of keys filed under it. A value
// whose set becomes empty is removed, so an index does not grow with history.
type index map[string]map[string]struct{}

// entry is a stored object and the position of its key in its namespace's
// key list, which lets the namespace index remove a key without a search.
type entry[T Object] struct {
	obj   T
	nsPos int32
}

// namespaceIndex files keys by namespace in slices rather than sets: every
// Add of a new object appends to one, which costs no hashing and, once the
// slice has grown, no allocation. Removal swaps the last key into the hole.
type namespaceIndex map[string]*[]string

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
	items   map[string]entry[T]
	// nsIndex says the built-in namespace index ns is kept. It is apart from
	// the user's indices because it is on the path of every Add and Update:
	// its single value per object needs no slice of values and its key lists
	// no hashing.
	nsIndex bool
	ns      namespaceIndex
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
	s := &threadSafeStore[T]{keyFunc: keyFunc, items: map[string]entry[T]{}, nsIndex: nsIndex}
	if nsIndex {
		s.ns = namespaceIndex{}
	}
	for name, fn := range indexers {
		if (nsIndex && name == NamespaceIndex) || fn == nil {
			continue
		}
		s.user = append(s.user, userIndex[T]{name: name, fn: fn, idx: index{}})
	}
	return s
}

// lookup finds index name; ix is nil for the namespace index.
func (s *threadSafeStore[T]) lookup(name string) (ix *userIndex[T], ok bool) {
	if s.nsIndex && name == NamespaceIndex {
		return nil, true
	}
	for i := range s.user {
		if s.user[i].name == name {
			return &s.user[i], true
		}
	}
	return nil, false
}

// keysUnder returns the keys filed under value in index ix (the namespace
// index when nil), calling f on each; it returns their number.
func (s *threadSafeStore[T]) keysUnder(ix *userIndex[T], value string, f func(key string)) int {
	if ix == nil {
		keys := s.ns[value]
		if keys == nil {
			return 0
		}
		for _, k := range *keys {
			f(k)
		}
		return len(*keys)
	}
	set := ix.idx[value]
	for k := range set {
		f(k)
	}
	return len(set)
}

// countUnder returns how many keys are filed under value in ix, as
// keysUnder would visit.
func (s *threadSafeStore[T]) countUnder(ix *userIndex[T], value string) int {
	if ix == nil {
		if keys := s.ns[value]; keys != nil {
			return len(*keys)
		}
		return 0
	}
	return len(ix.idx[value])
}

// nsAdd appends key to namespace ns and returns its position.
func (idx namespaceIndex) add(ns, key string) int32 {
	keys := idx[ns]
	if keys == nil {
		keys = new([]string)
		idx[ns] = keys
	}
	*keys = append(*keys, key)
	return int32(len(*keys) - 1)
}

// remove takes the key at pos out of namespace ns and returns the key moved
// into its place, if any, so the caller can record its new position.
func (idx namespaceIndex) remove(ns string, pos int32) (moved string, ok bool) {
	keys := idx[ns]
	if keys == nil || int(pos) >= len(*keys) {
		return "", false
	}
	last := len(*keys) - 1
	if int(pos) != last {
		moved, ok = (*keys)[last], true
		(*keys)[pos] = moved
	}
	(*keys)[last] = ""
	*keys = (*keys)[:last]
	if last == 0 {
		delete(idx, ns)
	}
	return moved, ok
}

// nsRemove removes the entry at pos of namespace ns and fixes the position
// of the key that took its place.
func (s *threadSafeStore[T]) nsRemove(ns string, pos int32) {
	if moved, ok := s.ns.remove(ns, pos); ok {
		e := s.items[moved]
		e.nsPos = pos
		s.items[moved] = e
	}
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
	e, had := s.items[key]
	old = e.obj
	if s.nsIndex {
		ns := obj.GetNamespace()
		if !had {
			e.nsPos = s.ns.add(ns, key)
		} else if oldNS := old.GetNamespace(); oldNS != ns {
			// Only a key func that ignores the namespace lets it change.
			s.nsRemove(oldNS, e.nsPos)
			e.nsPos = s.ns.add(ns, key)
		}
	}
	e.obj = obj
	s.items[key] = e
	for i, ix := range s.user {
		var oldVals []string
		if had {
			// old was indexed when stored, so fn succeeded on it then; an
			// IndexFunc that is not deterministic cannot be unindexed.
			oldVals, _ = ix.fn(old)
		}
		for _, v := range oldVals {
			if !slices.Contains(newVals[i], v) {
				ix.idx.remove(v, key)
			}
		}
		for _, v := range newVals[i] {
			if !slices.Contains(oldVals, v) {
				ix.idx.add(v, key)
			}
		}
	}
	return old, had, nil
}

// deleteKey removes key and its index entries.
func (s *threadSafeStore[T]) deleteKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, had := s.items[key]
	if !had {
		return
	}
	old := e.obj
	delete(s.items, key)
	if s.nsIndex {
		s.nsRemove(old.GetNamespace(), e.nsPos)
	}
	for _, ix := range s.user {
		vals, _ := ix.fn(old)
		for _, v := range vals {
			ix.idx.remove(v, key)
		}
	}
}

func (idx index) add(value, key string) {
	set := idx[value]
	if set == nil {
		set = map[string]struct{}{}
		idx[value] = set
	}
	set[key] = struct{}{}
}

func (idx index) remove(value, key string) {
	set := idx[value]
	if set == nil {
		return
	}
	delete(set, key)
	if len(set) == 0 {
		delete(idx, value)
	}
}

// reserve sizes an empty store for n objects, sparing the first sync the
// rehashing of every map doubling; a store holding objects is left as is.
func (s *threadSafeStore[T]) reserve(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.items) == 0 && n > 0 {
		s.items = make(map[string]entry[T], n)
	}
}

// List implements Store.
func (s *threadSafeStore[T]) List() []T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]T, 0, len(s.items))
	for _, e := range s.items {
		out = append(out, e.obj)
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
	e, ok := s.items[key]
	return e.obj, ok, nil
}

// Replace implements Store. An object that cannot be keyed or indexed fails
// the whole call and leaves the store unchanged.
func (s *threadSafeStore[T]) Replace(list []T, _ string) error {
	items := make(map[string]entry[T], len(list))
	for _, obj := range list {
		key, err := s.key(obj)
		if err != nil {
			return err
		}
		items[key] = entry[T]{obj: obj}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ns namespaceIndex
	if s.nsIndex {
		ns = namespaceIndex{}
		for key, e := range items {
			e.nsPos = ns.add(e.obj.GetNamespace(), key)
			items[key] = e
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
func buildIndex[T Object](name string, fn IndexFunc[T], items map[string]entry[T]) (index, error) {
	idx := index{}
	for key, e := range items {
		vals, err := fn(e.obj)
		if err != nil {
			return nil, fmt.Errorf("cache: indexing %q: index %q: %w", key, name, err)
		}
		for _, v := range vals {
			idx.add(v, key)
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
	ix, ok := s.lookup(indexName)
	if !ok {
		return nil, fmt.Errorf("cache: index %q does not exist", indexName)
	}
	if ix == nil {
		return s.objects(ix, obj.GetNamespace()), nil
	}
	vals, err := ix.fn(obj)
	if err != nil {
		return nil, fmt.Errorf("cache: index %q: %w", indexName, err)
	}
	if len(vals) == 1 {
		return s.objects(ix, vals[0]), nil
	}
	// Several values may file the same key: collect keys once.
	keys := map[string]struct{}{}
	for _, v := range vals {
		for k := range ix.idx[v] {
			keys[k] = struct{}{}
		}
	}
	out := make([]T, 0, len(keys))
	for k := range keys {
		out = append(out, s.items[k].obj)
	}
	return out, nil
}

// objects returns the objects filed under value in ix.
func (s *threadSafeStore[T]) objects(ix *userIndex[T], value string) []T {
	out := make([]T, 0, s.countUnder(ix, value))
	s.keysUnder(ix, value, func(k string) { out = append(out, s.items[k].obj) })
	return out
}

// ByIndex implements Indexer.
func (s *threadSafeStore[T]) ByIndex(indexName, value string) ([]T, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ix, ok := s.lookup(indexName)
	if !ok {
		return nil, fmt.Errorf("cache: index %q does not exist", indexName)
	}
	return s.objects(ix, value), nil
}

// IndexKeys implements Indexer.
func (s *threadSafeStore[T]) IndexKeys(indexName, value string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ix, ok := s.lookup(indexName)
	if !ok {
		return nil, fmt.Errorf("cache: index %q does not exist", indexName)
	}
	out := make([]string, 0, s.countUnder(ix, value))
	s.keysUnder(ix, value, func(k string) { out = append(out, k) })
	return out, nil
}

// ListIndexFuncValues implements Indexer.
func (s *threadSafeStore[T]) ListIndexFuncValues(indexName string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ix, ok := s.lookup(indexName)
	if !ok {
		return nil
	}
	if ix == nil {
		out := make([]string, 0, len(s.ns))
		for v := range s.ns {
			out = append(out, v)
		}
		return out
	}
	out := make([]string, 0, len(ix.idx))
	for v := range ix.idx {
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
		if _, exists := s.lookup(name); exists {
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
