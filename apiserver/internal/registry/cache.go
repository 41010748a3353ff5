package registry

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
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
	// undecodable holds the keys of a custom resource whose last value
	// did not decode (its conversion webhook fails), which the cache
	// leaves out (Undecodable).
	undecodableMu sync.Mutex
	undecodable   map[string]struct{}
}

// NewCache is the watch cache of r, whose stored objects decode reads;
// cfg gives the storage and the cache's sizes, the rest is r's.
func NewCache(r *Resource, decode func(storage.KeyValue) (*unstructured.Unstructured, error), cfg watchcache.Config[*unstructured.Unstructured]) (*Cache, error) {
	c := &Cache{hinted: r.ServedAsStored()}
	cfg.Prefix = PrefixFor(r, "")
	cfg.Decode = decode
	if r.CR != nil {
		// A custom resource may fail to decode when its conversion
		// webhook fails; its lists then answer as kube's (Undecodable).
		cfg.Decode = func(kv storage.KeyValue) (*unstructured.Unstructured, error) {
			u, err := decode(kv)
			c.decoded(kv.Key, err == nil)
			return u, err
		}
	}
	cfg.Preset = c.hints.preset
	if r.CR != nil && r.CR.ConvertsByWebhook() && !r.CR.IsStorageVersion() {
		// Decoding converts through the webhook: the cache's one
		// decoding of each version also makes its JSON, so that lists
		// and watches serve it with no further call, as kube-apiserver's
		// watch cache holds the objects converted.
		cfg.Preset = presetJSON
	}
	if c.hinted {
		// Stored as served: the cache reads what it needs of each
		// version from its JSON, and decodes it only when asked.
		cfg.Scan = newAttrsScanner(r).scan
	}
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

// decoded notes whether the value of key last decoded.
func (c *Cache) decoded(key string, ok bool) {
	c.undecodableMu.Lock()
	defer c.undecodableMu.Unlock()
	if ok {
		delete(c.undecodable, key)
		return
	}
	if c.undecodable == nil {
		c.undecodable = map[string]struct{}{}
	}
	c.undecodable[key] = struct{}{}
}

// Undecodable returns, sorted, the keys under prefix whose last value
// seen did not decode, which c leaves out of its lists: kube-apiserver
// lists such a resource from storage and answers the objects' errors
// (the caller reads them there; Forget drops a key found gone or
// decodable).
func (c *Cache) Undecodable(prefix string) []string {
	c.undecodableMu.Lock()
	defer c.undecodableMu.Unlock()
	var keys []string
	for k := range c.undecodable {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Forget drops key from Undecodable.
func (c *Cache) Forget(key string) { c.decoded(key, true) }

// presetJSON presets the JSON of obj, just decoded from kv, in enc.
func presetJSON(_ storage.KeyValue, obj *unstructured.Unstructured, enc *watchcache.Encodings) {
	js, err := json.Marshal(obj.Object)
	enc.Preset(MemoJSON, func() ([]byte, error) { return js, err })
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
