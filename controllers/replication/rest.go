package replication

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
)

// REST is the manager's API access over a REST client: it is both the
// RCStatusClient and the controller.PodClient that a RealPodControl
// needs.
type REST struct {
	rcs  *client.Resource[*corev1.ReplicationController]
	pods *client.Resource[*corev1.Pod]
}

var (
	_ RCStatusClient       = (*REST)(nil)
	_ controller.PodClient = (*REST)(nil)
)

// NewClient returns the manager's API access through c.
func NewClient(c *client.Client) *REST {
	return &REST{
		rcs:  client.For[*corev1.ReplicationController](c, ""),
		pods: client.For[*corev1.Pod](c, ""),
	}
}

// Get reads the RC from the server.
func (r *REST) Get(ctx context.Context, namespace, name string) (*corev1.ReplicationController, error) {
	return r.rcs.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// UpdateStatus writes the RC's status subresource.
func (r *REST) UpdateStatus(ctx context.Context, rc *corev1.ReplicationController) (*corev1.ReplicationController, error) {
	return r.rcs.Namespace(rc.Namespace).UpdateStatus(ctx, rc, metav1.UpdateOptions{})
}

// CreatePod creates the pod in namespace.
func (r *REST) CreatePod(ctx context.Context, namespace string, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error) {
	return r.pods.Namespace(namespace).Create(ctx, pod, opts)
}

// DeletePod deletes the pod namespace/name.
func (r *REST) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return r.pods.Namespace(namespace).Delete(ctx, name, opts)
}

// PatchPod patches the pod namespace/name.
func (r *REST) PatchPod(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*corev1.Pod, error) {
	return r.pods.Namespace(namespace).Patch(ctx, name, pt, data, opts)
}
