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
//	discover := garbagecollector.ServedResources(c)
//	resources, err := discover(ctx)
//	...
//	gc, err := garbagecollector.New(factory, garbagecollector.NewClient(c), resources,
//		garbagecollector.Options{Discover: discover, Controller: controller.Options{Logger: log}})
//	...
//	err = gc.Run(ctx)
//
// With Options.Discover the collector follows what the server serves as it
// runs, as Kubernetes' collector re-syncs its monitors from discovery: the
// custom resources of a CustomResourceDefinition created later are watched
// from the next resync on, and those of a definition deleted stop being
// watched, their informers given up. Without it, it watches the resources
// given to New (BuiltinResources for a fixed set).
package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

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

// DefaultResyncPeriod is how often a collector with Options.Discover
// looks for resources added and removed, when Options.ResyncPeriod is not
// positive: Kubernetes' kube-controller-manager re-syncs its collector's
// monitors from discovery every 30 s.
const DefaultResyncPeriod = 30 * time.Second

// Options configure a GarbageCollector. The zero value works.
type Options struct {
	// Discover, when set, lists the resources the collector is to watch,
	// as the server serves them now; every ResyncPeriod while it runs the
	// collector calls it and watches the resources it names from then on
	// (custom resources whose definitions were created: their owners
	// and dependents are collected like any other), and stops watching
	// those it no longer names (definitions deleted), giving up their
	// informers. The resources given to New are those watched until the
	// first call. A call that fails changes nothing. See ServedResources.
	Discover func(ctx context.Context) ([]Resource, error)
	// ResyncPeriod is how often Discover is called; not positive means
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
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

	discover func(context.Context) ([]Resource, error)
	period   time.Duration
	// rediscover asks the resync loop for a resync now (Rediscover); it
	// holds one request, so that requests made meanwhile make one resync.
	rediscover chan struct{}

	// mu guards monitors and byGVK, which change while the collector runs
	// when it discovers resources. The graph's lock is taken before it,
	// never after.
	mu       sync.RWMutex
	monitors map[schema.GroupVersionResource]*monitor
	byGVK    map[schema.GroupVersionKind]*Resource
	graph    *graph

	// toDelete and toOrphan are the controllers of the attemptToDelete
	// and attemptToOrphan queues.
	toDelete, toOrphan *controller.Controller[types.UID]
	// synced are the HasSynced of the resources given to New, set by Run
	// before the queues' workers start.
	synced []func() bool

	ran atomic.Bool
}

// monitor is a watched resource: its informer subscription feeding the
// graph.
type monitor struct {
	res       *Resource
	feed      *feed
	hasSynced func() bool
	release   func()
}

// New returns a collector over resources, watched through factory and
// acted on through client. It starts nothing and registers nothing: Run
// acquires the informers and does the work.
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
	period := opts.ResyncPeriod
	if period <= 0 {
		period = DefaultResyncPeriod
	}
	gc := &GarbageCollector{
		factory:    factory,
		client:     client,
		log:        opts.Controller.Logger.With("controller", "garbagecollector"),
		discover:   opts.Discover,
		period:     period,
		rediscover: make(chan struct{}, 1),
		monitors:   map[schema.GroupVersionResource]*monitor{},
		byGVK:      map[schema.GroupVersionKind]*Resource{},
	}
	byGVR := map[schema.GroupVersionResource]bool{}
	for i, r := range resources {
		if err := valid(r); err != nil {
			return nil, fmt.Errorf("garbagecollector: resource %d: %w", i, err)
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
	// The graph is fed by handlers on informers Run acquires for the
	// resources: both queues' workers wait for them to sync.
	var err1, err2 error
	gc.toDelete, err1 = controller.New("garbage_collector_attempt_to_delete", withoutResult(gc.attemptToDelete), opts.Controller,
		controller.WaitFor[types.UID](gc.initialSynced))
	gc.toOrphan, err2 = controller.New("garbage_collector_attempt_to_orphan", withoutResult(gc.attemptToOrphan), opts.Controller,
		controller.WaitFor[types.UID](gc.initialSynced))
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("garbagecollector: %w", err)
	}
	return gc, nil
}

// subscribeInitial subscribes to the resources given to New, as Run
// begins; initialSynced then reports whether their informers have synced.
func (gc *GarbageCollector) subscribeInitial() error {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	for _, r := range gc.byGVK {
		m, err := gc.subscribe(r)
		if err != nil {
			return err
		}
		gc.monitors[r.GVR] = m
		gc.synced = append(gc.synced, m.hasSynced)
	}
	return nil
}

// initialSynced reports whether the informers of the resources given to
// New have synced; the queues' workers start once they have.
func (gc *GarbageCollector) initialSynced() bool {
	for _, f := range gc.synced {
		if !f() {
			return false
		}
	}
	return true
}

