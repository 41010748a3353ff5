package client

import (
	"context"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/resources"
)

// The built-in resources, those read as their Go types, are the resource
// registry's (package resources): every resource it holds is decoded into
// the Go type it states, every other one as *unstructured.Unstructured.
// When the type is known only at run time, from the registry, the client
// of the resource is a Resource[cache.Object] whose codec makes objects of
// that type, which the informer factory's cache.Unerase hands on as T.

// builtin returns the registry's resource gvr, and namespace as that
// resource takes it: "" for a cluster-scoped one.
func builtin(gvr schema.GroupVersionResource, namespace string) (*resources.Resource, string, bool) {
	r, ok := resources.Lookup(gvr)
	if !ok {
		return nil, namespace, false
	}
	if !r.Namespaced {
		namespace = ""
	}
	return r, namespace, true
}

// Get reads one object of any resource: built-in ones as their Go types,
// others as *unstructured.Unstructured. A cluster-scoped built-in resource
// ignores namespace.
func (c *Client) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (cache.Object, error) {
	if r, ns, ok := builtin(gvr, namespace); ok {
		return newResourceOf[cache.Object](c, gvr, ns, r.GoType()).Get(ctx, name, metav1.GetOptions{})
	}
	obj, err := NewUnstructured(c, gvr, namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// IsClusterScoped reports whether gvr is a built-in resource that lives
// outside namespaces.
func IsClusterScoped(gvr schema.GroupVersionResource) bool {
	return resources.IsClusterScoped(gvr)
}

// ListerWatcher makes the client an informers.Source: it returns the
// ListerWatcher of resource gvr in namespace (all when ""), with tweak,
// when not nil, applied to the options of every request. Built-in
// resources are decoded into their Go types (*corev1.Pod for pods), so
// informers of those types get them at no conversion cost; any other
// resource is decoded as *unstructured.Unstructured. A cluster-scoped
// built-in resource ignores namespace. Objects come without
// metadata.managedFields unless Config.KeepManagedFields is set, since the
// factory strips them by default: not decoding them at all saves the
// factory a copy of every object. The objects are for a read-only cache:
// those decoded alike share strings and small maps (labels, annotations,
// resource lists), which a caller must DeepCopy before changing (see
// intern.go).
func (c *Client) ListerWatcher(gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
	if r, ns, ok := builtin(gvr, namespace); ok {
		return forInformer(c, newResourceOf[cache.Object](c, gvr, ns, r.GoType()), tweak)
	}
	return cache.Erase(forInformer(c, NewUnstructured(c, gvr, namespace), tweak))
}

// TypedListerWatcher makes the client an informers.TypedSource: it is
// ListerWatcher with every object decoded into goType, a pointer to a
// struct such as a custom resource's Go type — named as its kind, with
// metav1.TypeMeta and metav1.ObjectMeta embedded and the json tags the
// API's fields have — as NewResource decodes them. A goType that cannot
// hold the resource's objects makes every call fail.
func (c *Client) TypedListerWatcher(gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions), goType reflect.Type) cache.ListerWatcher[cache.Object] {
	if goType == unstructuredType {
		return c.ListerWatcher(gvr, namespace, tweak)
	}
	_, ns, _ := builtin(gvr, namespace)
	return forInformer(c, newResourceOf[cache.Object](c, gvr, ns, goType), tweak)
}

// MetadataListerWatcher makes the client an informers.MetadataSource: it
// is ListerWatcher for the metadata of the objects alone
// (*metav1.PartialObjectMetadata, see NewMetadata), of any resource.
func (c *Client) MetadataListerWatcher(gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
	_, ns, _ := builtin(gvr, namespace)
	return cache.Erase(forInformer(c, NewMetadata(c, gvr, ns), tweak))
}

// forInformer makes r the ListerWatcher of an informer's read-only cache:
// objects sharing what they repeat, without managedFields unless the
// configuration keeps them, and tweak applied to every request.
func forInformer[T cache.Object](c *Client, r *Resource[T], tweak func(*metav1.ListOptions)) cache.ListerWatcher[T] {
	r = r.sharing()
	if !c.keepManaged {
		r = r.WithoutManagedFields()
	}
	var lw cache.ListerWatcher[T] = r
	if tweak != nil {
		lw = tweaked[T]{lw: lw, tweak: tweak}
	}
	return lw
}

// tweaked applies a tweak to the options of every call.
type tweaked[T cache.Object] struct {
	lw    cache.ListerWatcher[T]
	tweak func(*metav1.ListOptions)
}

func (t tweaked[T]) List(ctx context.Context, opts metav1.ListOptions) (*cache.List[T], error) {
	t.tweak(&opts)
	return t.lw.List(ctx, opts)
}

func (t tweaked[T]) Watch(ctx context.Context, opts metav1.ListOptions) (cache.Watcher[T], error) {
	t.tweak(&opts)
	return t.lw.Watch(ctx, opts)
}

func (t tweaked[T]) SupportsWatchList() bool { return cache.SupportsWatchList(t.lw) }
