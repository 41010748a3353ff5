package controllermanager

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/controllers/replicaset"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/leaderelection"
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

// newReplicaSetManager makes the ReplicaSet controller over kind's objects
// (the ReplicationManager for RCs), its events recorded as component, its
// writes made with the client of controller name.
func newReplicaSetManager[T cache.Object](d deps, name string, kind replicaset.Kind[T], component string, opts replicaset.Options) (*replicaset.Manager[T], error) {
	api := replicaset.NewClient[T](d.clientOf(name))
	rec := d.events.NewRecorder(component)
	opts.Controller = d.options(component, opts.Controller)
	if opts.Recorder == nil {
		opts.Recorder = rec
	}
	pc := &controller.RealPodControl{Client: api, Recorder: rec, Logger: opts.Controller.Logger}
	return replicaset.New(kind, informers.For[*corev1.Pod](d.factory), informers.For[T](d.factory), api, pc, opts)
}
