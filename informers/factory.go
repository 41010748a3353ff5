// Package informers holds the SharedInformerFactory: one shared informer,
// one watch and one cache per resource for a whole process, created when
// first asked for and shared by everyone who asks after.
package informers

import (
	"cmp"
	"context"
	"log/slog"
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
)

// Source gives the factory a ListerWatcher for a resource. The REST client
// implements it for a real API server; tests implement it over
// cachetest.Source.
//
// The returned ListerWatcher lists and watches resource gvr in namespace
// (every namespace when ""), with tweak, when not nil, applied to the
// options of every request; the factory passes its list-option tweaks there.
// A resource the source cannot serve is reported by the ListerWatcher's
// calls failing, which the informer's SyncStatus then tells.
type Source interface {
	ListerWatcher(gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object]
}

// MetadataSource is a Source that can also list and watch the metadata of
// a resource's objects alone, as *metav1.PartialObjectMetadata; the REST
// client is one. The factory uses it for informers of
// *metav1.PartialObjectMetadata (MetadataFor), and takes the metadata out
// of the whole objects of a Source that is not one.
type MetadataSource interface {
	Source
	MetadataListerWatcher(gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object]
}

// TypedSource is a Source that can decode objects into a Go type the
// caller names: the REST client is one. The factory uses it for informers
// whose T is a Go struct of the user's rather than a built-in's or
// *unstructured.Unstructured — a custom resource's Foo (a struct embedding
// metav1.TypeMeta and metav1.ObjectMeta, with a DeepCopyObject), so that
// InformerFor[*Foo](f, fooGVR) caches *Foo values with no conversion and
// no code generation.
type TypedSource interface {
	Source
	// TypedListerWatcher is ListerWatcher with objects decoded into
	// goType, a pointer to a struct.
	TypedListerWatcher(gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions), goType reflect.Type) cache.ListerWatcher[cache.Object]
}

// SourceFunc adapts a function to Source.
type SourceFunc func(gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object]

// ListerWatcher calls f.
func (f SourceFunc) ListerWatcher(gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
	return f(gvr, namespace, tweak)
}

// Options configure a SharedInformerFactory. The zero value works.
type Options struct {
	// Namespace limits every informer to one namespace; "" means all.
	Namespace string
	// TweakListOptions rewrites the options of every list and watch, for
	// label and field selectors.
	TweakListOptions func(*metav1.ListOptions)
	// DefaultResync is the resync period of every informer's default
	// handlers; Resync overrides it per resource.
	DefaultResync time.Duration
	Resync        map[schema.GroupVersionResource]time.Duration
	// KeepManagedFields keeps metadata.managedFields, which the default
	// transform strips to save memory (controllers never read them).
	KeepManagedFields bool
	// Reflector holds the options of every informer's Reflector (logger,
	// backoff, paging, streaming list, watch-error handler).
	Reflector cache.ReflectorOptions
	// MutationDetection turns on every informer's mutation detector.
	MutationDetection bool
	// Shard, when set, makes every informer hold one shard of its
	// resource (see Shard), for controllers whose replicas split the
	// objects among them; ResourceShards overrides it per resource, nil
	// holding the whole resource (for one a controller must see whole,
	// such as the pods of a ReplicaSet when the ReplicaSets are sharded by
	// uid). An invalid Shard makes the informer's lists fail with its
	// error, which its SyncStatus tells.
	Shard          *Shard
	ResourceShards map[schema.GroupVersionResource]*Shard
}

// informerKey identifies a shared informer: the resource and the Go type of
// its objects, so that typed and untyped users of one resource each get
// theirs.
type informerKey struct {
	gvr schema.GroupVersionResource
	typ reflect.Type
}

// runnable is what the factory needs of a SharedIndexInformer[T].
type runnable interface {
	Run(ctx context.Context)
	HasSynced() bool
}

