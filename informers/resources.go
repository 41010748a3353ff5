package informers

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/resources"
)

// ErrNotBuiltin is the error of the informer For returns for a Go type
// that is not that of a built-in resource in the resource registry
// (package resources).
var ErrNotBuiltin = errors.New("not the Go type of a built-in resource")

// For returns the shared informer of the built-in resource whose
// objects have Go type T (For[*appsv1.ReplicaSet] is apps/v1 replicasets),
// the resource found in the registry from T alone: it is InformerFor with
// that resource. Custom resources and unstructured objects take
// InformerFor with their GroupVersionResource. For a type the registry
// does not know, the informer's lists fail with ErrNotBuiltin, as those of
// a resource the source cannot serve fail: its SyncStatus tells, and
// WaitForCacheSync reports it (under the zero GroupVersionResource) as not
// synced.
//
// Like InformerFor, it may be called any number of times: every call
// returns the same informer.
func For[T cache.Object](f *SharedInformerFactory) *Informer[T] {
	r, ok := resources.For[T]()
	if !ok {
		err := fmt.Errorf("informers: %s: %w; name its resource with InformerFor", reflect.TypeFor[T](), ErrNotBuiltin)
		inf, _ := informerOf[T](f, schema.GroupVersionResource{}, failing{err}, false)
		return inf
	}
	return InformerFor[T](f, r.GVR())
}

// failing is the ListerWatcher whose every call fails with err.
type failing struct{ err error }

func (l failing) List(context.Context, metav1.ListOptions) (*cache.List[cache.Object], error) {
	return nil, l.err
}

func (l failing) Watch(context.Context, metav1.ListOptions) (cache.Watcher[cache.Object], error) {
	return nil, l.err
}

// MetadataFor returns the shared informer of the metadata of
// resource gvr's objects, any resource's: InformerFor of
// *metav1.PartialObjectMetadata. Its cache holds each object's metadata
// alone, which is all some controllers (the garbage collector) read.
func MetadataFor(f *SharedInformerFactory, gvr schema.GroupVersionResource) *Informer[*metav1.PartialObjectMetadata] {
	return InformerFor[*metav1.PartialObjectMetadata](f, gvr)
}
