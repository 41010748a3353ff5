// Package cachetest is an in-memory stand-in for a Kubernetes API server
// resource: a versioned history of objects that implements
// cache.ListerWatcher with the list and watch semantics of a real server
// (resourceVersion matching, paging with snapshot-consistent continue tokens,
// compaction and 410 Expired, selectors, bookmarks, streaming lists), plus
// faults a test can inject.
//
// Source starts no goroutines of its own and uses only the time package for
// its delays and timeouts, so it runs deterministically inside a
// testing/synctest bubble.
package cachetest

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

// Change is one write in a Source's history.
type Change[T cache.Object] struct {
	// Revision is the revision the write produced; every write has its own.
	Revision int64
	// Type is EventAdded, EventModified or EventDeleted.
	Type cache.EventType
	// Key is the object's "namespace/name" (or "name").
	Key string
	// Object is the state after the write. For EventDeleted it is the last
	// state stamped with the deletion's revision, as the DELETED watch event
	// carries it.
	Object T
	// Old is the state before the write; the zero value for EventAdded.
	Old T
}

// entry is a Change plus what watches derive from it, computed once.
type entry[T cache.Object] struct {
	Change[T]
	// left is Old stamped with Revision: what a watcher whose selector the
	// object just left receives as DELETED. Built on first use.
	left    T
	hasLeft bool
}

// Op names the calls that faults apply to.
type Op int

// The operations of a ListerWatcher.
const (
	OpList Op = iota
	OpWatch
	numOps
)

