// Package daemonset is the DaemonSet controller of
// kube-controller-manager, on listwatch's controller package: it keeps one
// pod of a DaemonSet on every node that should run one — the nodes its
// template's nodeName, nodeSelector and required node affinity select and
// whose NoSchedule and NoExecute taints its tolerations, with the ones
// kube adds to every daemon pod (not-ready and unreachable NoExecute;
// disk-, memory- and pid-pressure and unschedulable NoSchedule; and
// network-unavailable for a hostNetwork pod), tolerate — and none on the
// others; it rolls the pods to a new template (RollingUpdate: maxUnavailable
// old pods deleted at a time, or maxSurge new pods started beside the old
// ones; OnDelete: only as they are deleted), records each template as a
// ControllerRevision ("<set>-<hash>") keeping revisionHistoryLimit old
// ones, and writes the status (desiredNumberScheduled,
// currentNumberScheduled, numberMisscheduled, numberReady,
// numberAvailable, numberUnavailable, updatedNumberScheduled,
// observedGeneration, collisionCount).
//
// Pods are made as kube makes them: named "<set>-<random>", controlled by
// the set, labelled controller-revision-hash (and pod-template-generation
// when the set has the deprecated template-generation annotation), with
// kube's default tolerations and a required node affinity on the node's
// metadata.name, so that the scheduler places each on its node. The
// decisions that kube publishes are kube's own code: which nodes should
// run a pod (k8s.io/kubernetes/pkg/controller/daemon's
// NodeShouldRunDaemonPod), the pods' template, labels, tolerations and
// affinity, surge and unavailability counts and which pods are up to date
// (its util package), template hashes (pkg/controller's ComputeHash) and
// whether a revision holds the template (daemon.Match). The loop around
// them — which pods to create and delete on each node, the rolling
// update's choices, the history's upkeep, the status — follows kube's
// unexported code step by step; events (SuccessfulCreate,
// SuccessfulDelete, FailedCreate, FailedDaemonPod, SucceededDaemonPod,
// SelectingAll) carry kube's reasons and messages.
package daemonset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/defaults"
)

// Defaults, kube-controller-manager's.
const (
	// DefaultWorkers is --concurrent-daemonset-syncs.
	DefaultWorkers = 2
	// BurstReplicas caps the pods one sync creates, and those it
	// deletes.
	BurstReplicas = 250
	// FailedPodBackoff and MaxFailedPodBackoff time the deletion of a
	// failed daemon pod, per node: kube's failedPodsBackoff.
	FailedPodBackoff    = time.Second
	MaxFailedPodBackoff = 15 * time.Minute
	// BackoffGCInterval is how often the backoffs of nodes whose pods
	// stopped failing are forgotten.
	BackoffGCInterval = time.Minute
)

// controllerKind is the kind of the pods' and revisions' controller
// references.
var controllerKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// Client is what the controller needs of an API client.
type Client interface {
	// GetDaemonSet reads the DaemonSet from the server, bypassing any
	// cache: the check before an adoption, and a status write's retry.
	GetDaemonSet(ctx context.Context, namespace, name string) (*appsv1.DaemonSet, error)
	// UpdateDaemonSetStatus writes the DaemonSet's status subresource.
	UpdateDaemonSetStatus(ctx context.Context, ds *appsv1.DaemonSet) (*appsv1.DaemonSet, error)
	controller.PodClient
	controller.RevisionClient
}

// Options tune a Controller; the zero value is kube's.
type Options struct {
	// Recorder receives the events about DaemonSets; Controller.Recorder
	// when nil, and none when both are.
	Recorder controller.EventRecorder
	// BurstReplicas caps the pods one sync creates or deletes;
	// BurstReplicas when not positive.
	BurstReplicas int
	// Controller tunes the workers (DefaultWorkers when not positive),
	// retries, logs and metrics.
	Controller controller.Options
}

// Informers are the shared informers the controller reads.
type Informers struct {
	DaemonSets          cache.Informer[*appsv1.DaemonSet]
	Pods                cache.Informer[*corev1.Pod]
	Nodes               cache.Informer[*corev1.Node]
	ControllerRevisions cache.Informer[*appsv1.ControllerRevision]
}

