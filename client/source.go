package client

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
)

// builtin is a resource whose Go type the client knows.
type builtin struct {
	namespaced bool
	lw         func(c *Client, gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object]
	get        func(ctx context.Context, c *Client, gvr schema.GroupVersionResource, ns, name string) (cache.Object, error)
}

func typed[T cache.Object](namespaced bool) builtin {
	return builtin{namespaced: namespaced, lw: erasedLW[T], get: erasedGet[T]}
}

func erasedGet[T cache.Object](ctx context.Context, c *Client, gvr schema.GroupVersionResource, ns, name string) (cache.Object, error) {
	obj, err := NewResource[T](c, gvr, ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// Get reads one object of any resource: built-in ones as their Go types,
// others as *unstructured.Unstructured. A cluster-scoped built-in resource
// ignores namespace.
func (c *Client) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (cache.Object, error) {
	if b, ok := builtins[gvr]; ok {
		if !b.namespaced {
			namespace = ""
		}
		return b.get(ctx, c, gvr, namespace, name)
	}
	return erasedGet[*unstructured.Unstructured](ctx, c, gvr, namespace, name)
}

// erasedLW is the ListerWatcher of T erased as the factory wants it: the
// factory's Unerase[T] then gets the typed one back, at no cost per object.
func erasedLW[T cache.Object](c *Client, gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
	r := NewResource[T](c, gvr, ns).sharing()
	if !c.keepManaged {
		r = r.WithoutManagedFields()
	}
	var lw cache.ListerWatcher[T] = r
	if tweak != nil {
		lw = tweaked[T]{lw: lw, tweak: tweak}
	}
	return cache.Erase(lw)
}

// builtins are the resources served with their Go types; the others are
// served as unstructured objects.
var builtins = map[schema.GroupVersionResource]builtin{
	corev1.SchemeGroupVersion.WithResource("pods"):                   typed[*corev1.Pod](true),
	corev1.SchemeGroupVersion.WithResource("replicationcontrollers"): typed[*corev1.ReplicationController](true),
	corev1.SchemeGroupVersion.WithResource("services"):               typed[*corev1.Service](true),
	//lint:ignore SA1019 core/v1 Endpoints are still served and read.
	corev1.SchemeGroupVersion.WithResource("endpoints"):              typed[*corev1.Endpoints](true),
	corev1.SchemeGroupVersion.WithResource("events"):                 typed[*corev1.Event](true),
	corev1.SchemeGroupVersion.WithResource("configmaps"):             typed[*corev1.ConfigMap](true),
	corev1.SchemeGroupVersion.WithResource("secrets"):                typed[*corev1.Secret](true),
	corev1.SchemeGroupVersion.WithResource("serviceaccounts"):        typed[*corev1.ServiceAccount](true),
	corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"): typed[*corev1.PersistentVolumeClaim](true),
	corev1.SchemeGroupVersion.WithResource("namespaces"):             typed[*corev1.Namespace](false),
	corev1.SchemeGroupVersion.WithResource("nodes"):                  typed[*corev1.Node](false),
	corev1.SchemeGroupVersion.WithResource("persistentvolumes"):      typed[*corev1.PersistentVolume](false),
	appsv1.SchemeGroupVersion.WithResource("deployments"):            typed[*appsv1.Deployment](true),
	appsv1.SchemeGroupVersion.WithResource("replicasets"):            typed[*appsv1.ReplicaSet](true),
	appsv1.SchemeGroupVersion.WithResource("statefulsets"):           typed[*appsv1.StatefulSet](true),
	appsv1.SchemeGroupVersion.WithResource("daemonsets"):             typed[*appsv1.DaemonSet](true),
	batchv1.SchemeGroupVersion.WithResource("jobs"):                  typed[*batchv1.Job](true),
	batchv1.SchemeGroupVersion.WithResource("cronjobs"):              typed[*batchv1.CronJob](true),
	coordinationv1.SchemeGroupVersion.WithResource("leases"):         typed[*coordinationv1.Lease](true),
	discoveryv1.SchemeGroupVersion.WithResource("endpointslices"):    typed[*discoveryv1.EndpointSlice](true),
	rbacv1.SchemeGroupVersion.WithResource("roles"):                  typed[*rbacv1.Role](true),
	rbacv1.SchemeGroupVersion.WithResource("rolebindings"):           typed[*rbacv1.RoleBinding](true),
	rbacv1.SchemeGroupVersion.WithResource("clusterroles"):           typed[*rbacv1.ClusterRole](false),
	rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"):    typed[*rbacv1.ClusterRoleBinding](false),
}

// IsClusterScoped reports whether gvr is a built-in resource that lives
// outside namespaces.
func IsClusterScoped(gvr schema.GroupVersionResource) bool {
	b, ok := builtins[gvr]
	return ok && !b.namespaced
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
	if b, ok := builtins[gvr]; ok {
		if !b.namespaced {
			namespace = ""
		}
		return b.lw(c, gvr, namespace, tweak)
	}
	return erasedLW[*unstructured.Unstructured](c, gvr, namespace, tweak)
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
