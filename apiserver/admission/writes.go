package admission

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/listwatch/listwatch/storage"
)

// The admission plugins read other objects from informers, which learn of
// a write a moment after it is stored. kube-apiserver lives with that: a
// pod created right after a LimitRange may miss its defaults. listwatch's
// writes follow each other faster than a real cluster's (no network), so
// the moment shows; and a client that has been answered expects its write
// to count. So before the plugins run, a write waits, briefly, until every
// informer of the plugins holds every write of its resource stored so far:
// the server counts, per resource, the revision of its last write
// (Writes, around the storage), and each informer the revision of
// the newest change it has handed out (a handler of its own, called once
// the informer's cache holds the change).

// freshnessWait bounds how long a write waits for the informers; past it,
// the plugins run on what the informers hold, as kube-apiserver's do.
const freshnessWait = 2 * time.Second

// Writes is the server's storage, counting the writes of the resources
// the admission informers hold, and of namespaces.
type Writes struct {
	storage.Interface
	shutdown context.Context
	// namespacesPrefix is the storage prefix of namespaces.
	namespacesPrefix string
	// tracked is set once, when the informers have synced, and read-only
	// after.
	tracked atomic.Pointer[trackedSet]
	// namespaces is the revision of the server's last namespace write.
	namespaces atomic.Int64
	// byPlugin are the types of the informers whose plugins' own handlers
	// say what is handed out (handlers.go), set before Sync.
	byPluginMu sync.Mutex
	byPlugin   map[reflect.Type]bool
}

// trackedSet is the resources counted: by storage prefix, by type, and
// all.
type trackedSet struct {
	byPrefix map[string]*tracked
	byType   map[reflect.Type]*tracked
	all      []*tracked
}

// handledByPlugin records that a plugin's handler on the informer of
// objects of type typ says what it hands out.
func (w *Writes) handledByPlugin(typ reflect.Type) {
	w.byPluginMu.Lock()
	defer w.byPluginMu.Unlock()
	if w.byPlugin == nil {
		w.byPlugin = map[reflect.Type]bool{}
	}
	w.byPlugin[typ] = true
}

// handed records that a plugin's handler has taken obj, of type typ.
func (w *Writes) handed(typ reflect.Type, obj any) {
	if set := w.tracked.Load(); set != nil {
		if t := set.byType[typ]; t != nil {
			t.handed(obj)
		}
	}
}

// tracked is one resource's counts.
type tracked struct {
	// written is the revision of the last write the server stored; seen
	// the newest revision the informer has handed out.
	written, seen atomic.Int64
	synced        func() bool
	// lastSync is the informer's last resourceVersion, for a delete it
	// missed while it relisted (final state unknown): its list was at
	// least that recent.
	lastSync func() string
	mu       sync.Mutex
	changed  chan struct{}
}

// TrackWrites replaces *st with Writes around it; namespacesPrefix is the
// storage prefix of namespaces, and shutdown the server's lifetime, which
// ends the waits of Fresh.
func TrackWrites(shutdown context.Context, st *storage.Interface, namespacesPrefix string) *Writes {
	w := &Writes{Interface: *st, shutdown: shutdown, namespacesPrefix: namespacesPrefix}
	*st = w
	return w
}

// Namespaces is the revision of the server's last namespace write, so
// that a namespace's readers can tell whether they have seen it.
func (w *Writes) Namespaces() int64 { return w.namespaces.Load() }

// wrote records a write of key at rev.
func (w *Writes) wrote(key string, rev int64) {
	if rev == 0 {
		return
	}
	prefix := resourcePrefix(key)
	if prefix == w.namespacesPrefix {
		atomicMax(&w.namespaces, rev)
	}
	if set := w.tracked.Load(); set != nil {
		if t := set.byPrefix[prefix]; t != nil {
			atomicMax(&t.written, rev)
		}
	}
}

// resourcePrefix is the prefix /registry/<group>/<plural>/ of key.
func resourcePrefix(key string) string {
	n := 0
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			if n++; n == 4 {
				return key[:i+1]
			}
		}
	}
	return ""
}

