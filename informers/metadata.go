package informers

import (
	"context"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/cache"
)

// Go types the factory gives a meaning of their own.
var (
	metadataType     = reflect.TypeFor[*metav1.PartialObjectMetadata]()
	unstructuredType = reflect.TypeFor[*unstructured.Unstructured]()
)

// metadataOnly is the metadata-only ListerWatcher made of a Source that is
// not a MetadataSource: each object it lists or watches is replaced by its
// metadata.
type metadataOnly struct {
	lw cache.ListerWatcher[cache.Object]
}

func (m metadataOnly) List(ctx context.Context, opts metav1.ListOptions) (*cache.List[cache.Object], error) {
	l, err := m.lw.List(ctx, opts)
	if err != nil || l == nil {
		return l, err
	}
	out := *l
	out.Items = make([]cache.Object, len(l.Items))
	for i, obj := range l.Items {
		out.Items[i] = metadataOf(obj)
	}
	return &out, nil
}

func (m metadataOnly) Watch(ctx context.Context, opts metav1.ListOptions) (cache.Watcher[cache.Object], error) {
	w, err := m.lw.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return metadataWatcher{w}, nil
}

type metadataWatcher struct{ w cache.Watcher[cache.Object] }

func (m metadataWatcher) Next() (cache.Event[cache.Object], error) {
	ev, err := m.w.Next()
	ev.Object = metadataOf(ev.Object)
	return ev, err
}

func (m metadataWatcher) Stop() { m.w.Stop() }

// metadataOf returns obj's metadata as a PartialObjectMetadata, which
// shares obj's maps and slices: the objects of an informer's cache are
// read-only. nil stays nil.
func metadataOf(obj cache.Object) cache.Object {
	switch o := obj.(type) {
	case nil:
		return nil
	case *metav1.PartialObjectMetadata:
		return o
	}
	if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	m := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{
			Name:                       obj.GetName(),
			GenerateName:               obj.GetGenerateName(),
			Namespace:                  obj.GetNamespace(),
			UID:                        obj.GetUID(),
			ResourceVersion:            obj.GetResourceVersion(),
			Generation:                 obj.GetGeneration(),
			CreationTimestamp:          obj.GetCreationTimestamp(),
			DeletionTimestamp:          obj.GetDeletionTimestamp(),
			DeletionGracePeriodSeconds: obj.GetDeletionGracePeriodSeconds(),
			Labels:                     obj.GetLabels(),
			Annotations:                obj.GetAnnotations(),
			OwnerReferences:            obj.GetOwnerReferences(),
			Finalizers:                 obj.GetFinalizers(),
			ManagedFields:              obj.GetManagedFields(),
		},
	}
	return m
}

func (m metadataOnly) SupportsWatchList() bool { return cache.SupportsWatchList(m.lw) }
