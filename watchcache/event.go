package watchcache

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/watch"
)

// Event is one watch event as a watcher receives it. Events are shared by
// every watcher that receives the same change in the same form while they
// hold it, so the object must not be mutated.
type Event[T Object] struct {
	// Type is watch.Added, watch.Modified, watch.Deleted or watch.Bookmark.
	Type watch.EventType
	// Revision is the storage revision of the event: the resourceVersion of
	// its object.
	Revision int64

	// item is the object version the event carries (for DELETED, the
	// last version's bytes at the delete's revision); nil for BOOKMARK
	// events and events built by NewEvent, whose obj is set.
	item    *Item[T]
	objOnce sync.Once
	obj     T

	// frames memoizes whole framed events (type and object). The
	// serializations of the object alone are its item's (ObjectEncodings),
	// shared with the cached version it carries (and so with lists and the
	// initial events of other watches).
	frames Encodings
	own    Encodings // the object's memo for events built by NewEvent
	// base is, for a DELETED event, the memo of the version its object
	// is a copy of.
	base *Encodings
}

// NewEvent returns an event of type t carrying obj at revision rev, for
// events made outside a cache; its object's serializations are memoized in
// the event.
func NewEvent[T Object](t watch.EventType, obj T, rev int64) *Event[T] {
	return &Event[T]{Type: t, Revision: rev, obj: obj}
}

// Object is the object after the change; for Deleted the last state of
// the object with the resourceVersion of the delete (or of the change
// that took it out of the watcher's selector); for Bookmark an empty
// object with only its resourceVersion (and, at the end of initial
// events, the k8s.io/initial-events-end annotation) set. It is decoded
// from the cached bytes on first use (Item.Object) and kept for the
// event's life.
func (e *Event[T]) Object() T {
	if e.item != nil {
		e.objOnce.Do(func() { e.obj = e.item.Object() })
	}
	return e.obj
}

// Item is the cached version the event carries, whose stored bytes a
// caller may serve from; nil for BOOKMARK events and events made by
// NewEvent. A DELETED event's item is the last version's bytes at the
// delete's revision.
func (e *Event[T]) Item() *Item[T] { return e.item }

// Encode returns encode(e), calling encode only once per key for the life of
// the event however many watchers ask, so that an event fanned out to many
// watchers is serialized once per format. The key must name everything the
// bytes depend on (media type, group version, options); encode must not
// mutate e's object and the returned bytes must not be modified.
func (e *Event[T]) Encode(key string, encode func(*Event[T]) ([]byte, error)) ([]byte, error) {
	return e.frames.Get(key, func() ([]byte, error) { return encode(e) })
}

// ObjectEncodings memoizes the serializations of e's object alone. For
// events carrying a cached object it is that version's memo, shared with
// every list and event that carries the same object version, so an object
// is serialized once per format while it is current.
func (e *Event[T]) ObjectEncodings() *Encodings {
	if e.item == nil {
		return &e.own
	}
	return &e.item.enc
}

// BaseEncodings is, for a DELETED event, the memo of the object version
// its object is a copy of at the delete's resourceVersion: a serialization
// already made of that version (Encodings.Done) can be changed into one of
// the object more cheaply than the object can be serialized. It is nil for
// other events.
func (e *Event[T]) BaseEncodings() *Encodings { return e.base }

// itemEvent builds an event carrying it.
func itemEvent[T Object](t watch.EventType, it *Item[T]) *Event[T] {
	return &Event[T]{Type: t, Revision: it.rev, item: it}
}

// setObject gives e its object decoded already.
func (e *Event[T]) setObject(obj T) {
	e.objOnce.Do(func() { e.obj = obj })
}

// Encodings memoizes serializations of one immutable value, one per key.
// The zero value is ready to use; it must not be copied after first use.
type Encodings struct {
	mu   sync.Mutex
	memo []*encoding
}

// encoding is one memoized serialization.
type encoding struct {
	key  string
	once sync.Once
	data []byte
	err  error
	// preset, when set, encodes in place of the first Get's function
	// (Preset); it is dropped once it has run.
	preset func() ([]byte, error)
	// done is set once data and err are.
	done atomic.Bool
}

// Get returns encode(), calling encode only once per key however many
// goroutines ask. The key must name everything the bytes depend on; the
// returned bytes are shared and must not be modified.
func (m *Encodings) Get(key string, encode func() ([]byte, error)) ([]byte, error) {
	m.mu.Lock()
	var enc *encoding
	for _, e := range m.memo {
		if e.key == key {
			enc = e
			break
		}
	}
	if enc == nil {
		enc = &encoding{key: key}
		m.memo = append(m.memo, enc)
	}
	m.mu.Unlock()
	// Other keys stay usable while this one encodes: only enc is held.
	enc.once.Do(func() {
		if enc.preset != nil {
			encode, enc.preset = enc.preset, nil
		}
		enc.data, enc.err = encode()
		enc.done.Store(true)
	})
	return enc.data, enc.err
}

// drop forgets every serialization, so that a version the cache keeps
// only for its window does not keep them; a Get after it encodes again.
func (m *Encodings) drop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.memo = nil
}

// Done returns the bytes of key when an earlier Get has made them
// without an error, and does not make them otherwise.
func (m *Encodings) Done(key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.memo {
		if e.key == key {
			if !e.done.Load() || e.err != nil {
				return nil, false
			}
			return e.data, true
		}
	}
	return nil, false
}

// Preset makes encode the function Get calls for key, whatever function
// Get is then given: the owner of the value, knowing a cheaper way to the
// same bytes, sets it before the value is shared. A key already asked for
// is left as it is.
func (m *Encodings) Preset(key string, encode func() ([]byte, error)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.memo {
		if e.key == key {
			return
		}
	}
	m.memo = append(m.memo, &encoding{key: key, preset: encode})
}