// Controller is the DaemonSet controller. Make it with New and run it
// once with Run.
type Controller struct {
	*controller.Controller[string]
	inf        Informers
	pods       cache.Lister[*corev1.Pod]
	client     Client
	podControl controller.PodControl
	recorder   controller.EventRecorder
	burst      int
	// expectations are the pod creations and deletions of a set's last
	// sync not yet seen in the pod cache: until they are, a sync only
	// writes the status.
	expectations controller.ControllerExpectations
	// failedPods paces the deletion of failed pods, per set, generation
	// and node, so that a set does not fight a kubelet that rejects its
	// pod.
	failedPods *flowcontrol.Backoff
	log        *slog.Logger
}

// New returns a DaemonSet controller over the shared informers. It adds
// controller.ByControllerIndex and controller.OrphansIndex to the pod and
// ControllerRevision informers.
func New(inf Informers, c Client, opts Options) (*Controller, error) {
	if inf.DaemonSets == nil || inf.Pods == nil || inf.Nodes == nil || inf.ControllerRevisions == nil || c == nil {
		return nil, errors.New("daemonset: New needs the DaemonSet, pod, node and ControllerRevision informers and a client")
	}
	defaults.Positive(&opts.Controller.Workers, DefaultWorkers)
	defaults.Positive(&opts.BurstReplicas, BurstReplicas)
	opts.Recorder = controller.RecorderOr(opts.Recorder, opts.Controller)
	for _, add := range []func() error{
		func() error { return controller.AddByControllerIndex(inf.Pods.GetIndexer()) },
		func() error { return controller.AddOrphansIndex(inf.Pods.GetIndexer()) },
		func() error { return controller.AddByControllerIndex(inf.ControllerRevisions.GetIndexer()) },
		func() error { return controller.AddOrphansIndex(inf.ControllerRevisions.GetIndexer()) },
	} {
		if err := add(); err != nil {
			return nil, fmt.Errorf("daemonset: %w", err)
		}
	}
	dsc := &Controller{
		inf: inf, client: c, recorder: opts.Recorder, burst: opts.BurstReplicas,
		pods:       cache.NewLister(inf.Pods.GetIndexer(), corev1.Resource("pods")),
		failedPods: flowcontrol.NewBackOff(FailedPodBackoff, MaxFailedPodBackoff),
	}
	var err error
	dsc.Controller, err = controller.New("daemonset", dsc.sync, opts.Controller,
		controller.Handle[string](inf.DaemonSets, cache.ResourceEventHandlerFuncs[*appsv1.DaemonSet]{
			AddFunc:    func(ds *appsv1.DaemonSet, _ bool) { dsc.Queue().Add(dsKey(ds)) },
			UpdateFunc: func(_, ds *appsv1.DaemonSet) { dsc.Queue().Add(dsKey(ds)) },
			DeleteFunc: dsc.deleteDaemonSet,
		}),
		controller.Handle[string](inf.Pods, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc:    dsc.addPod,
			UpdateFunc: dsc.updatePod,
			DeleteFunc: dsc.deletePod,
		}),
		controller.Handle[string](inf.Nodes, cache.ResourceEventHandlerFuncs[*corev1.Node]{
			AddFunc:    func(node *corev1.Node, _ bool) { dsc.nodeChanged(node) },
			UpdateFunc: dsc.updateNode,
		}),
		controller.Handle[string](inf.ControllerRevisions, cache.ResourceEventHandlerFuncs[*appsv1.ControllerRevision]{
			AddFunc:    dsc.addRevision,
			UpdateFunc: dsc.updateRevision,
			DeleteFunc: dsc.deleteRevision,
		}))
	if err != nil {
		return nil, fmt.Errorf("daemonset: %w", err)
	}
	dsc.podControl = &controller.RealPodControl{Client: c, Recorder: opts.Recorder, Logger: dsc.Logger()}
	dsc.log = dsc.Logger()
	return dsc, nil
}

// Run runs the controller until ctx ends, as controller.Controller's Run,
// and forgets, every BackoffGCInterval, the failed-pod backoffs that have
// run out.
func (dsc *Controller) Run(ctx context.Context) error {
	gcCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(BackoffGCInterval)
		defer t.Stop()
		for {
			select {
			case <-gcCtx.Done():
				return
			case <-t.C:
				dsc.failedPods.GC()
			}
		}
	})
	defer func() { stop(); wg.Wait() }()
	return dsc.Controller.Run(ctx)
}

func dsKey(ds *appsv1.DaemonSet) string { return ds.Namespace + "/" + ds.Name }

