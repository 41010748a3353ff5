package kubeadapt

//lint:file-ignore SA1019 core/v1 Endpoints are what kube's endpoints and mirroring controllers read.

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/listwatch/listwatch/cache"
)

// Informer is client-go's SharedIndexInformer over a listwatch informer,
// for kube controllers that take typed informers and use them only as
// kube's NewController functions do: to add event handlers and to wait
// for the cache (AddEventHandler and its variants, RemoveEventHandler,
// HasSynced, LastSyncResourceVersion, IsStopped). The informer's life
// (Run, transforms, indexers, the store) is listwatch's factory's: the
// other methods of the interface are not served and must not be called.
type Informer[T cache.Object] struct {
	// unserved holds the methods kube's controllers here never call; it
	// is nil.
	clientcache.SharedIndexInformer
	inf cache.Informer[T]
}

// NewInformer returns the client-go informer over inf.
func NewInformer[T cache.Object](inf cache.Informer[T]) *Informer[T] {
	return &Informer[T]{inf: inf}
}

// registration is client-go's handler registration over listwatch's.
type registration struct {
	clientcache.ResourceEventHandlerRegistration // HasSyncedChecker: not served
	reg                                          cache.ResourceEventHandlerRegistration
}

func (r registration) HasSynced() bool { return r.reg.HasSynced() }

// AddEventHandler registers h: adds, updates and deletes as listwatch's
// informer delivers them, a delete whose final state is unknown as
// client-go's DeletedFinalStateUnknown.
func (i *Informer[T]) AddEventHandler(h clientcache.ResourceEventHandler) (clientcache.ResourceEventHandlerRegistration, error) {
	reg, err := i.inf.AddEventHandler(cache.ResourceEventHandlerFuncs[T]{
		AddFunc:    func(obj T, initial bool) { h.OnAdd(obj, initial) },
		UpdateFunc: func(old, cur T) { h.OnUpdate(old, cur) },
		DeleteFunc: func(obj T, finalStateUnknown bool) {
			if !finalStateUnknown {
				h.OnDelete(obj)
				return
			}
			key, _ := cache.MetaNamespaceKeyFunc(obj)
			h.OnDelete(clientcache.DeletedFinalStateUnknown{Key: key, Obj: obj})
		},
	})
	if err != nil {
		return nil, err
	}
	return registration{reg: reg}, nil
}

// AddEventHandlerWithResyncPeriod registers h; resyncs are the factory's.
func (i *Informer[T]) AddEventHandlerWithResyncPeriod(h clientcache.ResourceEventHandler, _ time.Duration) (clientcache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(h)
}

// AddEventHandlerWithOptions registers h; resyncs are the factory's.
func (i *Informer[T]) AddEventHandlerWithOptions(h clientcache.ResourceEventHandler, _ clientcache.HandlerOptions) (clientcache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(h)
}

// RemoveEventHandler unregisters the handler of a registration this
// informer returned.
func (i *Informer[T]) RemoveEventHandler(handle clientcache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(registration)
	if !ok {
		return errors.New("kubeadapt: not a registration of this informer")
	}
	return i.inf.RemoveEventHandler(r.reg)
}

// HasSynced reports whether the cache holds the first list.
func (i *Informer[T]) HasSynced() bool { return i.inf.HasSynced() }

// LastSyncResourceVersion is the resourceVersion the cache reflects, when
// the informer states it; "" otherwise.
func (i *Informer[T]) LastSyncResourceVersion() string {
	if v, ok := i.inf.(interface{ LastStoreSyncResourceVersion() string }); ok {
		return v.LastStoreSyncResourceVersion()
	}
	return ""
}

// IsStopped reports false: the informer runs as long as its factory,
// which outlives the controllers using it.
func (i *Informer[T]) IsStopped() bool { return false }

// The typed informers kube's NewController functions take.
var (
	_ coreinformers.ServiceInformer            = ServiceInformer{}
	_ coreinformers.EndpointsInformer          = EndpointsInformer{}
	_ discoveryinformers.EndpointSliceInformer = EndpointSliceInformer{}
)

// ServiceInformer is client-go's ServiceInformer over inf.
type ServiceInformer struct {
	Inf cache.Informer[*corev1.Service]
}

// Informer returns the shared informer.
func (s ServiceInformer) Informer() clientcache.SharedIndexInformer { return NewInformer(s.Inf) }

// Lister returns the lister of the informer's cache.
func (s ServiceInformer) Lister() corelisters.ServiceLister {
	return ServiceLister{cache.NewLister(s.Inf.GetIndexer(), corev1.Resource("services"))}
}

// EndpointsInformer is client-go's EndpointsInformer over inf.
type EndpointsInformer struct {
	Inf cache.Informer[*corev1.Endpoints]
}

// Informer returns the shared informer.
func (s EndpointsInformer) Informer() clientcache.SharedIndexInformer { return NewInformer(s.Inf) }

// Lister returns the lister of the informer's cache.
func (s EndpointsInformer) Lister() corelisters.EndpointsLister {
	return EndpointsLister{cache.NewLister(s.Inf.GetIndexer(), corev1.Resource("endpoints"))}
}

// EndpointSliceInformer is client-go's EndpointSliceInformer over inf.
type EndpointSliceInformer struct {
	Inf cache.Informer[*discoveryv1.EndpointSlice]
}

// Informer returns the shared informer.
func (s EndpointSliceInformer) Informer() clientcache.SharedIndexInformer { return NewInformer(s.Inf) }

// Lister returns the lister of the informer's cache.
func (s EndpointSliceInformer) Lister() discoverylisters.EndpointSliceLister {
	return EndpointSliceLister{cache.NewLister(s.Inf.GetIndexer(), discoveryv1.Resource("endpointslices"))}
}
