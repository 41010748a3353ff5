package namespace

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/client"
)

// Client is the controller's access to the API server. Errors must be
// recognisable by k8s.io/apimachinery/pkg/api/errors (IsNotFound,
// IsConflict, IsMethodNotSupported).
type Client interface {
	// ServerResources lists the top-level resources the server serves,
	// one version per group, as its discovery documents describe them.
	ServerResources(ctx context.Context) ([]client.APIResource, error)
	// GetNamespace reads a namespace from the server.
	GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error)
	// UpdateNamespaceStatus writes a namespace's status.
	UpdateNamespaceStatus(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error)
	// FinalizeNamespace writes a namespace's spec.finalizers through its
	// finalize subresource.
	FinalizeNamespace(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error)
	// ListPods lists the pods of a namespace.
	ListPods(ctx context.Context, namespace string) ([]*corev1.Pod, error)
	// ListMetadata lists the metadata of resource gvr's objects in a
	// namespace.
	ListMetadata(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]*metav1.PartialObjectMetadata, error)
	// Delete deletes one object of resource gvr.
	Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error
}

// listPageSize bounds each page of the lists the controller reads.
const listPageSize = 500

// NewClient returns the Client that talks to an API server through c.
func NewClient(c *client.Client) Client {
	return restClient{
		c:          c,
		namespaces: client.For[*corev1.Namespace](c, ""),
		pods:       client.For[*corev1.Pod](c, ""),
	}
}

// restClient adapts the REST client: typed clients for namespaces and
// pods, metadata-only ones for everything the controller lists and
// deletes, custom resources included.
type restClient struct {
	c          *client.Client
	namespaces *client.Resource[*corev1.Namespace]
	pods       *client.Resource[*corev1.Pod]
}

func (r restClient) ServerResources(ctx context.Context) ([]client.APIResource, error) {
	return r.c.ServerResources(ctx)
}

func (r restClient) GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return r.namespaces.Get(ctx, name, metav1.GetOptions{})
}

func (r restClient) UpdateNamespaceStatus(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	return r.namespaces.UpdateStatus(ctx, ns, metav1.UpdateOptions{})
}

func (r restClient) FinalizeNamespace(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	return r.namespaces.Finalize(ctx, ns, metav1.UpdateOptions{})
}

func (r restClient) ListPods(ctx context.Context, namespace string) ([]*corev1.Pod, error) {
	l, err := r.pods.Namespace(namespace).ListAll(ctx, metav1.ListOptions{Limit: listPageSize})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (r restClient) ListMetadata(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]*metav1.PartialObjectMetadata, error) {
	l, err := client.NewMetadata(r.c, gvr, namespace).ListAll(ctx, metav1.ListOptions{Limit: listPageSize})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (r restClient) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	return client.NewMetadata(r.c, gvr, namespace).Delete(ctx, name, opts)
}