// withoutResult is the sync handler of an attempt, which asks for a later
// look only at a virtual node no informer has shown (notObserved): what
// it waits for otherwise, an informer event brings.
func withoutResult(attempt func(context.Context, types.UID) error) controller.SyncHandler[types.UID] {
	return func(ctx context.Context, uid types.UID) (controller.Result, error) {
		err := attempt(ctx, uid)
		var later notObserved
		if errors.As(err, &later) {
			return controller.Result{RequeueAfter: later.after}, nil
		}
		return controller.Result{}, err
	}
}

// valid checks that r names a resource and the kind of its objects.
func valid(r Resource) error {
	if r.GVR.Resource == "" || r.GVR.Version == "" || r.GVK.Kind == "" || r.GVK.Version == "" {
		return fmt.Errorf("needs a GVR and a GVK: %+v", r)
	}
	return nil
}

// subscribe connects a feed of r's events to the graph through r's
// Subscriber.
func (gc *GarbageCollector) subscribe(r *Resource) (*monitor, error) {
	sub := r.Subscribe
	if sub == nil {
		sub = Metadata()
	}
	f := &feed{res: r}
	hasSynced, release, err := sub(gc.factory, r.GVR, handler{g: gc.graph, feed: f})
	if err != nil {
		return nil, err
	}
	return &monitor{res: r, feed: f, hasSynced: hasSynced, release: release}, nil
}

// release gives up every informer registration.
func (gc *GarbageCollector) release() {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	for gvr, m := range gc.monitors {
		m.release()
		delete(gc.monitors, gvr)
	}
}

// Run acquires the informers of the resources and registers the
// collector's handlers on them, starts the factory's informers that are
// not running yet, waits for the collector's to sync, and works both
// queues until ctx ends; it then drains the queues, stops the workers,
// gives up its informers and returns. It returns an error when called
// twice, when an informer cannot be subscribed to, or when ctx ends before
// the caches sync.
func (gc *GarbageCollector) Run(ctx context.Context) error {
	if !gc.ran.CompareAndSwap(false, true) {
		return errors.New("garbagecollector: Run called twice")
	}
	defer gc.release()
	if err := gc.subscribeInitial(); err != nil {
		return err
	}
	gc.factory.Start(ctx)
	var wg sync.WaitGroup
	var errDelete, errOrphan error
	wg.Go(func() { errDelete = gc.toDelete.Run(ctx) })
	wg.Go(func() { errOrphan = gc.toOrphan.Run(ctx) })
	if gc.discover != nil {
		wg.Go(func() { gc.resyncLoop(ctx) })
	}
	wg.Wait()
	return errors.Join(errDelete, errOrphan)
}

// Rediscover asks a collector with Options.Discover to re-sync what it
// watches from Discover now rather than at the next period: whoever knows
// that the served resources changed (a CustomResourceDefinition was
// established or deleted) says so, and the collector follows at once.
// It does not wait; requests made before the resync begins make one, and
// one made before Run is acted on as Run starts. It does nothing without
// Discover.
func (gc *GarbageCollector) Rediscover() {
	select {
	case gc.rediscover <- struct{}{}:
	default:
	}
}

// rediscoverAgain is when a resync Rediscover asked for is made once more:
// as kube-apiserver, the API server serves a definition's resources only
// once the status write that makes it Established is stored, so the
// discovery the write's event asks for may come a moment too early.
const rediscoverAgain = time.Second

// resyncLoop re-syncs the monitors from Discover every period, and when
// Rediscover asks (then once more rediscoverAgain later), until ctx ends.
func (gc *GarbageCollector) resyncLoop(ctx context.Context) {
	t := time.NewTicker(gc.period)
	defer t.Stop()
	var again <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-gc.rediscover:
			// The period starts again from this resync.
			t.Reset(gc.period)
			again = time.After(rediscoverAgain)
		case <-again:
			again = nil
		}
		if err := gc.resync(ctx); err != nil && ctx.Err() == nil {
			gc.log.Warn("resources not re-synced; watching the same as before", "err", err)
		}
	}
}

