package podlifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
)

// restClient is the Client over the REST client.
type restClient struct {
	pods   *client.Resource[*corev1.Pod]
	nodes  *client.Resource[*corev1.Node]
	leases *client.Resource[*coordinationv1.Lease]
	// noBinding is set once the server answered pods/binding with a 404
	// that names no pod: it lacks the subresource, and binds go through
	// an update of spec.nodeName instead.
	noBinding atomic.Bool
}

// NewClient returns the Client that talks to an API server through c.
func NewClient(c *client.Client) Client {
	return &restClient{
		pods:   client.For[*corev1.Pod](c, ""),
		nodes:  client.For[*corev1.Node](c, ""),
		leases: client.For[*coordinationv1.Lease](c, corev1.NamespaceNodeLease),
	}
}

// Bind posts a Binding to pods/{name}/binding, as a scheduler does. A
// server without the subresource gets spec.nodeName set by an update at
// the pod's current resourceVersion instead, which is refused with a
// Conflict if the pod changed or was bound meanwhile.
func (p *restClient) Bind(ctx context.Context, namespace, name string, uid types.UID, node string) error {
	pods := p.pods.Namespace(namespace)
	if !p.noBinding.Load() {
		b := &corev1.Binding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}
		err := pods.CreateSubresource(ctx, name, "binding", b, metav1.CreateOptions{})
		if !isMissingRoute(err) {
			return err
		}
		p.noBinding.Store(true)
	}
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pod.UID != uid {
		return apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	if pod.Spec.NodeName != "" {
		return apierrors.NewConflict(corev1.Resource("pods"), name, fmt.Errorf("pod is already bound to %q", pod.Spec.NodeName))
	}
	pod.Spec.NodeName = node
	_, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
	return err
}

// isMissingRoute tells a 404 for the path (the server lacks the
// subresource) from a 404 for the pod, which names it in its details.
func isMissingRoute(err error) bool {
	var se *client.StatusError
	if !errors.As(err, &se) || !apierrors.IsNotFound(err) {
		return false
	}
	d := se.ErrStatus.Details
	return d == nil || d.Name == ""
}

func (p *restClient) UpdateStatus(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	return p.pods.Namespace(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

func (p *restClient) Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return p.pods.Namespace(namespace).Delete(ctx, name, opts)
}

func (p *restClient) Nodes() Objects[*corev1.Node] { return resourceObjects[*corev1.Node]{p.nodes} }

func (p *restClient) Leases() Objects[*coordinationv1.Lease] {
	return resourceObjects[*coordinationv1.Lease]{p.leases}
}

// resourceObjects are Objects through the REST client.
type resourceObjects[T cache.Object] struct{ r *client.Resource[T] }

func (o resourceObjects[T]) Get(ctx context.Context, name string) (T, error) {
	return o.r.Get(ctx, name, metav1.GetOptions{})
}

func (o resourceObjects[T]) Create(ctx context.Context, obj T) (T, error) {
	return o.r.Create(ctx, obj, metav1.CreateOptions{})
}

func (o resourceObjects[T]) Update(ctx context.Context, obj T) (T, error) {
	return o.r.Update(ctx, obj, metav1.UpdateOptions{})
}

func (o resourceObjects[T]) UpdateStatus(ctx context.Context, obj T) (T, error) {
	return o.r.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
}
