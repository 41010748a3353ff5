package replication

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/controllers/replicaset"
)

// Manager is the ReplicationManager: the ReplicaSet controller over
// ReplicationControllers.
type Manager = replicaset.Manager[*corev1.ReplicationController]

// Options tune a Manager. The zero value works.
type Options = replicaset.Options

// RCStatusClient is what the manager needs of an API client for
// ReplicationControllers.
type RCStatusClient = replicaset.StatusClient[*corev1.ReplicationController]

// REST is the manager's API access over a REST client: it is both the
// RCStatusClient and the controller.PodClient that a RealPodControl
// needs.
type REST = replicaset.REST[*corev1.ReplicationController]

// DefaultBurstReplicas caps the creations or deletions of one sync.
const DefaultBurstReplicas = replicaset.DefaultBurstReplicas

// DefaultWorkers is the number of workers when Options.Controller.Workers
// is not positive.
const DefaultWorkers = replicaset.DefaultWorkers

// Reasons of the ReplicaFailure condition.
const (
	ReasonFailedCreate = replicaset.ReasonFailedCreate
	ReasonFailedDelete = replicaset.ReasonFailedDelete
)

// New returns a Manager over the given informers, which must not be
// filtered by labels (the manager needs every pod of a namespace to adopt
// orphans and release pods). It adds its indices to the pod informer at
// once; its event handlers are registered by Run, and the informers may be
// running already.
func New(podInformer cache.Informer[*corev1.Pod], rcInformer cache.Informer[*corev1.ReplicationController],
	rcClient RCStatusClient, podControl controller.PodControl, opts Options) (*Manager, error) {
	return replicaset.New(replicaset.ReplicationControllers{}, podInformer, rcInformer, rcClient, podControl, opts)
}

// NewClient returns the manager's API access through c.
func NewClient(c *client.Client) *REST {
	return replicaset.NewClient[*corev1.ReplicationController](c)
}
