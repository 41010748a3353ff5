package replicaset

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

// StatusClient is what the controller needs of an API client for its
// objects.
type StatusClient[T cache.Object] interface {
	// Get reads the object afresh from the API server, bypassing any
	// cache.
	Get(ctx context.Context, namespace, name string) (T, error)
	// UpdateStatus writes obj's status through the status subresource,
	// with obj's resourceVersion as precondition unless it is empty.
	UpdateStatus(ctx context.Context, obj T) (T, error)
}

// DefaultBurstReplicas caps the creations or deletions of one sync, as
// kube-controller-manager's burstReplicas.
const DefaultBurstReplicas = 500

// DefaultStatusInterval is Options.StatusInterval's default. kube's
// ReplicaSet controller has no such pace, but its sync reads every pod of
// the namespace, which spaces its writes at scale as much; without a pace
// a sync that costs what changed writes one status per pod event.
const DefaultStatusInterval = 50 * time.Millisecond

// DefaultWorkers is the number of workers when Options.Controller.Workers
// is not positive.
const DefaultWorkers = 5

// Options tune a Manager. The zero value works.
type Options struct {
	// BurstReplicas caps how many pods one sync of one object creates or
	// deletes; DefaultBurstReplicas when not positive.
	BurstReplicas int
	// Recorder, when set, receives events about objects the controller
	// itself finds fault with (a template its selector does not match).
	// Events of pod creations and deletions come from the PodControl, for
	// instance controller.RealPodControl's Recorder.
	Recorder controller.EventRecorder
	// ExpectationsTTL overrides controller.ExpectationsTimeout when positive.
	ExpectationsTTL time.Duration
	// StatusInterval is the least time between two writes of one
	// object's status while its pods are on their way up (a status
	// others wait on is written at once: see the package doc);
	// DefaultStatusInterval when zero, none when negative.
	StatusInterval time.Duration
	// Controller tunes the workers (DefaultWorkers when not positive),
	// retries, logs and metrics.
	Controller controller.Options
}

// Manager is the ReplicaSet controller over objects of Go type T, whose
// Kind tells how to read them: *appsv1.ReplicaSet with ReplicaSets, or
// *corev1.ReplicationController with ReplicationControllers (kube's
// ReplicationManager). Make it with New and run it once with Run.
type Manager[T cache.Object] struct {
	*controller.Controller[string]
	kind   Kind[T]
	pods   cache.Informer[*corev1.Pod]
	lister cache.Lister[T]
	client StatusClient[T]
	// writes holds the status writes the informer has not shown yet.
	writes controller.Writes[T]
	// views holds what each object's last sync saw of its pods.
	views podViews
	// statusPace spaces out the writes of statuses on their way.
	statusPace controller.Pacer
	podControl controller.PodControl
	recorder   controller.EventRecorder
	burst      int
	log        *slog.Logger

	expectations *controller.UIDTrackingControllerExpectations
}

// New returns a Manager of kind's objects over the given informers, which
// must not be filtered by labels (the manager needs every pod of a
// namespace to adopt orphans and release pods). It adds its indices to
// the pod informer at once; its event handlers are registered by Run, and
// the informers may be running already.
func New[T cache.Object](kind Kind[T], podInformer cache.Informer[*corev1.Pod], informer cache.Informer[T],
	client StatusClient[T], podControl controller.PodControl, opts Options) (*Manager[T], error) {
	if kind == nil || podInformer == nil || informer == nil || client == nil || podControl == nil {
		return nil, errors.New("replicaset: New needs a Kind, both informers, a client and a PodControl")
	}
	if opts.Controller.Workers <= 0 {
		opts.Controller.Workers = DefaultWorkers
	}
	m := &Manager[T]{
		kind:       kind,
		pods:       podInformer,
		lister:     cache.NewLister(informer.GetIndexer(), kind.Resource()),
		client:     client,
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
	switch {
	case opts.StatusInterval == 0:
		m.statusPace.Interval = DefaultStatusInterval
	case opts.StatusInterval > 0:
		m.statusPace.Interval = opts.StatusInterval
	}
	if err := addPodIndexers(podInformer.GetIndexer()); err != nil {
		return nil, err
	}
	// Pod events are handled here rather than by controller.Owns: they
	// also settle expectations, and an orphan's queues every object that
	// may adopt it.
	var err error
	m.Controller, err = controller.New(kind.ControllerName(), m.sync, opts.Controller,
		controller.Handle[string](informer, cache.ResourceEventHandlerFuncs[T]{
			AddFunc:    m.addObject,
			UpdateFunc: m.updateObject,
			DeleteFunc: m.deleteObject,
		}),
		controller.Handle[string](podInformer, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc:    m.addPod,
			UpdateFunc: m.updatePod,
			DeleteFunc: m.deletePod,
		}))
	if err != nil {
		return nil, fmt.Errorf("replicaset: %w", err)
	}
	m.log = m.Logger()
	return m, nil
}

// enqueue queues obj.
func (m *Manager[T]) enqueue(obj T) {
	m.Queue().Add(objectKey(obj))
}

// objectKey is an object's queue and expectations key, namespace/name.
func objectKey(obj cache.Object) string {
	return obj.GetNamespace() + "/" + obj.GetName()
}

// podKey is the key under which a pod's expected deletion is tracked.
func podKey(pod *corev1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}
