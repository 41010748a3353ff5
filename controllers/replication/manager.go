package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
)

// RCStatusClient is what the manager needs of an API client for
// ReplicationControllers.
type RCStatusClient interface {
	// Get reads the RC afresh from the API server, bypassing any cache.
	Get(ctx context.Context, namespace, name string) (*corev1.ReplicationController, error)
	// UpdateStatus writes rc's status through the status subresource, with
	// rc's resourceVersion as precondition.
	UpdateStatus(ctx context.Context, rc *corev1.ReplicationController) (*corev1.ReplicationController, error)
}

// DefaultBurstReplicas caps the creations or deletions of one sync.
const DefaultBurstReplicas = 500

// DefaultWorkers is the number of workers when Options.Controller.Workers
// is not positive.
const DefaultWorkers = 5

// Options tune a Manager. The zero value works.
type Options struct {
	// BurstReplicas caps how many pods one sync of one RC creates or
	// deletes; DefaultBurstReplicas when not positive.
	BurstReplicas int
	// Recorder, when set, receives events about RCs the manager itself
	// finds fault with (a template its selector does not match). Events of
	// pod creations and deletions come from the PodControl, for instance
	// controller.RealPodControl's Recorder.
	Recorder controller.EventRecorder
	// ExpectationsTTL overrides controller.ExpectationsTimeout when positive.
	ExpectationsTTL time.Duration
	// Controller tunes the workers (DefaultWorkers when not positive),
	// retries, logs and metrics.
	Controller controller.Options
}

// Manager is the ReplicationManager. Make it with New and run it once
// with Run.
type Manager struct {
	*controller.Controller[string]
	pods       cache.Informer[*corev1.Pod]
	rcLister   cache.Lister[*corev1.ReplicationController]
	client     RCStatusClient
	podControl controller.PodControl
	recorder   controller.EventRecorder
	burst      int
	log        *slog.Logger

	expectations *controller.UIDTrackingControllerExpectations
}

// New returns a Manager over the given informers, which must not be
// filtered by labels (the manager needs every pod of a namespace to adopt
// orphans and release pods). It adds its indices to the pod informer at
// once; its event handlers are registered by Run, and the informers may be
// running already.
func New(podInformer cache.Informer[*corev1.Pod], rcInformer cache.Informer[*corev1.ReplicationController],
	rcClient RCStatusClient, podControl controller.PodControl, opts Options) (*Manager, error) {
	if podInformer == nil || rcInformer == nil || rcClient == nil || podControl == nil {
		return nil, errors.New("replication: New needs both informers, an RC client and a PodControl")
	}
	if opts.Controller.Workers <= 0 {
		opts.Controller.Workers = DefaultWorkers
	}
	m := &Manager{
		pods:       podInformer,
		rcLister:   cache.NewLister(rcInformer.GetIndexer(), corev1.Resource("replicationcontrollers")),
		client:     rcClient,
		podControl: podControl,
		recorder:   opts.Recorder,
		burst:      opts.BurstReplicas,
		expectations: &controller.UIDTrackingControllerExpectations{
			ControllerExpectations: controller.ControllerExpectations{TTL: opts.ExpectationsTTL},
		},
	}
	if m.burst <= 0 {
		m.burst = DefaultBurstReplicas
	}
	if err := addPodIndexers(podInformer.GetIndexer()); err != nil {
		return nil, err
	}
	var err error
	m.Controller, err = controller.New("replication", m.syncReplicationController, opts.Controller,
		controller.Handle[string](rcInformer, cache.ResourceEventHandlerFuncs[*corev1.ReplicationController]{
			AddFunc:    m.addRC,
			UpdateFunc: m.updateRC,
			DeleteFunc: m.deleteRC,
		}),
		controller.Handle[string](podInformer, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc:    m.addPod,
			UpdateFunc: m.updatePod,
			DeleteFunc: m.deletePod,
		}))
	if err != nil {
		return nil, fmt.Errorf("replication: %w", err)
	}
	m.log = m.Logger()
	return m, nil
}

// enqueue queues the RC with key.
func (m *Manager) enqueue(rc *corev1.ReplicationController) {
	m.Queue().Add(rcKey(rc))
}

// rcKey is the RC's queue and expectations key, namespace/name.
func rcKey(rc *corev1.ReplicationController) string {
	return rc.Namespace + "/" + rc.Name
}

// podKey is the key under which a pod's expected deletion is tracked.
func podKey(pod *corev1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}
