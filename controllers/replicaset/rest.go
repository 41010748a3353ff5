package replicaset

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
)

// REST is the manager's API access over a REST client for objects of Go
// type T (a built-in resource the client knows, *appsv1.ReplicaSet or
// *corev1.ReplicationController): it is both the StatusClient and the
// controller.PodClient that a RealPodControl needs.
type REST[T cache.Object] struct {
	objs *client.Resource[T]
	pods *client.Resource[*corev1.Pod]
}

var _ controller.PodClient = (*REST[*corev1.ReplicationController])(nil)

// NewClient returns the manager's API access through c.
func NewClient[T cache.Object](c *client.Client) *REST[T] {
	return &REST[T]{
		objs: client.For[T](c, ""),
		pods: client.For[*corev1.Pod](c, ""),
	}
}

// Get reads the object from the server.
func (r *REST[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	return r.objs.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// UpdateStatus writes the object's status subresource.
func (r *REST[T]) UpdateStatus(ctx context.Context, obj T) (T, error) {
	return r.objs.Namespace(obj.GetNamespace()).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
}

// CreatePod creates the pod in namespace.
func (r *REST[T]) CreatePod(ctx context.Context, namespace string, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error) {
	return r.pods.Namespace(namespace).Create(ctx, pod, opts)
}

// DeletePod deletes the pod namespace/name.
func (r *REST[T]) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return r.pods.Namespace(namespace).Delete(ctx, name, opts)
}

// PatchPod patches the pod namespace/name.
func (r *REST[T]) PatchPod(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*corev1.Pod, error) {
	return r.pods.Namespace(namespace).Patch(ctx, name, pt, data, opts)
}