type entry struct {
	informer runnable
	// typed is the *Informer[T] handed out for the entry's key.
	typed any
	// pinned is set once For or InformerFor asked for the informer: it
	// then runs until Shutdown. refs counts the holds Acquire gave out.
	pinned  bool
	refs    int
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// SharedInformerFactory creates and shares informers. It is safe for
// concurrent use.
type SharedInformerFactory struct {
	source Source
	opts   Options
	log    *slog.Logger

	mu        sync.Mutex
	informers map[informerKey]*entry
	shutdown  bool
	wg        sync.WaitGroup
}

// NewSharedInformerFactory returns a factory whose informers read from src.
func NewSharedInformerFactory(src Source, opts Options) *SharedInformerFactory {
	log := cmp.Or(opts.Reflector.Logger, slog.Default())
	return &SharedInformerFactory{source: src, opts: opts, log: log, informers: map[informerKey]*entry{}}
}

// Informer is the factory's shared informer of one resource for objects
// of type T: the *cache.SharedIndexInformer[T] it embeds (so it is a
// cache.Informer[T], which controllers take), and a Lister.
type Informer[T cache.Object] struct {
	*cache.SharedIndexInformer[T]
	resource schema.GroupResource
}

// GroupResource returns the resource the informer holds.
func (i *Informer[T]) GroupResource() schema.GroupResource { return i.resource }

// Lister returns a Lister over the informer's cache.
func (i *Informer[T]) Lister() cache.Lister[T] {
	return i.SharedIndexInformer.Lister(i.resource)
}

// InformerFor returns the shared informer of resource gvr with objects of
// type T, creating it on the first call; every later call returns the same
// one, so callers need not keep it. A new informer runs from the next
// Start until Shutdown. For a built-in resource, For finds gvr from T
// alone; T *metav1.PartialObjectMetadata holds the objects' metadata alone
// (MetadataFor).
func InformerFor[T cache.Object](f *SharedInformerFactory, gvr schema.GroupVersionResource) *Informer[T] {
	inf, _ := informerOf[T](f, gvr, nil, false)
	return inf
}

// Acquire is InformerFor for users that come and go while the factory
// runs, such as the garbage collector, which follows custom resources as
// they are added and removed: release gives up the hold (calling it again
// does nothing), and an informer that no For or InformerFor asked for
// stops, and is forgotten, when its last hold is released, so that a
// later request makes a new one.
func Acquire[T cache.Object](f *SharedInformerFactory, gvr schema.GroupVersionResource) (inf *Informer[T], release func()) {
	return informerOf[T](f, gvr, nil, true)
}

// informerOf returns the informer of gvr for T, counting a hold when
// counted (and returning its release) and pinning it otherwise. It reads
// from lw rather than from the source when lw is not nil.
func informerOf[T cache.Object](f *SharedInformerFactory, gvr schema.GroupVersionResource, lw cache.ListerWatcher[cache.Object], counted bool) (*Informer[T], func()) {
	key := informerKey{gvr: gvr, typ: reflect.TypeFor[T]()}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.informers[key]
	if !ok {
		inf := &Informer[T]{SharedIndexInformer: newTyped[T](f, gvr, lw), resource: gvr.GroupResource()}
		e = &entry{informer: inf.SharedIndexInformer, typed: inf}
		f.informers[key] = e
	}
	// The entry was made for this very key, whose type is T.
	inf, _ := e.typed.(*Informer[T])
	if !counted {
		e.pinned = true
		return inf, func() {}
	}
	e.refs++
	var once sync.Once
	return inf, func() { once.Do(func() { f.release(key, e) }) }
}

// newTyped builds the informer of gvr for T with the factory's options,
// reading from erased, or from the source when erased is nil.
func newTyped[T cache.Object](f *SharedInformerFactory, gvr schema.GroupVersionResource, erased cache.ListerWatcher[cache.Object]) *cache.SharedIndexInformer[T] {
	resync := f.opts.DefaultResync
	if d, ok := f.opts.Resync[gvr]; ok {
		resync = d
	}
	var transform cache.TransformFunc[T]
	if !f.opts.KeepManagedFields {
		transform = StripManagedFields[T]
	}
	ms, metadataSource := f.source.(MetadataSource)
	ts, typedSource := f.source.(TypedSource)
	switch t := reflect.TypeFor[T](); {
	case erased != nil:
	case t == metadataType && metadataSource:
		erased = ms.MetadataListerWatcher(gvr, f.opts.Namespace, f.opts.TweakListOptions)
	case t == metadataType:
		erased = metadataOnly{f.source.ListerWatcher(gvr, f.opts.Namespace, f.opts.TweakListOptions)}
	case typedSource && t != unstructuredType && t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		erased = ts.TypedListerWatcher(gvr, f.opts.Namespace, f.opts.TweakListOptions, t)
	default:
		erased = f.source.ListerWatcher(gvr, f.opts.Namespace, f.opts.TweakListOptions)
	}
	ropts := f.opts.Reflector
	if sel, err := f.opts.shardFor(gvr); err != nil {
		erased = failing{err}
	} else if sel != nil {
		ropts.Shard = sel
	}
	lw := cache.Unerase[T](erased)
	if ropts.Name == "" {
		ropts.Name = gvr.String()
		if gvr.Empty() {
			ropts.Name = reflect.TypeFor[T]().String()
		}
	}
	return cache.NewSharedIndexInformer(lw, cache.SharedInformerOptions{
		ResyncPeriod:      resync,
		Reflector:         ropts,
		MutationDetection: f.opts.MutationDetection,
	}, cache.WithTransform(transform))
}

// StripManagedFields is the factory's default transform: it drops
// metadata.managedFields. Objects without any are returned as they are; the
// others are copied first, since the object handed in may be shared with
// its source.
func StripManagedFields[T cache.Object](obj T) (T, error) {
	if len(obj.GetManagedFields()) == 0 {
		return obj, nil
	}
	cp, ok := obj.DeepCopyObject().(T)
	if !ok {
		// A DeepCopyObject that changes the type: leave the object alone.
		return obj, nil
	}
	cp.SetManagedFields(nil)
	return cp, nil
}

func (f *SharedInformerFactory) release(key informerKey, e *entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e.refs--
	if e.refs > 0 || e.pinned || f.informers[key] != e {
		return
	}
	delete(f.informers, key)
	if e.started {
		e.cancel()
	}
}

// Start runs every informer requested and not yet running, until ctx is
// done, Shutdown is called or the last hold on an acquired one is
// released. It does not block, and calling it again starts only what is
// new.
func (f *SharedInformerFactory) Start(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shutdown {
		return
	}
	for _, e := range f.informers {
		if e.started {
			continue
		}
		ictx, cancel := context.WithCancel(ctx)
		e.started, e.cancel, e.done = true, cancel, make(chan struct{})
		f.wg.Go(func() {
			defer close(e.done)
			e.informer.Run(ictx)
		})
	}
}

// WaitForCacheSync waits until every started informer has synced, or ctx is
// done, and returns whether each has, by resource. A resource with informers
// of two object types is synced when both are.
func (f *SharedInformerFactory) WaitForCacheSync(ctx context.Context) map[schema.GroupVersionResource]bool {
	f.mu.Lock()
	started := map[informerKey]runnable{}
	for k, e := range f.informers {
		if e.started {
			started[k] = e.informer
		}
	}
	f.mu.Unlock()
	res := map[schema.GroupVersionResource]bool{}
	for k, inf := range started {
		ok := cache.WaitForCacheSync(ctx, inf.HasSynced)
		if prev, seen := res[k.gvr]; seen {
			ok = ok && prev
		}
		res[k.gvr] = ok
	}
	return res
}

// Shutdown stops every informer and waits until all their goroutines are
// gone, including those of informers already released. Start does nothing
// afterwards.
func (f *SharedInformerFactory) Shutdown() {
	f.mu.Lock()
	f.shutdown = true
	for _, e := range f.informers {
		if e.started {
			e.cancel()
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
}