// resync makes the monitors those of the resources Discover names: it
// subscribes to the new ones, starting their informers, and stops those
// no longer named. A resource whose kind or scope changed under the same
// GVR is replaced. Of two resources of one kind the first is kept.
func (gc *GarbageCollector) resync(ctx context.Context) error {
	found, err := gc.discover(ctx)
	if err != nil {
		return fmt.Errorf("garbagecollector: discovery: %w", err)
	}
	want := map[schema.GroupVersionResource]Resource{}
	kinds := map[schema.GroupVersionKind]bool{}
	for _, r := range found {
		if err := valid(r); err != nil {
			gc.log.Warn("discovered resource ignored", "err", err)
			continue
		}
		if _, dup := want[r.GVR]; dup || kinds[r.GVK] {
			continue
		}
		want[r.GVR], kinds[r.GVK] = r, true
	}
	gc.mu.RLock()
	var gone []*monitor
	var added []Resource
	for gvr, m := range gc.monitors {
		if r, ok := want[gvr]; !ok || r.GVK != m.res.GVK || r.Namespaced != m.res.Namespaced {
			gone = append(gone, m)
		}
	}
	for gvr, r := range want {
		if m := gc.monitors[gvr]; m == nil || r.GVK != m.res.GVK || r.Namespaced != m.res.Namespaced {
			added = append(added, r)
		}
	}
	gc.mu.RUnlock()
	for _, m := range gone {
		gc.drop(m)
	}
	var errs []error
	for _, r := range added {
		if err := gc.add(r); err != nil {
			errs = append(errs, err)
		}
	}
	if len(gone) > 0 || len(added) > 0 {
		gc.log.Info("resources re-synced", "added", len(added)-len(errs), "removed", len(gone))
		// The informers of the new resources start now.
		gc.factory.Start(ctx)
	}
	return errors.Join(errs...)
}

// add watches r from now on: its kind is located from then on, and the
// owners of its kind that references named before are resolved.
func (gc *GarbageCollector) add(r Resource) error {
	m, err := gc.subscribe(&r)
	if err != nil {
		return err
	}
	gc.mu.Lock()
	if gc.byGVK[r.GVK] != nil {
		// Another resource of the same GVR held the kind: it was dropped
		// just before, unless discovery named the kind twice.
		gc.mu.Unlock()
		m.release()
		return fmt.Errorf("garbagecollector: kind %s already watched", r.GVK)
	}
	gc.monitors[r.GVR] = m
	gc.byGVK[r.GVK] = m.res
	gc.mu.Unlock()
	gc.graph.resolve(m.res)
	gc.log.Info("watching resource", "resource", r.GVR, "kind", r.GVK)
	return nil
}

// drop stops watching m's resource and gives up its informer.
func (gc *GarbageCollector) drop(m *monitor) {
	gc.mu.Lock()
	delete(gc.monitors, m.res.GVR)
	if gc.byGVK[m.res.GVK] == m.res {
		delete(gc.byGVK, m.res.GVK)
	}
	gc.mu.Unlock()
	gc.graph.cut(m.feed)
	m.release()
	gc.log.Info("stopped watching resource", "resource", m.res.GVR, "kind", m.res.GVK)
}

// Watched returns the resources the collector watches now, in no order.
func (gc *GarbageCollector) Watched() []schema.GroupVersionResource {
	gc.mu.RLock()
	defer gc.mu.RUnlock()
	out := make([]schema.GroupVersionResource, 0, len(gc.monitors))
	for gvr := range gc.monitors {
		out = append(out, gvr)
	}
	return out
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
	gc.mu.RLock()
	r := gc.resourceOf(gvk)
	gc.mu.RUnlock()
	if r == nil || (r.Namespaced && depNamespace == "") {
		return objectID{}, false
	}
	id := objectID{res: r, name: ref.Name, uid: ref.UID}
	if r.Namespaced {
		id.namespace = depNamespace
	}
	return id, true
}

// resourceOf is the watched resource of kind gvk or, when that version is
// not the one watched, of the same group and kind at another version (the
// one discovery prefers): the objects of a kind are the same at every
// version, so an owner is present or absent at all of them. Kubernetes'
// collector resolves a reference through its RESTMapper, which knows
// every served version; discovery here names only the preferred one.
// Call with mu held.
func (gc *GarbageCollector) resourceOf(gvk schema.GroupVersionKind) *Resource {
	if r := gc.byGVK[gvk]; r != nil {
		return r
	}
	var found *Resource
	for k, r := range gc.byGVK {
		// The lowest version of several, so that the answer is the same
		// from one call to the next.
		if k.GroupKind() == gvk.GroupKind() && (found == nil || k.Version < found.GVK.Version) {
			found = r
		}
	}
	return found
}

// handler feeds one resource's informer events to the graph.
type handler struct {
	g    *graph
	feed *feed
}

func (h handler) OnAdd(obj cache.Object, _ bool) {
	if obj != nil {
		h.g.upsertFrom(h.feed, obj)
	}
}

func (h handler) OnUpdate(oldObj, newObj cache.Object) {
	if newObj == nil {
		return
	}
	if oldObj != nil && oldObj.GetUID() != newObj.GetUID() {
		// Deleted and recreated under the same name while the informer
		// was not watching: two objects, not one changed.
		h.g.removeFrom(h.feed, oldObj)
	}
	h.g.upsertFrom(h.feed, newObj)
}

// OnDelete forgets obj. A tombstone (finalStateUnknown) carries the last
// state the cache knew, whose UID is all the graph needs.
func (h handler) OnDelete(obj cache.Object, _ bool) {
	if obj != nil {
		h.g.removeFrom(h.feed, obj)
	}
}
