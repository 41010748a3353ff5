package endpoints

//lint:file-ignore SA1019 core/v1 Endpoints are what this controller maintains; EndpointSlices are not served yet.

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
)

// restClient is the Client over the REST client.
type restClient struct {
	eps *client.Resource[*corev1.Endpoints]
}

// NewClient returns the Client that writes Endpoints through c.
func NewClient(c *client.Client) Client {
	return restClient{eps: client.For[*corev1.Endpoints](c, "")}
}

func (e restClient) Create(ctx context.Context, ep *corev1.Endpoints) (*corev1.Endpoints, error) {
	return e.eps.Namespace(ep.Namespace).Create(ctx, ep, metav1.CreateOptions{})
}

func (e restClient) Update(ctx context.Context, ep *corev1.Endpoints) (*corev1.Endpoints, error) {
	return e.eps.Namespace(ep.Namespace).Update(ctx, ep, metav1.UpdateOptions{})
}

func (e restClient) Delete(ctx context.Context, namespace, name string) error {
	return e.eps.Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}
