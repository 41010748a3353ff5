package resourcequota

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcache "k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/quota/v1/install"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
)

// Counted is a resource whose objects quotas count: the informer they are
// read from and whose changes replenish quotas. Make one with CountedBy.
type Counted struct {
	GVR          schema.GroupVersionResource
	lister       clientcache.GenericLister
	metadataOnly bool
	source       func(replenish func(gr schema.GroupResource, namespace string)) controller.Source[string]
}

// updateFilter is kube's: which updates lower an object's usage (a pod
// that finished, a service whose type changed, a claim whose request
// shrank).
var updateFilter = install.DefaultUpdateFilter()

// CountedBy returns the Counted of resource gvr, whose objects inf holds.
func CountedBy[T cache.Object](gvr schema.GroupVersionResource, inf cache.Informer[T]) Counted {
	_, metadataOnly := any(*new(T)).(*metav1.PartialObjectMetadata)
	return Counted{
		GVR:          gvr,
		lister:       genericLister[T]{cache.NewLister(inf.GetIndexer(), gvr.GroupResource())},
		metadataOnly: metadataOnly,
		source: func(replenish func(schema.GroupResource, string)) controller.Source[string] {
			return controller.Handle[string](inf, cache.ResourceEventHandlerFuncs[T]{
				UpdateFunc: func(old, cur T) {
					if !metadataOnly && updateFilter(gvr, any(old), any(cur)) {
						replenish(gvr.GroupResource(), cur.GetNamespace())
					}
				},
				DeleteFunc: func(obj T, _ bool) { replenish(gvr.GroupResource(), obj.GetNamespace()) },
			})
		},
	}
}

// genericLister is the lister kube's evaluators read: a cache.Lister
// whose objects are runtime.Objects. They only read them.
type genericLister[T cache.Object] struct{ l cache.Lister[T] }

func (g genericLister[T]) List(selector labels.Selector) ([]runtime.Object, error) {
	items, err := g.l.List(selector)
	return objects(items), err
}

func (g genericLister[T]) Get(name string) (runtime.Object, error) { return asObject(g.l.Get(name)) }

func (g genericLister[T]) ByNamespace(namespace string) clientcache.GenericNamespaceLister {
	return genericNamespaceLister[T]{g.l.Namespace(namespace)}
}

type genericNamespaceLister[T cache.Object] struct{ l cache.NamespaceLister[T] }

func (g genericNamespaceLister[T]) List(selector labels.Selector) ([]runtime.Object, error) {
	items, err := g.l.List(selector)
	return objects(items), err
}

func (g genericNamespaceLister[T]) Get(name string) (runtime.Object, error) {
	return asObject(g.l.Get(name))
}

// asObject keeps a failed Get's nil from becoming a non-nil interface.
func asObject[T cache.Object](obj T, err error) (runtime.Object, error) {
	if err != nil {
		return nil, err
	}
	return obj, nil
}

func objects[T cache.Object](items []T) []runtime.Object {
	out := make([]runtime.Object, len(items))
	for i, o := range items {
		out[i] = o
	}
	return out
}
