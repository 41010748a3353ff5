package watchcache

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/watch"
)

// Event is one watch event as a watcher receives it. Events are shared by
// every watcher that receives the same change in the same form, so the
// Object must not be mutated.
type Event[T Object] struct {
	// Type is watch.Added, watch.Modified, watch.Deleted or watch.Bookmark.
	Type watch.EventType
	// Object is the object after the change; for Deleted the last state of
	// the object with the resourceVersion of the delete (or of the change
	// that took it out of the watcher's selector); for Bookmark an empty
	// object with only its resourceVersion (and, at the end of initial
	// events, the k8s.io/initial-events-end annotation) set.
	Object T
	// Revision is the storage revision of the event: the resourceVersion of
	// Object.
	Revision int64

	// frames memoizes whole framed events (type and object), objEnc the
	// serializations of Object alone, which an ADDED or MODIFIED event
	// shares with the cached object it carries (and so with lists and the
	// initial events of other watches).
	frames Encodings
	objEnc *Encodings
	own    Encodings // objEnc's stand-in for events built without one
	// base is, for a DELETED event, the memo of the version Object copies.
	base *Encodings
}

// Encode returns encode(e), calling encode only once per key for the life of
// the event however many watchers ask, so that an event fanned out to many
// watchers is serialized once per format. The key must name everything the
// bytes depend on (media type, group version, options); encode must not
// mutate e.Object and the returned bytes must not be modified.
func (e *Event[T]) Encode(key string, encode func(*Event[T]) ([]byte, error)) ([]byte, error) {
	return e.frames.Get(key, func() ([]byte, error) { return encode(e) })
}

// ObjectEncodings memoizes the serializations of e.Object alone. For events
// carrying a cached object it is that object's memo, shared with every list
// and event that carries the same object version, so an object is
// serialized once per format for as long as the cache holds it.
func (e *Event[T]) ObjectEncodings() *Encodings {
	if e.objEnc == nil {
		// An event built as a literal (outside the cache) memoizes in
		// itself.
		return &e.own
	}
	return e.objEnc
}

// BaseEncodings is, for a DELETED event, the memo of the object version
// its Object is a copy of at the delete's resourceVersion: a serialization
// already made of that version (Encodings.Done) can be changed into one of
// Object more cheaply than Object can be serialized. It is nil for other
// events.
func (e *Event[T]) BaseEncodings() *Encodings { return e.base }

// newEvent builds an event whose object serializations are memoized in enc
// (nil: the event's own).
func newEvent[T Object](t watch.EventType, obj T, rev int64, enc *Encodings) *Event[T] {
	return &Event[T]{Type: t, Object: obj, Revision: rev, objEnc: enc}
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
