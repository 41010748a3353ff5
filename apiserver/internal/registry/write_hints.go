package registry

import (
	"bytes"
	"slices"
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
// the event it decodes carries those very bytes. An event no hint matches
// (another writer's, who left none) is converted as before, so a hint
// can make an encoding cheaper but never other than it would be.

// writeHints are the hints of one watch cache, by storage key, in the
// order they were left: a key has several while writers race (a
// controller's status write and another's scale), and each event takes
// the one that carries its bytes.
type writeHints struct {
	// protoWatchers counts the cache's protobuf watches: without one
	// no hint is left, since nothing would read it.
	protoWatchers atomic.Int32

	mu sync.Mutex
	m  map[string][]*writeHint
	n  int // hints in m
	// used counts hints presetting a memo, unmatched events decoded while
	// their key had hints, none of which carried the event's bytes (those
	// were another writer's, who left none).
	used, unmatched atomic.Int64
}

// writeHint is a Go object about to be stored as value.
type writeHint struct {
	value []byte
	obj   protoObject
}

// protoObject is a built-in object that marshals itself as protobuf.
type protoObject interface {
	Object
	Marshal() ([]byte, error)
}

// MemoJSON is the key of a cached object's JSON (package wire), which
// a custom resource's cache presets (NewCache).
const MemoJSON = "json"

// MemoProto is the key of a cached object's protobuf message, without
// the envelope, in its watchcache.Encodings.
const MemoProto = "protobuf-message"

// Each hint lives from its write to its event, or to its withdrawal when
// the write fails, so these bounds are only reached by writes the cache
// never sees (it relisted meanwhile): the hints of a key and of a cache.
const (
	maxKeyHints   = 8
	maxWriteHints = 4096
)

// leave records that value, about to be stored at key, is obj, when a
// protobuf watch is open; obj is copied, so the writer keeps it. The
// returned func withdraws the hint; a writer calls it when its write
// failed.
func (h *writeHints) leave(key string, value []byte, obj Object) (withdraw func()) {
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
	if h.n >= maxWriteHints || len(h.m[key]) >= maxKeyHints {
		return func() {}
	}
	if h.m == nil {
		h.m = map[string][]*writeHint{}
	}
	h.m[key] = append(h.m[key], hint)
	h.n++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.takeLocked(key, func(x *writeHint) bool { return x == hint })
	}
}

// takeLocked removes and returns the first hint of key that match
// accepts, or nil.
func (h *writeHints) takeLocked(key string, match func(*writeHint) bool) *writeHint {
	hints := h.m[key]
	for i, x := range hints {
		if !match(x) {
			continue
		}
		if len(hints) == 1 {
			delete(h.m, key)
		} else {
			h.m[key] = slices.Delete(hints, i, i+1)
		}
		h.n--
		return x
	}
	return nil
}

// preset is the watch cache's Config.Preset: when a hint of kv's key
// carries kv's bytes, it takes it and has the object's protobuf message
// marshalled from the hint's Go object at kv's revision.
func (h *writeHints) preset(kv storage.KeyValue, _ *unstructured.Unstructured, enc *watchcache.Encodings) {
	h.mu.Lock()
	pending := len(h.m[kv.Key]) > 0
	hint := h.takeLocked(kv.Key, func(x *writeHint) bool { return bytes.Equal(x.value, kv.Value) })
	h.mu.Unlock()
	if hint == nil {
		if pending {
			h.unmatched.Add(1)
		}
		return
	}
	h.used.Add(1)
	obj := hint.obj
	rv := strconv.FormatInt(kv.Revision, 10)
	enc.Preset(MemoProto, func() ([]byte, error) {
		obj.SetResourceVersion(rv)
		return obj.Marshal()
	})
}
