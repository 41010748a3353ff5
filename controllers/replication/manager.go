package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/workqueue"
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

// DefaultWorkers is the number of workers Run starts when asked for none.
const DefaultWorkers = 5

// Options tune a Manager. The zero value works.
type Options struct {
	// BurstReplicas caps how many pods one sync of one RC creates or
	// deletes; DefaultBurstReplicas when not positive.
	BurstReplicas int
	// Workers is the number of workers when Run is given none;
	// DefaultWorkers when not positive.
	Workers int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Recorder, when set, receives events about RCs the manager itself
	// finds fault with (a template its selector does not match). Events of
	// pod creations and deletions come from the PodControl, for instance
	// controller.RealPodControl's Recorder.
	Recorder controller.EventRecorder
	// RateLimiter delays the retries of failed syncs;
	// workqueue.DefaultControllerRateLimiter when nil.
	RateLimiter workqueue.RateLimiter[string]
	// ExpectationsTTL overrides controller.ExpectationsTimeout when positive.
	ExpectationsTTL time.Duration
}

// Manager is the ReplicationManager. Make it with NewManager and run it
// once with Run.
type Manager struct {
	pods       *cache.SharedIndexInformer[*corev1.Pod]
	rcs        *cache.SharedIndexInformer[*corev1.ReplicationController]
	rcLister   cache.Lister[*corev1.ReplicationController]
	client     RCStatusClient
	podControl controller.PodControl
	recorder   controller.EventRecorder
	burst      int
	workers    int
	log        *slog.Logger

	queue        *workqueue.RateLimitingQueue[string]
	expectations *controller.UIDTrackingControllerExpectations

	podReg *cache.Registration[*corev1.Pod]
	rcReg  *cache.Registration[*corev1.ReplicationController]

	runOnce sync.Once
}

// ErrAlreadyRun is returned by a second call of Run.
var ErrAlreadyRun = errors.New("replication: manager already run")

// NewManager returns a Manager over the given informers, which must not
// be filtered by labels (the manager needs every pod of a namespace to
// adopt orphans and release pods). It adds its indices to the pod
// informer and registers its event handlers at once; the informers may be
// running already.
func NewManager(podInformer *cache.SharedIndexInformer[*corev1.Pod], rcInformer *cache.SharedIndexInformer[*corev1.ReplicationController],
	rcClient RCStatusClient, podControl controller.PodControl, opts Options) (*Manager, error) {
	if podInformer == nil || rcInformer == nil || rcClient == nil || podControl == nil {
		return nil, errors.New("replication: NewManager needs both informers, an RC client and a PodControl")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	m := &Manager{
		pods:       podInformer,
		rcs:        rcInformer,
		rcLister:   rcInformer.Lister(corev1.Resource("replicationcontrollers")),
		client:     rcClient,
		podControl: podControl,
		recorder:   opts.Recorder,
		burst:      opts.BurstReplicas,
		workers:    opts.Workers,
		log:        log.With("controller", "replication"),
		queue:      workqueue.NewRateLimitingQueue(opts.RateLimiter, workqueue.Config{Name: "replicationmanager"}),
		expectations: &controller.UIDTrackingControllerExpectations{
			ControllerExpectations: controller.ControllerExpectations{TTL: opts.ExpectationsTTL},
		},
	}
	if err := addPodIndexers(podInformer); err != nil {
		return nil, err
	}
	if m.burst <= 0 {
		m.burst = DefaultBurstReplicas
	}
	if m.workers <= 0 {
		m.workers = DefaultWorkers
	}
	var err error
	m.rcReg, err = rcInformer.AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.ReplicationController]{
		AddFunc:    m.addRC,
		UpdateFunc: m.updateRC,
		DeleteFunc: m.deleteRC,
	})
	if err != nil {
		return nil, fmt.Errorf("replication: registering RC handlers: %w", err)
	}
	m.podReg, err = podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
		AddFunc:    m.addPod,
		UpdateFunc: m.updatePod,
		DeleteFunc: m.deletePod,
	})
	if err != nil {
		_ = rcInformer.RemoveEventHandler(m.rcReg)
		return nil, fmt.Errorf("replication: registering pod handlers: %w", err)
	}
	return m, nil
}

// Run waits until both informers have synced and handed their initial
// objects to the manager, then syncs RCs with workers workers (Options.
// Workers when not positive) until ctx ends. It then drains the queue,
// waits for the syncs in flight, unregisters the manager's handlers and
// returns. A Manager runs once: a second call returns ErrAlreadyRun.
func (m *Manager) Run(ctx context.Context, workers int) error {
	err := ErrAlreadyRun
	m.runOnce.Do(func() { err = m.run(ctx, workers) })
	return err
}

func (m *Manager) run(ctx context.Context, workers int) error {
	defer func() {
		// The informers may be shared and outlive the manager: stop
		// feeding a queue nobody reads.
		_ = m.pods.RemoveEventHandler(m.podReg)
		_ = m.rcs.RemoveEventHandler(m.rcReg)
	}()
	if workers <= 0 {
		workers = m.workers
	}
	r := controller.Runner[string]{Name: "replication", Queue: m.queue, Sync: m.syncReplicationController, Logger: m.log}
	return r.Run(ctx, workers, m.podReg.HasSynced, m.rcReg.HasSynced)
}

// enqueue queues the RC with key.
func (m *Manager) enqueue(rc *corev1.ReplicationController) {
	m.queue.Add(rcKey(rc))
}

// rcKey is the RC's queue and expectations key, namespace/name.
func rcKey(rc *corev1.ReplicationController) string {
	return rc.Namespace + "/" + rc.Name
}

// podKey is the key under which a pod's expected deletion is tracked.
func podKey(pod *corev1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}