func (o Op) String() string {
	switch o {
	case OpList:
		return "list"
	case OpWatch:
		return "watch"
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Source is an in-memory, versioned set of objects of one resource that
// implements cache.ListerWatcher[T] like an API server would.
//
// Every write bumps a global revision (starting at 1) and stamps it as the
// object's resourceVersion. Objects are copied on the way in, so callers'
// objects are never aliased. Objects handed out by Get, Items, History, List
// and watch events are shared with the Source and every other reader and
// must not be mutated.
//
// All methods are safe for concurrent use.
type Source[T cache.Object] struct {
	cfg config[T]

	mu        sync.Mutex
	rev       int64
	compacted int64
	objects   map[string]T
	log       []*entry[T] // every write, oldest first; Compact does not shrink it
	watchers  map[*watcher[T]]struct{}

	calls      [numOps][]metav1.ListOptions
	failN      [numOps]int
	failErr    [numOps]error
	delay      [numOps]time.Duration
	pageFail   bool
	pageFailK  int
	pageFailEr error
}

var _ cache.ListerWatcher[cache.Object] = (*Source[cache.Object])(nil)

// New returns an empty Source at revision 0.
func New[T cache.Object](opts ...Option[T]) *Source[T] {
	cfg := defaultConfig[T]()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return &Source[T]{
		cfg:      cfg,
		objects:  map[string]T{},
		watchers: map[*watcher[T]]struct{}{},
	}
}

// isNil reports whether obj is nil or a typed nil, on which any method call
// would panic.
func isNil(obj any) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Interface, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

func keyOf(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// copyObj deep-copies obj as a T.
func copyObj[T cache.Object](obj T) (T, error) {
	var zero T
	if isNil(obj) {
		return zero, apierrors.NewBadRequest("cachetest: nil object")
	}
	c, ok := obj.DeepCopyObject().(T)
	if !ok || isNil(c) {
		return zero, apierrors.NewInternalError(fmt.Errorf("cachetest: DeepCopyObject of %T did not return a %T", obj, zero))
	}
	return c, nil
}

// prepare validates obj and returns its key and a private copy.
func (s *Source[T]) prepare(obj T) (string, T, error) {
	c, err := copyObj(obj)
	if err != nil {
		return "", c, err
	}
	if c.GetName() == "" {
		var zero T
		return "", zero, apierrors.NewBadRequest("cachetest: object has no name")
	}
	return keyOf(c.GetNamespace(), c.GetName()), c, nil
}

// Create stores a new object and returns a copy of what was stored. It is an
// AlreadyExists error if the key is taken. Whatever resourceVersion obj
// carries is replaced.
func (s *Source[T]) Create(obj T) (T, error) {
	key, c, err := s.prepare(obj)
	if err != nil {
		return c, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[key]; ok {
		var zero T
		return zero, apierrors.NewAlreadyExists(s.cfg.resource, c.GetName())
	}
	return s.write(cache.EventAdded, key, c)
}

// Update replaces an existing object and returns a copy of what was stored.
// It is a NotFound error if the key is absent, and a Conflict if obj has a
// resourceVersion that is not the stored one (an empty one always matches).
func (s *Source[T]) Update(obj T) (T, error) {
	key, c, err := s.prepare(obj)
	if err != nil {
		return c, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.objects[key]
	var zero T
	if !ok {
		return zero, apierrors.NewNotFound(s.cfg.resource, c.GetName())
	}
	if rv := c.GetResourceVersion(); rv != "" && rv != old.GetResourceVersion() {
		return zero, apierrors.NewConflict(s.cfg.resource, c.GetName(), fmt.Errorf(
			"the object has been modified; please apply your changes to the latest version and try again (have %s, want %s)",
			rv, old.GetResourceVersion()))
	}
	return s.write(cache.EventModified, key, c)
}

// Upsert creates obj, or replaces the stored object whatever its
// resourceVersion, and returns a copy of what was stored.
func (s *Source[T]) Upsert(obj T) (T, error) {
	key, c, err := s.prepare(obj)
	if err != nil {
		return c, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	typ := cache.EventAdded
	if _, ok := s.objects[key]; ok {
		typ = cache.EventModified
	}
	return s.write(typ, key, c)
}

// Delete removes an object and returns its last state stamped with the
// deletion's revision, as the DELETED event carries it. It is a NotFound
// error if the key is absent.
func (s *Source[T]) Delete(namespace, name string) (T, error) {
	key := keyOf(namespace, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.objects[key]
	if !ok {
		var zero T
		return zero, apierrors.NewNotFound(s.cfg.resource, name)
	}
	c, err := copyObj(old)
	if err != nil {
		return c, err
	}
	return s.write(cache.EventDeleted, key, c)
}

// write records one change: obj is a private copy that becomes immutable
// here. s.mu is held.
func (s *Source[T]) write(typ cache.EventType, key string, obj T) (T, error) {
	s.rev++
	obj.SetResourceVersion(strconv.FormatInt(s.rev, 10))
	e := &entry[T]{Change: Change[T]{Revision: s.rev, Type: typ, Key: key, Object: obj}}
	if old, ok := s.objects[key]; ok {
		e.Old = old
	}
	if typ == cache.EventDeleted {
		delete(s.objects, key)
	} else {
		s.objects[key] = obj
	}
	s.log = append(s.log, e)
	for w := range s.watchers {
		if ev, ok := s.eventFor(e, w.filter); ok {
			w.push(ev)
		}
	}
	// The caller gets its own copy: the stored one is shared and immutable.
	return copyObj(obj)
}

// Get returns the stored object. It is shared: do not mutate it.
func (s *Source[T]) Get(namespace, name string) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok := s.objects[keyOf(namespace, name)]
	return obj, ok
}

// Items returns the current objects sorted by key. They are shared: do not
// mutate them.
func (s *Source[T]) Items() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := sortedKeys(s.objects)
	out := make([]T, len(keys))
	for i, k := range keys {
		out[i] = s.objects[k]
	}
	return out
}

// Revision returns the revision of the latest write (0 before any).
func (s *Source[T]) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// CompactedRevision returns the revision of the latest Compact (0 before any).
func (s *Source[T]) CompactedRevision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.compacted
}

// History returns every write since the Source was made, oldest first,
// including writes that Compact has made unreadable through List and Watch.
func (s *Source[T]) History() []Change[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Change[T], len(s.log))
	for i, e := range s.log {
		out[i] = e.Change
	}
	return out
}

// Compact forgets the writes at and below rev, as an etcd compaction does.
// The state at rev itself stays readable: afterwards a List with
// resourceVersionMatch=Exact at N, a continue token issued at N, and a Watch
// from N all fail with 410 Expired exactly when N < rev. So a watch from the
// current revision keeps working after Compact(Revision()). rev is clamped
// to the current revision, and compacting below an earlier compaction does
// nothing.
func (s *Source[T]) Compact(rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rev = min(rev, s.rev)
	if rev > s.compacted {
		s.compacted = rev
	}
}

// firstAfter returns the index of the first log entry with a revision above
// rev. s.mu is held.
func (s *Source[T]) firstAfter(rev int64) int {
	return sort.Search(len(s.log), func(i int) bool { return s.log[i].Revision > rev })
}

// stateAt returns the objects at revision rev, which must be readable
// (compacted <= rev <= s.rev), by undoing the later writes on the current
// state. The result may be s.objects itself: callers must not modify it.
// s.mu is held.
func (s *Source[T]) stateAt(rev int64) map[string]T {
	i := s.firstAfter(rev)
	if i == len(s.log) {
		return s.objects
	}
	state := make(map[string]T, len(s.objects))
	for k, v := range s.objects {
		state[k] = v
	}
	for j := len(s.log) - 1; j >= i; j-- {
		e := s.log[j]
		if e.Type == cache.EventAdded {
			delete(state, e.Key)
		} else {
			state[e.Key] = e.Old
		}
	}
	return state
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// parseRV parses a resourceVersion other than "" as a revision.
func parseRV(rv string) (int64, error) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rv))
	}
	return n, nil
}

