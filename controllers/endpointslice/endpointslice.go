// Package endpointslice is kube-controller-manager's endpointslice
// controller: for every Service with a selector it keeps EndpointSlices
// (labels kubernetes.io/service-name and endpointslice.kubernetes.io/managed-by
// endpointslice-controller.k8s.io, owned by the Service) listing the pods
// the Service selects, with their conditions, node, zone and ports, at
// most MaxEndpointsPerSlice endpoints a slice.
//
// What the slices hold is decided by kube's own code, k8s.io/endpointslice's
// Reconciler, with its trackers of the slices written and of the changes'
// trigger times and its topology cache; this package runs it on listwatch's
// shared informers and workqueue, as kube's controller runs it on
// client-go's.
package endpointslice

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	endpointslicerec "k8s.io/endpointslice"
	"k8s.io/endpointslice/topologycache"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/kubernetes/pkg/features"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/controllers/internal/podservices"
	"github.com/listwatch/listwatch/internal/kubeadapt"
)

// ControllerName is the value of the endpointslice.kubernetes.io/managed-by
// label of the slices this controller manages, kube's.
const ControllerName = "endpointslice-controller.k8s.io"

// Defaults, kube-controller-manager's.
const (
	// DefaultMaxEndpointsPerSlice is --max-endpoints-per-slice's default.
	DefaultMaxEndpointsPerSlice = 100
	// DefaultWorkers is --concurrent-service-endpoint-syncs' default.
	DefaultWorkers = 5
	// retryBaseDelay and retryMaxDelay are kube's backoff of a Service's
	// failed syncs, higher than a controller's usual 5 ms: a sync can
	// write many slices.
	retryBaseDelay = time.Second
	retryMaxDelay  = 1000 * time.Second
	// sliceChangeMinDelay is the least delay of the sync a change of a
	// slice by someone else queues, so that changes to several slices are
	// synced together.
	sliceChangeMinDelay = time.Second
)

// Informers are the caches the controller reads.
type Informers struct {
	Services       cache.Informer[*corev1.Service]
	Pods           cache.Informer[*corev1.Pod]
	Nodes          cache.Informer[*corev1.Node]
	EndpointSlices cache.Informer[*discoveryv1.EndpointSlice]
}

// Options tune the controller.
type Options struct {
	// Controller tunes the workers and the queue; Workers defaults to
	// DefaultWorkers, the retry delays to kube's (1 s doubling to 1000 s).
	Controller controller.Options
	// MaxEndpointsPerSlice bounds the endpoints of a slice;
	// DefaultMaxEndpointsPerSlice when not positive.
	MaxEndpointsPerSlice int32
	// UpdatesBatchPeriod delays the sync a pod change queues, so that
	// the changes of that period make one write
	// (--endpointslice-updates-batch-period; none by default).
	UpdatesBatchPeriod time.Duration
}

// Controller keeps the EndpointSlices of Services with selectors.
type Controller struct {
	*controller.Controller[string]
	inf        Informers
	services   cache.Lister[*corev1.Service]
	pods       cache.Lister[*corev1.Pod]
	nodes      cache.Lister[*corev1.Node]
	slices     cache.Lister[*discoveryv1.EndpointSlice]
	reconciler *endpointslicerec.Reconciler
	tracker    *endpointsliceutil.EndpointSliceTracker
	triggers   *endpointsliceutil.TriggerTimeTracker
	topology   *topologycache.TopologyCache
	recorder   controller.EventRecorder
	logger     logr.Logger
	batch      time.Duration
}