func (w *Writes) Create(ctx context.Context, key string, value []byte) (int64, error) {
	rev, err := w.Interface.Create(ctx, key, value)
	if err == nil {
		w.wrote(key, rev)
	}
	return rev, err
}

func (w *Writes) Update(ctx context.Context, key string, value []byte, expected int64) (int64, error) {
	rev, err := w.Interface.Update(ctx, key, value, expected)
	if err == nil {
		w.wrote(key, rev)
	}
	return rev, err
}

func (w *Writes) Delete(ctx context.Context, key string, expected int64) (storage.KeyValue, int64, error) {
	kv, rev, err := w.Interface.Delete(ctx, key, expected)
	if err == nil {
		w.wrote(key, rev)
	}
	return kv, rev, err
}

// Sync waits until the informers of f have synced, then counts, for each
// of them, the writes of its resource and what it has handed out.
// prefixOf is the storage prefix of a resource the server serves, "" for
// one it does not.
func (w *Writes) Sync(ctx context.Context, f informers.SharedInformerFactory, prefixOf func(schema.GroupVersionResource) string) error {
	synced := f.WaitForCacheSync(ctx.Done())
	types := make([]reflect.Type, 0, len(synced))
	for typ, ok := range synced {
		if !ok {
			return fmt.Errorf("informer of %v not synced: %w", typ, ctx.Err())
		}
		types = append(types, typ)
	}
	w.byPluginMu.Lock()
	byPlugin := w.byPlugin
	w.byPluginMu.Unlock()
	set := &trackedSet{byPrefix: map[string]*tracked{}, byType: map[reflect.Type]*tracked{}}
	for _, typ := range types {
		obj, ok := reflect.New(typ.Elem()).Interface().(runtime.Object)
		if !ok {
			continue
		}
		gvks, _, err := clientgoscheme.Scheme.ObjectKinds(obj)
		if err != nil || len(gvks) == 0 {
			continue
		}
		gvr, _ := meta.UnsafeGuessKindToResource(gvks[0])
		prefix := prefixOf(gvr)
		if prefix == "" {
			continue
		}
		inf := f.InformerFor(obj, nil)
		// Writes stored before now are not counted: the informer has
		// listed, and holds them or will hand them out.
		t := &tracked{synced: inf.HasSynced, lastSync: inf.LastSyncResourceVersion, changed: make(chan struct{})}
		set.byPrefix[prefix] = t
		set.byType[typ] = t
		set.all = append(set.all, t)
		if byPlugin[typ] {
			continue
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    t.handed,
			UpdateFunc: func(_, obj any) { t.handed(obj) },
			DeleteFunc: t.handed,
		}); err != nil {
			return err
		}
	}
	w.tracked.Store(set)
	return nil
}

// handed records that the informer handed out obj (in its cache by then).
func (t *tracked) handed(obj any) {
	var rv string
	if _, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		rv = t.lastSync()
	} else if acc, err := meta.Accessor(obj); err == nil {
		rv = acc.GetResourceVersion()
	}
	rev, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return
	}
	if atomicMax(&t.seen, rev) {
		t.mu.Lock()
		close(t.changed)
		t.changed = make(chan struct{})
		t.mu.Unlock()
	}
}

// Fresh waits until every tracked informer holds the writes stored so
// far, or ctx or the server ends, or freshnessWait has passed.
func (w *Writes) Fresh(ctx context.Context) {
	set := w.tracked.Load()
	if set == nil {
		return
	}
	var timeout <-chan time.Time
	for _, t := range set.all {
		target := t.written.Load()
		for t.seen.Load() < target {
			t.mu.Lock()
			changed := t.changed
			t.mu.Unlock()
			if t.seen.Load() >= target || !t.synced() {
				break
			}
			if timeout == nil {
				timer := time.NewTimer(freshnessWait)
				defer timer.Stop()
				timeout = timer.C
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-w.shutdown.Done():
				return
			case <-timeout:
				return
			}
		}
	}
}

// atomicMax raises v to x; it reports whether it did.
func atomicMax(v *atomic.Int64, x int64) bool {
	for {
		cur := v.Load()
		if x <= cur {
			return false
		}
		if v.CompareAndSwap(cur, x) {
			return true
		}
	}
}
