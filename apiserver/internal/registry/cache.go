package registry

import (
	"context"
	"log/slog"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watchcache"
)

// Cache is a resource's watch cache as the server runs it, with the
// hints its writers leave for it (writeHints).
type Cache struct {
	*watchcache.Cache[*unstructured.Unstructured]
	stop  context.CancelFunc // ends its Run; nil until Start
	done  chan struct{}      // closed when its Run has returned
	hints writeHints         // the Go objects of writes it has yet to see
	// hinted: r's writers leave hints (a built-in resource stored as it
	// is served, whose cache holds the version their objects are).
	hinted bool
}

// NewCache is the watch cache of r, whose stored objects decode reads;
// cfg gives the storage and the cache's sizes, the rest is r's.
func NewCache(r *Resource, decode func(storage.KeyValue) (*unstructured.Unstructured, error), cfg watchcache.Config[*unstructured.Unstructured]) (*Cache, error) {
	c := &Cache{hinted: r.ServedAsStored()}
	cfg.Prefix = PrefixFor(r, "")
	cfg.Decode = decode
	cfg.Preset = c.hints.preset
	cfg.Keep = r.Kept
	cfg.Attrs = func(u *unstructured.Unstructured) (labels.Set, fields.Set, error) {
		return labels.Set(u.GetLabels()), FieldSet(r, u.Object), nil
	}
	apiVersion, kind := r.APIVersion(), r.GVK.Kind
	cfg.New = func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		return u
	}
	wc, err := watchcache.New(cfg)
	if err != nil {
		return nil, err
	}
	c.Cache = wc
	return c, nil
}

// Start runs c in wg until ctx ends or c is closed.
func (c *Cache) Start(ctx context.Context, wg *sync.WaitGroup, log *slog.Logger) {
	ctx, cancel := context.WithCancel(ctx)
	c.stop, c.done = cancel, make(chan struct{})
	wg.Go(func() {
		defer close(c.done)
		if err := c.Run(ctx); err != nil {
			log.Error("watch cache", "err", err)
		}
	})
}

// Close stops c and waits for its Run to return; a cache never started
// has nothing to stop.
func (c *Cache) Close() {
	if c.stop != nil {
		c.stop()
		<-c.done
	}
}

// LeaveHint tells c that value, about to be stored at key, is obj
// (writeHints); the returned func withdraws the hint, for a write that
// failed. c may be nil.
func (c *Cache) LeaveHint(key string, value []byte, obj Object) (withdraw func()) {
	if c == nil || !c.hinted {
		return func() {}
	}
	return c.hints.leave(key, value, obj)
}

// WatchProtobuf counts a protobuf watch of c until the returned func is
// called: while one is open, writers leave hints.
func (c *Cache) WatchProtobuf() (done func()) {
	c.hints.protoWatchers.Add(1)
	return func() { c.hints.protoWatchers.Add(-1) }
}

// HintStats are counts of a cache's hints.
type HintStats struct {
	// Used counts hints that preset an event's message.
	Used int64
	// Left are the keys of hints no event has taken yet.
	Left []string
}

// HintStats reports c's hints.
func (c *Cache) HintStats() HintStats {
	h := &c.hints
	h.mu.Lock()
	defer h.mu.Unlock()
	st := HintStats{Used: h.used.Load()}
	for k := range h.m {
		st.Left = append(st.Left, k)
	}
	return st
}
