package apiserver

import (
	"bytes"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watchcache"
)

// A watch cache holds what it decodes from storage as maps, and a
// protobuf watcher wants each event as its Go type's message: converting
// the map back to the Go type (typedOf) was nearly all of a watch event's
// cost, and the largest cost of the controllers' watches in the rollout
// of a Deployment (controlplane-rollout-1k's profile: 0.73 s of 0.94 s in
// the watch handlers). The server's own writes hold that Go type: a
// writer leaves it, with the bytes it stores, as a hint for the cache of
// its resource, which presets the object's protobuf memo from it when
// the event it decodes carries those very bytes. A hint that does not
// match (another writer's bytes won) is dropped and the event is
// converted as before, so a hint can make an encoding cheaper but never
// other than it would be.

// writeHints are the hints of one watch cache, by storage key: at most
// one per key, the last writer's.
type writeHints struct {
	// protoWatchers counts the cache's protobuf watches: without one
	// no hint is left, since nothing would read it.
	protoWatchers atomic.Int32

	mu sync.Mutex
	m  map[string]*writeHint
	// used and missed count hints presetting a memo, and hints dropped
	// because the event carried other bytes.
	used, missed atomic.Int64
}

// writeHint is a Go object about to be stored as value.
type writeHint struct {
	value []byte
	obj   protoObject
}

// protoObject is a built-in object that marshals itself as protobuf.
type protoObject interface {
	object
	protoMessage
}

// maxWriteHints bounds the hints kept: each lives from its write to its
// event, so only writes the cache never sees (it relisted meanwhile) stay
// longer.
const maxWriteHints = 4096

// leave records that value, about to be stored at key, is obj, when a
// protobuf watch is open; obj is copied, so the writer keeps it. The
// returned func withdraws the hint; a writer calls it when its write
// failed.
func (h *writeHints) leave(key string, value []byte, obj object) (withdraw func()) {
	if h.protoWatchers.Load() == 0 {
		return func() {}
	}
	if _, isMap := obj.(*unstructured.Unstructured); isMap {
		return func() {}
	}
	cp, ok := obj.DeepCopyObject().(protoObject)
	if !ok {
		return func() {}
	}
	hint := &writeHint{value: value, obj: cp}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]*writeHint{}
	}
	if _, replaces := h.m[key]; !replaces && len(h.m) >= maxWriteHints {
		return func() {}
	}
	h.m[key] = hint
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.m[key] == hint {
			delete(h.m, key)
		}
	}
}

// preset is the watch cache's Config.Preset: it takes the hint of kv's
// key and, when kv holds the hint's bytes, has the object's protobuf
// message marshalled from the hint's Go object at kv's revision.
func (h *writeHints) preset(kv storage.KeyValue, _ *unstructured.Unstructured, enc *watchcache.Encodings) {
	h.mu.Lock()
	hint := h.m[kv.Key]
	delete(h.m, kv.Key)
	h.mu.Unlock()
	if hint == nil {
		return
	}
	if !bytes.Equal(hint.value, kv.Value) {
		h.missed.Add(1)
		return
	}
	h.used.Add(1)
	obj := hint.obj
	rv := strconv.FormatInt(kv.Revision, 10)
	enc.Preset(memoProto, func() ([]byte, error) {
		obj.SetResourceVersion(rv)
		return obj.Marshal()
	})
}
