package cache

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
)

// LabelIndexName is the name of the index by the value of label key. A
// Lister uses an index of that name, when the Indexer has one, for selectors
// that require key to equal a value (or one of a set).
func LabelIndexName(key string) string { return "label:" + key }

// LabelIndexFunc indexes objects by the value of label key; objects without
// the label are not indexed.
func LabelIndexFunc[T Object](key string) IndexFunc[T] {
	return func(obj T) ([]string, error) {
		if v, ok := obj.GetLabels()[key]; ok {
			return []string{v}, nil
		}
		return nil, nil
	}
}

// Lister reads an informer's cache by label selector, namespace and name.
// The objects it returns are the cached ones, not copies: never mutate them.
type Lister[T Object] struct {
	indexer  Indexer[T]
	store    *threadSafeStore[T] // indexer, when it is ours: read without copying
	resource schema.GroupResource
}

// NewLister returns a Lister over indexer. resource names the resource in
// NotFound errors.
func NewLister[T Object](indexer Indexer[T], resource schema.GroupResource) Lister[T] {
	l := Lister[T]{indexer: indexer, resource: resource}
	l.store, _ = indexer.(*threadSafeStore[T])
	return l
}

// Lister returns a Lister over the informer's cache.
func (s *SharedIndexInformer[T]) Lister(resource schema.GroupResource) Lister[T] {
	return NewLister[T](s.indexer, resource)
}

// List returns every cached object that selector matches (every one for a
// nil selector).
func (l Lister[T]) List(selector labels.Selector) ([]T, error) {
	return l.list("", false, selector)
}

// Get returns the cluster-scoped object called name, or a NotFound error.
func (l Lister[T]) Get(name string) (T, error) {
	return l.get(name, name)
}

// Namespace returns a Lister of the objects of namespace ns.
func (l Lister[T]) Namespace(ns string) NamespaceLister[T] {
	return NamespaceLister[T]{l: l, ns: ns}
}

// NamespaceLister reads the objects of one namespace.
type NamespaceLister[T Object] struct {
	l  Lister[T]
	ns string
}

// List returns the namespace's cached objects that selector matches (every
// one for a nil selector).
func (n NamespaceLister[T]) List(selector labels.Selector) ([]T, error) {
	return n.l.list(n.ns, true, selector)
}

// Get returns the namespace's object called name, or a NotFound error.
func (n NamespaceLister[T]) Get(name string) (T, error) {
	return n.l.get(n.ns+"/"+name, name)
}

func (l Lister[T]) get(key, name string) (T, error) {
	obj, ok, err := l.indexer.GetByKey(key)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("cache: get %q: %w", key, err)
	}
	if !ok {
		var zero T
		return zero, apierrors.NewNotFound(l.resource, name)
	}
	return obj, nil
}

// indexedRequirement finds a requirement of selector that a label index
// answers: key = v, key == v or key in (v...). It returns the index name and
// the values.
func (l Lister[T]) indexedRequirement(selector labels.Selector, has func(string) bool) (string, []string, bool) {
	reqs, selectable := selector.Requirements()
	if !selectable {
		return "", nil, false
	}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		name := LabelIndexName(r.Key())
		if has(name) {
			return name, r.ValuesUnsorted(), true
		}
	}
	return "", nil, false
}

func (l Lister[T]) list(ns string, inNS bool, selector labels.Selector) ([]T, error) {
	if selector == nil {
		selector = labels.Everything()
	}
	everything := selector.Empty()
	if l.store != nil {
		return l.store.list(ns, inNS, selector, everything, l), nil
	}
	// A foreign Indexer: through its interface.
	var candidates []T
	indexers := l.indexer.GetIndexers()
	name, vals, ok := "", []string(nil), false
	if !everything {
		name, vals, ok = l.indexedRequirement(selector, func(n string) bool { _, ok := indexers[n]; return ok })
	}
	switch {
	case ok:
		for _, v := range vals {
			objs, err := l.indexer.ByIndex(name, v)
			if err != nil {
				return nil, err
			}
			candidates = append(candidates, objs...)
		}
	case inNS:
		objs, err := l.indexer.ByIndex(NamespaceIndex, ns)
		if err != nil {
			return nil, err
		}
		candidates = objs
	default:
		candidates = l.indexer.List()
	}
	out := candidates[:0]
	for _, obj := range candidates {
		if inNS && obj.GetNamespace() != ns {
			continue
		}
		if everything || selector.Matches(labels.Set(obj.GetLabels())) {
			out = append(out, obj)
		}
	}
	return out, nil
}

// list is the Lister's path for the package's own store: it filters under
// the read lock, so the only allocation is the result.
func (s *threadSafeStore[T]) list(ns string, inNS bool, selector labels.Selector, everything bool, l Lister[T]) []T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []T
	match := func(obj T) {
		if inNS && obj.GetNamespace() != ns {
			return
		}
		if everything || selector.Matches(labels.Set(obj.GetLabels())) {
			out = append(out, obj)
		}
	}
	if !everything {
		name, vals, ok := l.indexedRequirement(selector, func(n string) bool { _, ok := s.lookup(n); return ok })
		if ok {
			ix, _ := s.lookup(name)
			for _, v := range vals {
				s.keysUnder(ix, v, func(k string) { match(s.items[k].obj) })
			}
			return out
		}
	}
	if inNS && s.nsIndex {
		out = make([]T, 0, s.countUnder(nil, ns))
		s.keysUnder(nil, ns, func(k string) { match(s.items[k].obj) })
		return out
	}
	out = make([]T, 0, len(s.items))
	for _, e := range s.items {
		match(e.obj)
	}
	return out
}
