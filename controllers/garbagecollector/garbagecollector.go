// Package garbagecollector deletes objects whose owners are gone, as
// Kubernetes' garbage collector does: it keeps a graph of owners and
// dependents from ownerReferences seen by informers, deletes dependents
// whose owners have all disappeared (background cascading deletion),
// strips references to owners deleted with the orphan finalizer and then
// removes that finalizer, and deletes the dependents of owners with the
// foregroundDeletion finalizer before removing it.
//
// Two rate-limited queues of UIDs drive the work: attemptToDelete (is this
// object garbage? is this owner done waiting for its dependents? does this
// virtual owner exist?) and attemptToOrphan (an owner being deleted with
// the orphan finalizer). Absence is always confirmed against the API server
// before anything is deleted; the cache is trusted only for presence.
//
// Wiring it to an API server:
//
//	c, _ := client.New(cfg)
//	factory := informers.NewSharedInformerFactory(c, informers.Options{})
//	gc, err := garbagecollector.New(factory, garbagecollector.NewClient(c),
//		garbagecollector.BuiltinResources(),
//		garbagecollector.Options{Controller: controller.Options{Logger: log}})
//	...
//	err = gc.Run(ctx)
package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
)

// Resource is a resource the collector watches: its objects can be owners
// and dependents. GVK is the kind its objects are referenced by in
// ownerReferences.
type Resource struct {
	GVR        schema.GroupVersionResource
	GVK        schema.GroupVersionKind
	Namespaced bool
	// Subscribe connects the collector to the resource's shared informer;
	// nil means Metadata(): an informer of the objects' metadata alone,
	// which is all the collector reads, shared with any other user of the
	// resource's metadata informer. Pass InformerOf with the type other
	// controllers use (InformerOf[*corev1.Pod]()) to share theirs instead.
	Subscribe Subscriber
}

// Subscriber registers h for the events of resource gvr with an informer
// of f, acquired with informers.Acquire, and returns the registration's
// HasSynced and a func that undoes the registration and releases the
// informer.
type Subscriber func(f *informers.SharedInformerFactory, gvr schema.GroupVersionResource, h cache.ResourceEventHandler[cache.Object]) (hasSynced func() bool, release func(), err error)

// InformerOf returns the Subscriber that uses the factory's informer of
// objects of type T.
func InformerOf[T cache.Object]() Subscriber {
	return func(f *informers.SharedInformerFactory, gvr schema.GroupVersionResource, h cache.ResourceEventHandler[cache.Object]) (func() bool, func(), error) {
		inf, release := informers.Acquire[T](f, gvr)
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs[T]{
			AddFunc:    func(obj T, initial bool) { h.OnAdd(obj, initial) },
			UpdateFunc: func(oldObj, newObj T) { h.OnUpdate(oldObj, newObj) },
			DeleteFunc: func(obj T, unknown bool) { h.OnDelete(obj, unknown) },
		})
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("garbagecollector: watching %s: %w", gvr, err)
		}
		return reg.HasSynced, func() {
			// The registration may be gone with a stopped informer already.
			_ = inf.RemoveEventHandler(reg)
			release()
		}, nil
	}
}

// Metadata returns the Subscriber that uses the factory's metadata-only
// informer of the resource (informers.MetadataFor), as Kubernetes' garbage
// collector watches the resources no other controller of the process
// caches whole: owner references, finalizers and deletion timestamps are
// metadata.
func Metadata() Subscriber { return InformerOf[*metav1.PartialObjectMetadata]() }

// DefaultWorkers is the number of workers of each queue when
// Options.Controller.Workers is not positive.
const DefaultWorkers = 4

// Options configure a GarbageCollector. The zero value works.
type Options struct {
	// AbsentCacheSize bounds how many UIDs known to be absent are
	// remembered, which saves API reads; zero means 10,000.
	AbsentCacheSize int
	// Controller tunes each of the two queues' controllers: workers
	// (DefaultWorkers when not positive), retries, logs (discarded when
	// Logger is nil) and metrics.
	Controller controller.Options
}

// GarbageCollector deletes dependents of absent owners and carries out
// orphan and foreground deletions. Make one with New and Run it once.
type GarbageCollector struct {
	factory *informers.SharedInformerFactory
	client  Client
	log     *slog.Logger

	byGVK map[schema.GroupVersionKind]*Resource
	graph *graph

	// toDelete and toOrphan are the controllers of the attemptToDelete
	// and attemptToOrphan queues.
	toDelete, toOrphan *controller.Controller[types.UID]

	releases []func()
	ran      atomic.Bool
}

