package garbagecollector

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
)

// Client is the collector's access to the API server: reads of the live
// state it must not take from a possibly stale cache, deletes and metadata
// patches. Errors must be recognisable by k8s.io/apimachinery/pkg/api/errors
// (IsNotFound, IsConflict). A namespace of "" addresses a cluster-scoped
// object.
type Client interface {
	// Get reads the object called name.
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (cache.Object, error)
	// Delete deletes the object called name with opts' preconditions and
	// propagation policy.
	Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error
	// Patch applies data, a patch of type pt, to the object called name.
	Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte) error
}

// NewClient returns the Client that talks to an API server through c.
func NewClient(c *client.Client) Client { return restClient{c} }

// restClient adapts the REST client: Get is its own, writes go through an
// unstructured Resource, which serves every resource.
type restClient struct{ *client.Client }

func (r restClient) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	return client.NewUnstructured(r.Client, gvr, namespace).Delete(ctx, name, opts)
}

func (r restClient) Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte) error {
	_, err := client.NewUnstructured(r.Client, gvr, namespace).Patch(ctx, name, pt, data, metav1.PatchOptions{})
	return err
}
