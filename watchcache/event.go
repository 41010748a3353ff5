package watchcache

import (
	"sync"

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

	mu   sync.Mutex
	memo []*encoding
}

// encoding is one memoized encoding of an event.
type encoding struct {
	key  string
	once sync.Once
	data []byte
	err  error
}

// Encode returns encode(e), calling encode only once per key for the life of
// the event however many watchers ask, so that an event fanned out to many
// watchers is serialized once per format. The key must name everything the
// bytes depend on (media type, group version, options); encode must not
// mutate e.Object and the returned bytes must not be modified.
func (e *Event[T]) Encode(key string, encode func(*Event[T]) ([]byte, error)) ([]byte, error) {
	e.mu.Lock()
	var enc *encoding
	for _, m := range e.memo {
		if m.key == key {
			enc = m
			break
		}
	}
	if enc == nil {
		enc = &encoding{key: key}
		e.memo = append(e.memo, enc)
	}
	e.mu.Unlock()
	// Other keys stay usable while this one encodes: only enc is held.
	enc.once.Do(func() { enc.data, enc.err = encode(e) })
	return enc.data, enc.err
}