// leftObject returns e.Old stamped with e's revision. s.mu is held.
func (s *Source[T]) leftObject(e *entry[T]) T {
	if !e.hasLeft {
		c, err := copyObj(e.Old)
		if err == nil {
			c.SetResourceVersion(strconv.FormatInt(e.Revision, 10))
		}
		e.left, e.hasLeft = c, true
	}
	return e.left
}

// eventFor returns the event a watcher with filter f receives for e, if any:
// an object that enters f's selection is ADDED and one that leaves it is
// DELETED, as the API server's watch cache reports them. s.mu is held.
func (s *Source[T]) eventFor(e *entry[T], f *filter[T]) (cache.Event[T], bool) {
	switch e.Type {
	case cache.EventAdded:
		if f.match(e.Object) {
			return cache.Event[T]{Type: cache.EventAdded, Object: e.Object}, true
		}
	case cache.EventDeleted:
		if f.match(e.Old) {
			return cache.Event[T]{Type: cache.EventDeleted, Object: e.Object}, true
		}
	case cache.EventModified:
		was, is := f.match(e.Old), f.match(e.Object)
		switch {
		case was && is:
			return cache.Event[T]{Type: cache.EventModified, Object: e.Object}, true
		case is:
			return cache.Event[T]{Type: cache.EventAdded, Object: e.Object}, true
		case was:
			return cache.Event[T]{Type: cache.EventDeleted, Object: s.leftObject(e)}, true
		}
	}
	return cache.Event[T]{}, false
}

// newObject builds the empty object of a BOOKMARK event, or reports that it
// cannot.
func (s *Source[T]) newObject() (T, bool) {
	var zero T
	if s.cfg.newObject == nil {
		return zero, false
	}
	obj := s.cfg.newObject()
	if isNil(obj) {
		return zero, false
	}
	return obj, true
}

// SupportsWatchList reports whether the source can serve streaming lists:
// whether it can make the objects of their BOOKMARK events (WithNewObject,
// or T a pointer to a struct). It makes Source a cache.WatchListSupporter.
func (s *Source[T]) SupportsWatchList() bool {
	_, ok := s.newObject()
	return ok
}