// New returns a collector over resources, watched through factory and
// acted on through client. It registers its informer handlers now; Run
// starts the work.
func New(factory *informers.SharedInformerFactory, client Client, resources []Resource, opts Options) (*GarbageCollector, error) {
	if factory == nil || client == nil {
		return nil, errors.New("garbagecollector: New needs a factory and a client")
	}
	if opts.Controller.Logger == nil {
		opts.Controller.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Controller.Workers <= 0 {
		opts.Controller.Workers = DefaultWorkers
	}
	absentSize := opts.AbsentCacheSize
	if absentSize <= 0 {
		absentSize = 10_000
	}
	gc := &GarbageCollector{
		factory: factory,
		client:  client,
		log:     opts.Controller.Logger.With("controller", "garbagecollector"),
		byGVK:   map[schema.GroupVersionKind]*Resource{},
	}
	byGVR := map[schema.GroupVersionResource]bool{}
	for i := range resources {
		r := resources[i]
		if r.GVR.Resource == "" || r.GVK.Kind == "" || r.GVK.Version == "" {
			return nil, fmt.Errorf("garbagecollector: resource %d needs a GVR and a GVK: %+v", i, r)
		}
		if byGVR[r.GVR] || gc.byGVK[r.GVK] != nil {
			return nil, fmt.Errorf("garbagecollector: resource %s (%s) listed twice", r.GVR, r.GVK)
		}
		byGVR[r.GVR] = true
		gc.byGVK[r.GVK] = &r
	}
	gc.graph = newGraph(gc.locate,
		func(uid types.UID) { gc.toDelete.Queue().Add(uid) },
		func(uid types.UID) { gc.toOrphan.Queue().Add(uid) },
		absentSize)
	// The graph is fed by handlers on informers acquired for the
	// resources, registered now: both queues' workers wait for them.
	var synced []func() bool
	for _, r := range gc.byGVK {
		sub := r.Subscribe
		if sub == nil {
			sub = Metadata()
		}
		hasSynced, release, err := sub(factory, r.GVR, handler{g: gc.graph, res: r})
		if err != nil {
			gc.release()
			return nil, err
		}
		synced = append(synced, hasSynced)
		gc.releases = append(gc.releases, release)
	}
	var err1, err2 error
	gc.toDelete, err1 = controller.New("garbage_collector_attempt_to_delete", withoutResult(gc.attemptToDelete), opts.Controller,
		controller.WaitFor[types.UID](synced...))
	gc.toOrphan, err2 = controller.New("garbage_collector_attempt_to_orphan", withoutResult(gc.attemptToOrphan), opts.Controller,
		controller.WaitFor[types.UID](synced...))
	if err := errors.Join(err1, err2); err != nil {
		gc.release()
		return nil, fmt.Errorf("garbagecollector: %w", err)
	}
	return gc, nil
}

// withoutResult is the sync handler of an attempt, which never asks for a
// later look: what it waits for, an informer event brings.
func withoutResult(attempt func(context.Context, types.UID) error) controller.SyncHandler[types.UID] {
	return func(ctx context.Context, uid types.UID) (controller.Result, error) {
		return controller.Result{}, attempt(ctx, uid)
	}
}

// release gives up the informer registrations.
func (gc *GarbageCollector) release() {
	for _, r := range gc.releases {
		r()
	}
	gc.releases = nil
}

// Run starts the factory's informers that are not running yet, waits for
// the collector's to sync, and works both queues until ctx ends; it then
// drains the queues, stops the workers, gives up its informers and
// returns. It returns an error when called twice or when ctx ends before
// the caches sync.
func (gc *GarbageCollector) Run(ctx context.Context) error {
	if !gc.ran.CompareAndSwap(false, true) {
		return errors.New("garbagecollector: Run called twice")
	}
	defer gc.release()
	gc.factory.Start(ctx)
	var wg sync.WaitGroup
	var errDelete, errOrphan error
	wg.Go(func() { errDelete = gc.toDelete.Run(ctx) })
	wg.Go(func() { errOrphan = gc.toOrphan.Run(ctx) })
	wg.Wait()
	return errors.Join(errDelete, errOrphan)
}

// locate finds where the owner ref, of a dependent in depNamespace, lives.
// It fails for an owner of unknown kind and for a namespaced owner of a
// cluster-scoped dependent, which Kubernetes treats as unresolvable: such
// a reference is never taken to be absent.
func (gc *GarbageCollector) locate(ref metav1.OwnerReference, depNamespace string) (objectID, bool) {
	gvk, ok := gvkOf(ref)
	if !ok {
		return objectID{}, false
	}
	r := gc.byGVK[gvk]
	if r == nil || (r.Namespaced && depNamespace == "") {
		return objectID{}, false
	}
	id := objectID{res: r, name: ref.Name, uid: ref.UID}
	if r.Namespaced {
		id.namespace = depNamespace
	}
	return id, true
}

// handler feeds one resource's informer events to the graph.
type handler struct {
	g   *graph
	res *Resource
}

func (h handler) OnAdd(obj cache.Object, _ bool) {
	if obj != nil {
		h.g.upsert(h.res, obj)
	}
}

func (h handler) OnUpdate(oldObj, newObj cache.Object) {
	if newObj == nil {
		return
	}
	if oldObj != nil && oldObj.GetUID() != newObj.GetUID() {
		// Deleted and recreated under the same name while the informer
		// was not watching: two objects, not one changed.
		h.g.remove(oldObj)
	}
	h.g.upsert(h.res, newObj)
}

// OnDelete forgets obj. A tombstone (finalStateUnknown) carries the last
// state the cache knew, whose UID is all the graph needs.
func (h handler) OnDelete(obj cache.Object, _ bool) {
	if obj != nil {
		h.g.remove(obj)
	}
}
