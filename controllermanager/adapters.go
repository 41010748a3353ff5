package controllermanager

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/leaderelection"
	"github.com/listwatch/listwatch/record"
)

// The adapters below fit the REST client to the small interfaces of the
// manager's own parts, leader election and events; each controller
// package has its own NewClient.

// leaseClient is leaderelection.LeaseClient over the REST client.
type leaseClient struct {
	leases *client.Resource[*coordinationv1.Lease]
}

var _ leaderelection.LeaseClient = leaseClient{}

func newLeaseClient(c *client.Client) leaseClient {
	return leaseClient{leases: client.For[*coordinationv1.Lease](c, "")}
}

func (l leaseClient) Get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	return l.leases.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (l leaseClient) Create(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return l.leases.Namespace(lease.Namespace).Create(ctx, lease, metav1.CreateOptions{})
}

func (l leaseClient) Update(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return l.leases.Namespace(lease.Namespace).Update(ctx, lease, metav1.UpdateOptions{})
}

// eventSink is record.Sink over the REST client.
type eventSink struct {
	events *client.Resource[*corev1.Event]
}

var _ record.Sink = eventSink{}

func newEventSink(c *client.Client) eventSink {
	return eventSink{events: client.For[*corev1.Event](c, "")}
}

func (s eventSink) Create(ctx context.Context, ev *corev1.Event) (*corev1.Event, error) {
	return s.events.Namespace(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
}

func (s eventSink) Patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) (*corev1.Event, error) {
	return s.events.Namespace(namespace).Patch(ctx, name, pt, data, metav1.PatchOptions{})
}