// deleteDaemonSet forgets the set's expectations, so that a set made
// again under its name starts clean, and queues it.
func (dsc *Controller) deleteDaemonSet(ds *appsv1.DaemonSet, _ bool) {
	dsc.expectations.DeleteExpectations(dsKey(ds))
	dsc.Queue().Add(dsKey(ds))
}

// addPod counts a pod a set made as a creation it expected and queues the
// set; an orphan, every set whose selector matches it, which may adopt
// it. A pod being deleted already counts as a deletion.
func (dsc *Controller) addPod(pod *corev1.Pod, _ bool) {
	if pod.DeletionTimestamp != nil {
		dsc.deletePod(pod, false)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		if ds := dsc.resolve(pod.Namespace, ref); ds != nil {
			dsc.expectations.CreationObserved(dsKey(ds))
			dsc.Queue().Add(dsKey(ds))
		}
		return
	}
	for _, ds := range setsSelecting(dsc.inf.DaemonSets, pod.Namespace, pod.Labels) {
		dsc.Queue().Add(dsKey(ds))
	}
}

// updatePod queues the sets of the pod's old and new controllers; an
// orphan whose labels changed, the sets that may now adopt it. A pod
// whose deletion began counts as deleted. A pod that became ready queues
// its set again a second after minReadySeconds, when it is available.
func (dsc *Controller) updatePod(old, cur *corev1.Pod) {
	if old.ResourceVersion == cur.ResourceVersion {
		return
	}
	if cur.DeletionTimestamp != nil {
		dsc.deletePod(cur, false)
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if ds := dsc.resolve(old.Namespace, oldRef); ds != nil {
			dsc.Queue().Add(dsKey(ds))
		}
	}
	if curRef != nil {
		ds := dsc.resolve(cur.Namespace, curRef)
		if ds == nil {
			return
		}
		dsc.Queue().Add(dsKey(ds))
		if ds.Spec.MinReadySeconds > 0 && !podutil.IsPodReady(old) && podutil.IsPodReady(cur) {
			dsc.Queue().AddAfter(dsKey(ds), time.Duration(ds.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if refChanged || !reflect.DeepEqual(old.Labels, cur.Labels) {
		for _, ds := range setsSelecting(dsc.inf.DaemonSets, cur.Namespace, cur.Labels) {
			dsc.Queue().Add(dsKey(ds))
		}
	}
}

// deletePod counts a deletion the pod's set expected and queues the set.
func (dsc *Controller) deletePod(pod *corev1.Pod, _ bool) {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		if ds := dsc.resolve(pod.Namespace, ref); ds != nil {
			dsc.expectations.DeletionObserved(dsKey(ds))
			dsc.Queue().Add(dsKey(ds))
		}
	}
}

// updateNode looks again at the sets when a node's labels or taints
// change, which decide what runs on it; its status, heartbeats included,
// does not.
func (dsc *Controller) updateNode(old, cur *corev1.Node) {
	if equality.Semantic.DeepEqual(old.Labels, cur.Labels) && equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) {
		return
	}
	dsc.nodeChanged(cur)
}

// nodeChanged queues every set whose pods on node may change: one that
// should run there and has no pod there, one that has a pod there it
// should not keep, and one with a pod there that counts as misscheduled,
// as kube's node-update worker does.
func (dsc *Controller) nodeChanged(node *corev1.Node) {
	for _, ds := range dsc.inf.DaemonSets.GetIndexer().List() {
		shouldRun, shouldContinue := nodeShouldRun(node, ds)
		scheduled := dsc.hasPodOn(ds, node.Name)
		if (shouldRun && !scheduled) || (!shouldContinue && scheduled) || (scheduled && ds.Status.NumberMisscheduled > 0) {
			dsc.Queue().Add(dsKey(ds))
		}
	}
}

// hasPodOn reports whether the cache holds a pod of ds bound to node.
func (dsc *Controller) hasPodOn(ds *appsv1.DaemonSet, node string) bool {
	pods, err := controller.Controlled(dsc.inf.Pods.GetIndexer(), ds.Namespace, ds.UID)
	if err != nil {
		return false
	}
	for _, p := range pods {
		if p.Spec.NodeName == node {
			return true
		}
	}
	return false
}

// addRevision queues the set that controls the revision or, for an
// orphan, every set whose selector matches it; a revision being deleted
// counts as deleted.
func (dsc *Controller) addRevision(rev *appsv1.ControllerRevision, _ bool) {
	if rev.DeletionTimestamp != nil {
		dsc.deleteRevision(rev, false)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(rev); ref != nil {
		// kube observes its own revisions' creation without queueing.
		return
	}
	for _, ds := range setsSelecting(dsc.inf.DaemonSets, rev.Namespace, rev.Labels) {
		dsc.Queue().Add(dsKey(ds))
	}
}

// updateRevision queues the sets of the revision's old and new
// controllers; an orphan whose labels changed, the sets that may adopt
// it.
func (dsc *Controller) updateRevision(old, cur *appsv1.ControllerRevision) {
	if old.ResourceVersion == cur.ResourceVersion {
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if ds := dsc.resolve(old.Namespace, oldRef); ds != nil {
			dsc.Queue().Add(dsKey(ds))
		}
	}
	if curRef != nil {
		if ds := dsc.resolve(cur.Namespace, curRef); ds != nil {
			dsc.Queue().Add(dsKey(ds))
		}
		return
	}
	if refChanged || !reflect.DeepEqual(old.Labels, cur.Labels) {
		for _, ds := range setsSelecting(dsc.inf.DaemonSets, cur.Namespace, cur.Labels) {
			dsc.Queue().Add(dsKey(ds))
		}
	}
}

// deleteRevision queues the set that controlled the revision.
func (dsc *Controller) deleteRevision(rev *appsv1.ControllerRevision, _ bool) {
	if ref := metav1.GetControllerOfNoCopy(rev); ref != nil {
		if ds := dsc.resolve(rev.Namespace, ref); ds != nil {
			dsc.Queue().Add(dsKey(ds))
		}
	}
}

// resolve returns the cached DaemonSet a controller reference names, or
// nil if it names another kind or a set the cache does not hold (with
// that UID).
func (dsc *Controller) resolve(namespace string, ref *metav1.OwnerReference) *appsv1.DaemonSet {
	if ref.Kind != controllerKind.Kind {
		return nil
	}
	ds, ok, err := dsc.inf.DaemonSets.GetIndexer().GetByKey(namespace + "/" + ref.Name)
	if err != nil || !ok || ds.UID != ref.UID {
		return nil
	}
	return ds
}

// setsSelecting returns the DaemonSets of namespace whose selector
// matches set (a non-empty selector: kube's lister skips the empty one).
func setsSelecting(sets cache.Informer[*appsv1.DaemonSet], namespace string, set map[string]string) []*appsv1.DaemonSet {
	all, err := sets.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil
	}
	var out []*appsv1.DaemonSet
	for _, ds := range all {
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(set)) {
			continue
		}
		out = append(out, ds)
	}
	return out
}

// REST is the Client over listwatch's REST client.
type REST struct {
	sets *client.Resource[*appsv1.DaemonSet]
	pods *client.Resource[*corev1.Pod]
	*controller.RevisionREST
}

var _ Client = (*REST)(nil)

// NewClient returns the controller's API access through c.
func NewClient(c *client.Client) *REST {
	return &REST{
		sets:         client.For[*appsv1.DaemonSet](c, ""),
		pods:         client.For[*corev1.Pod](c, ""),
		RevisionREST: controller.NewRevisionREST(c),
	}
}

// GetDaemonSet reads the DaemonSet from the server.
func (r *REST) GetDaemonSet(ctx context.Context, namespace, name string) (*appsv1.DaemonSet, error) {
	return r.sets.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// UpdateDaemonSetStatus writes the DaemonSet's status subresource.
func (r *REST) UpdateDaemonSetStatus(ctx context.Context, ds *appsv1.DaemonSet) (*appsv1.DaemonSet, error) {
	return r.sets.Namespace(ds.Namespace).UpdateStatus(ctx, ds, metav1.UpdateOptions{})
}

// CreatePod creates the pod in namespace.
func (r *REST) CreatePod(ctx context.Context, namespace string, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error) {
	return r.pods.Namespace(namespace).Create(ctx, pod, opts)
}

// DeletePod deletes the pod namespace/name.
func (r *REST) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return r.pods.Namespace(namespace).Delete(ctx, name, opts)
}

// PatchPod patches the pod namespace/name.
func (r *REST) PatchPod(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*corev1.Pod, error) {
	return r.pods.Namespace(namespace).Patch(ctx, name, pt, data, opts)
}
