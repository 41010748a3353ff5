package controller

import (
	"slices"
	"sync"

	"github.com/listwatch/listwatch/cache"
)

// Writes remembers, per key, what a controller's last write of an object
// returned, so that a sync running before the informer has shown that
// write builds on it rather than on the cached copy it replaced: a write
// of the cached copy would carry a resourceVersion the server has moved
// past and fail with a conflict, costing a read and a retry (kube's
// controllers pay them; a Deployment of 1,000 pods saw about 120 such
// ReplicaSet status conflicts, each followed by a GET), and a write with
// no precondition would be decided on a copy older than the controller's
// own last write, and repeat it.
//
// Which copy is newer is decided without comparing resourceVersions,
// which clients must treat as opaque: a write is remembered with the
// resourceVersions it superseded (the one it was made against and, when
// it was made against an earlier remembered write, those that one
// superseded), and is used only while the cache still holds one of
// those. Once the cache shows anything else (the write itself, or a
// later one by anyone) the cache is current again and the write is
// forgotten. Memory is bounded by the objects written whose writes the
// cache has not shown yet, and at most maxSuperseded versions for each.
//
// The zero value is ready to use; a Writes is safe for concurrent use.
type Writes[T cache.Object] struct {
	mu sync.Mutex
	m  map[string]write[T]
}

type write[T cache.Object] struct {
	superseded []string
	obj        T
}

// maxSuperseded bounds the versions remembered for one key; a cache that
// lags further than that behind one controller's writes costs a conflict.
const maxSuperseded = 8

// Replaced records that the server holds newer in place of base (what
// Latest returned for key, or what a write of it conflicted with): a
// write of base returned newer, or a read after a conflict found it.
func (w *Writes[T]) Replaced(key string, base, newer T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]write[T]{}
	}
	var superseded []string
	if last, ok := w.m[key]; ok && last.obj.GetResourceVersion() == base.GetResourceVersion() && last.obj.GetUID() == base.GetUID() {
		superseded = last.superseded
		if len(superseded) == maxSuperseded {
			superseded = superseded[1:]
		}
	}
	w.m[key] = write[T]{superseded: append(superseded, base.GetResourceVersion()), obj: newer}
}

// Latest returns the newest copy known of the object the cache shows as
// cached under key: what the last write of it returned, if the cache
// still shows the version that write replaced; else cached.
func (w *Writes[T]) Latest(key string, cached T) T {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.m[key]
	if !ok {
		return cached
	}
	if last.obj.GetUID() == cached.GetUID() && slices.Contains(last.superseded, cached.GetResourceVersion()) {
		return last.obj
	}
	delete(w.m, key)
	return cached
}

// Forget drops what is remembered for key, as when its object is gone.
func (w *Writes[T]) Forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}