// New returns the controller over inf, writing slices through client (the
// clientset kube's Reconciler takes).
func New(inf Informers, client kubernetes.Interface, opts Options) (*Controller, error) {
	if inf.Services == nil || inf.Pods == nil || inf.Nodes == nil || inf.EndpointSlices == nil || client == nil {
		return nil, errors.New("endpointslice: New needs four informers and a client")
	}
	o := opts.Controller
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	o.RetryBaseDelay = cmp.Or(o.RetryBaseDelay, retryBaseDelay)
	o.RetryMaxDelay = cmp.Or(o.RetryMaxDelay, retryMaxDelay)
	maxPerSlice := opts.MaxEndpointsPerSlice
	if maxPerSlice <= 0 {
		maxPerSlice = DefaultMaxEndpointsPerSlice
	}
	recorder := controller.RecorderOr(o.Recorder, o)
	c := &Controller{
		inf:      inf,
		services: cache.NewLister(inf.Services.GetIndexer(), corev1.Resource("services")),
		pods:     cache.NewLister(inf.Pods.GetIndexer(), corev1.Resource("pods")),
		nodes:    cache.NewLister(inf.Nodes.GetIndexer(), corev1.Resource("nodes")),
		slices:   cache.NewLister(inf.EndpointSlices.GetIndexer(), discoveryv1.Resource("endpointslices")),
		tracker:  endpointsliceutil.NewEndpointSliceTracker(),
		triggers: endpointsliceutil.NewTriggerTimeTracker(),
		topology: topologycache.NewTopologyCache(),
		recorder: recorder,
		logger:   logr.FromSlogHandler(cmp.Or(o.Logger, slog.Default()).Handler()),
		batch:    opts.UpdatesBatchPeriod,
	}
	c.reconciler = endpointslicerec.NewReconciler(client, c.nodes, maxPerSlice, c.tracker, c.topology,
		kubeadapt.Events{Recorder: recorder}, ControllerName,
		endpointslicerec.WithPreferSameTrafficDistributionEnabled(utilfeature.DefaultFeatureGate.Enabled(features.PreferSameTrafficDistribution)))
	var err error
	c.Controller, err = controller.New("endpointslice", c.sync, o,
		controller.For(inf.Services),
		controller.Handle[string](inf.Pods, podservices.Handler(c.services, func(key string) {
			c.Queue().AddAfter(key, c.batch)
		})),
		controller.Handle[string](inf.EndpointSlices, cache.ResourceEventHandlerFuncs[*discoveryv1.EndpointSlice]{
			AddFunc:    func(s *discoveryv1.EndpointSlice, _ bool) { c.onSliceAdd(s) },
			UpdateFunc: c.onSliceUpdate,
			DeleteFunc: func(s *discoveryv1.EndpointSlice, _ bool) { c.onSliceDelete(s) },
		}),
		controller.Handle[string](inf.Nodes, cache.ResourceEventHandlerFuncs[*corev1.Node]{
			AddFunc:    func(*corev1.Node, bool) { c.Queue().Add(topologyKey) },
			UpdateFunc: c.onNodeUpdate,
			DeleteFunc: func(*corev1.Node, bool) { c.Queue().Add(topologyKey) },
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("endpointslice: %w", err)
	}
	return c, nil
}

// sync makes the EndpointSlices of the Service key names list the pods it
// selects, as kube's syncService: a Service gone is forgotten (its slices
// go with it, through their owner reference), an ExternalName Service or
// one without a selector gets none from this controller.
func (c *Controller) sync(_ context.Context, key string) (controller.Result, error) {
	if key == topologyKey {
		c.checkTopology()
		return controller.Result{}, nil
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return controller.Result{}, controller.Terminal(err)
	}
	svc, err := c.services.Namespace(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.triggers.DeleteService(ns, name)
		c.reconciler.DeleteService(ns, name)
		c.tracker.DeleteService(ns, name)
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return controller.Result{}, nil
	}
	pods, err := c.pods.Namespace(ns).List(labels.Set(svc.Spec.Selector).AsSelectorPreValidated())
	if err != nil {
		return controller.Result{}, err
	}
	slices, err := c.slices.Namespace(ns).List(labels.Set{
		discoveryv1.LabelServiceName: name,
		discoveryv1.LabelManagedBy:   ControllerName,
	}.AsSelectorPreValidated())
	if err != nil {
		return controller.Result{}, err
	}
	// Slices being deleted are left out, as kube does, so that a slice
	// held by a finalizer does not stall the Service.
	live := make([]*discoveryv1.EndpointSlice, 0, len(slices))
	for _, s := range slices {
		if s.DeletionTimestamp == nil {
			live = append(live, s)
		}
	}
	if c.tracker.StaleSlices(svc, live) {
		return controller.Result{}, errStaleSlices
	}
	// Computed on every sync, as kube does, so that the tracker's state
	// moves on even when nothing is written.
	trigger := c.triggers.ComputeEndpointLastChangeTriggerTime(ns, svc, pods)
	if err := c.reconciler.Reconcile(c.logger, svc, pods, live, trigger); err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices",
			"Error updating Endpoint Slices for Service %s/%s: %v", ns, name, err)
		return controller.Result{}, err
	}
	return controller.Result{}, nil
}

// errStaleSlices is a sync's error when the cache does not yet show the
// controller's own last writes of a Service's slices: the Service is
// synced again, after a backoff, once it does.
var errStaleSlices = errors.New("EndpointSlice informer cache is out of date")

// topologyKey is the queue's key of a look at the nodes' topology, which
// kube's controller queues on a queue of its own: no Service's key, all
// of which hold a "/", is the same.
const topologyKey = "topology"

// onSliceAdd queues the Service of a slice this controller manages that
// it did not write (or not in this version).
func (c *Controller) onSliceAdd(s *discoveryv1.EndpointSlice) {
	if c.reconciler.ManagedByController(s) && c.tracker.ShouldSync(s) {
		c.queueServiceOf(s)
	}
}

// onSliceUpdate queues the Service of a slice changed by someone else, or
// whose manager changed to or from this controller, and both Services of
// a slice whose service-name label changed.
func (c *Controller) onSliceUpdate(old, cur *discoveryv1.EndpointSlice) {
	if old.Labels[discoveryv1.LabelServiceName] != cur.Labels[discoveryv1.LabelServiceName] {
		c.queueServiceOf(cur)
		c.queueServiceOf(old)
		return
	}
	if c.reconciler.ManagedByChanged(old, cur) || (c.reconciler.ManagedByController(cur) && c.tracker.ShouldSync(cur)) {
		c.queueServiceOf(cur)
	}
}

// onSliceDelete queues the Service of a managed slice deleted by someone
// else.
func (c *Controller) onSliceDelete(s *discoveryv1.EndpointSlice) {
	if c.reconciler.ManagedByController(s) && c.tracker.Has(s) && !c.tracker.HandleDeletion(s) {
		c.queueServiceOf(s)
	}
}

func (c *Controller) queueServiceOf(s *discoveryv1.EndpointSlice) {
	key, err := endpointslicerec.ServiceControllerKey(s)
	if err != nil {
		return // no service-name label: no Service to sync
	}
	c.Queue().AddAfter(key, max(sliceChangeMinDelay, c.batch))
}

// onNodeUpdate looks at the topology again when a node's readiness or
// zone changed.
func (c *Controller) onNodeUpdate(old, cur *corev1.Node) {
	if nodeReady(old) != nodeReady(cur) || old.Labels[corev1.LabelTopologyZone] != cur.Labels[corev1.LabelTopologyZone] {
		c.Queue().Add(topologyKey)
	}
}

// checkTopology gives the topology cache the nodes and queues the Services
// whose hints the nodes' zones now overload.
func (c *Controller) checkTopology() {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	c.topology.SetNodes(c.logger, nodes)
	for _, key := range c.topology.GetOverloadedServices() {
		c.Queue().Add(key)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
