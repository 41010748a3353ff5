// Package disruption is kube-controller-manager's disruption controller,
// on listwatch's controller package: it keeps every PodDisruptionBudget's
// status — currentHealthy (the Ready pods it selects that are neither
// being deleted nor just evicted), desiredHealthy and expectedPods (from
// minAvailable or maxUnavailable, as numbers or percentages of the scale
// of the pods' controllers), disruptionsAllowed, observedGeneration and
// the DisruptionAllowed condition — which the API server's pods/eviction
// reads and spends. Pods the eviction recorded in disruptedPods count as
// gone for two minutes (DeletionTimeout); one not deleted by then is
// dropped from the map, with a NotDeleted event. A pod left with a
// DisruptionTarget condition and no deletion for two minutes has the
// condition set to False.
//
// The pods' controllers are found as kube finds them: ReplicationControllers,
// Deployments (through their ReplicaSets), ReplicaSets and StatefulSets
// from the shared informers, any other controller through its scale
// subresource. The events are kube's (NoPods, CalculateExpectedPodCountFailed,
// UnmanagedPods, MultiplePodDisruptionBudgets, NotDeleted), recorded as
// the component "controllermanager", as kube's are; a sync that fails
// writes what kube's fail-safe writes: no disruption allowed, the
// condition False with reason SyncFailed.
package disruption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubedisruption "k8s.io/kubernetes/pkg/controller/disruption"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/defaults"
)

// DefaultWorkers is kube-controller-manager's
// ConcurrentDisruptionSyncs default.
const DefaultWorkers = 1

// DeletionTimeout is how long a pod the eviction recorded in a budget's
// disruptedPods counts as about to go: kube's.
const DeletionTimeout = kubedisruption.DeletionTimeout

// DefaultStaleDisruptionTimeout is how long a pod keeps a DisruptionTarget
// condition with no deletion before the condition is set to False: kube's.
const DefaultStaleDisruptionTimeout = 2 * time.Minute

// Component is the source of the controller's events, as kube's
// disruption controller names it.
const Component = "controllermanager"

// Client is what the controller needs of an API client.
type Client interface {
	// UpdatePDBStatus writes the budget's status subresource.
	UpdatePDBStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget) (*policyv1.PodDisruptionBudget, error)
	// UpdatePodStatus writes the pod's status subresource.
	UpdatePodStatus(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error)
	// ResourceFor maps a kind at a version to its resource, as a
	// RESTMapper does.
	ResourceFor(ctx context.Context, gvk schema.GroupVersionKind) (schema.GroupVersionResource, error)
	// GetScale reads the scale subresource of the object namespace/name
	// of gvr.
	GetScale(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*autoscalingv1.Scale, error)
	// ServesScale reports whether the server serves gvr's scale
	// subresource, of kind autoscaling/v1 Scale, as discovery lists it.
	ServesScale(ctx context.Context, gvr schema.GroupVersionResource) (bool, error)
}

// Informers are the shared informers the controller reads.
type Informers struct {
	PDBs                   cache.Informer[*policyv1.PodDisruptionBudget]
	Pods                   cache.Informer[*corev1.Pod]
	ReplicationControllers cache.Informer[*corev1.ReplicationController]
	ReplicaSets            cache.Informer[*appsv1.ReplicaSet]
	Deployments            cache.Informer[*appsv1.Deployment]
	StatefulSets           cache.Informer[*appsv1.StatefulSet]
}

// Options tune a Controller; the zero value is kube's.
type Options struct {
	// Recorder receives the events; Controller.Recorder when nil, and
	// none when both are.
	Recorder controller.EventRecorder
	// Now is the controller's clock; time.Now when nil.
	Now func() time.Time
	// StaleDisruptionTimeout is how long a DisruptionTarget condition
	// with no deletion stays True; DefaultStaleDisruptionTimeout when not
	// positive.
	StaleDisruptionTimeout time.Duration
	// Controller tunes the workers (DefaultWorkers when not positive),
	// retries, logs and metrics.
	Controller controller.Options
}

// key is an item of the queue: a budget to sync, or a pod whose stale
// DisruptionTarget condition is to be cleared (kube's second queue).
type key struct {
	pod       bool
	namespace string
	name      string
}

// Controller is the disruption controller. Make it with New and run it
// once with Run.
type Controller struct {
	*controller.Controller[key]
	inf      Informers
	pdbs     cache.Lister[*policyv1.PodDisruptionBudget]
	pods     cache.Lister[*corev1.Pod]
	rcs      cache.Lister[*corev1.ReplicationController]
	rss      cache.Lister[*appsv1.ReplicaSet]
	ds       cache.Lister[*appsv1.Deployment]
	sss      cache.Lister[*appsv1.StatefulSet]
	client   Client
	recorder controller.EventRecorder
	now      func() time.Time
	stale    time.Duration
}

// New returns the disruption controller over the shared informers.
func New(inf Informers, c Client, opts Options) (*Controller, error) {
	if inf.PDBs == nil || inf.Pods == nil || inf.ReplicationControllers == nil || inf.ReplicaSets == nil ||
		inf.Deployments == nil || inf.StatefulSets == nil || c == nil {
		return nil, errors.New("disruption: New needs the PodDisruptionBudget, pod, ReplicationController, ReplicaSet, Deployment and StatefulSet informers and a client")
	}
	defaults.Positive(&opts.Controller.Workers, DefaultWorkers)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.StaleDisruptionTimeout <= 0 {
		opts.StaleDisruptionTimeout = DefaultStaleDisruptionTimeout
	}
	dc := &Controller{
		inf: inf, client: c, now: opts.Now, stale: opts.StaleDisruptionTimeout,
		recorder: controller.RecorderOr(opts.Recorder, opts.Controller),
		pdbs:     cache.NewLister(inf.PDBs.GetIndexer(), policyv1.Resource("poddisruptionbudgets")),
		pods:     cache.NewLister(inf.Pods.GetIndexer(), corev1.Resource("pods")),
		rcs:      cache.NewLister(inf.ReplicationControllers.GetIndexer(), corev1.Resource("replicationcontrollers")),
		rss:      cache.NewLister(inf.ReplicaSets.GetIndexer(), appsv1.Resource("replicasets")),
		ds:       cache.NewLister(inf.Deployments.GetIndexer(), appsv1.Resource("deployments")),
		sss:      cache.NewLister(inf.StatefulSets.GetIndexer(), appsv1.Resource("statefulsets")),
	}
	budget := func(pdb *policyv1.PodDisruptionBudget) { dc.Queue().Add(key{namespace: pdb.Namespace, name: pdb.Name}) }
	var err error
	dc.Controller, err = controller.New("disruption", dc.sync, opts.Controller,
		controller.Handle[key](inf.PDBs, cache.ResourceEventHandlerFuncs[*policyv1.PodDisruptionBudget]{
			AddFunc:    func(pdb *policyv1.PodDisruptionBudget, _ bool) { budget(pdb) },
			UpdateFunc: func(_, pdb *policyv1.PodDisruptionBudget) { budget(pdb) },
			DeleteFunc: func(pdb *policyv1.PodDisruptionBudget, _ bool) { budget(pdb) },
		}),
		controller.Handle[key](inf.Pods, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc:    func(pod *corev1.Pod, _ bool) { dc.podChanged(pod, true) },
			UpdateFunc: func(_, pod *corev1.Pod) { dc.podChanged(pod, true) },
			DeleteFunc: func(pod *corev1.Pod, _ bool) { dc.podChanged(pod, false) },
		}),
		// The controllers of the pods queue nothing, as in kube: a sync
		// reads their scale.
		controller.Handle[key](inf.ReplicationControllers, cache.ResourceEventHandlerFuncs[*corev1.ReplicationController]{}),
		controller.Handle[key](inf.ReplicaSets, cache.ResourceEventHandlerFuncs[*appsv1.ReplicaSet]{}),
		controller.Handle[key](inf.Deployments, cache.ResourceEventHandlerFuncs[*appsv1.Deployment]{}),
		controller.Handle[key](inf.StatefulSets, cache.ResourceEventHandlerFuncs[*appsv1.StatefulSet]{}))
	if err != nil {
		return nil, fmt.Errorf("disruption: %w", err)
	}
	return dc, nil
}

// podChanged queues the budget of pod and, when the pod was not deleted
// and holds a DisruptionTarget condition that may go stale, the pod, for
// when it will have.
func (dc *Controller) podChanged(pod *corev1.Pod, present bool) {
	if pdb := dc.budgetFor(pod); pdb != nil {
		dc.Queue().Add(key{namespace: pdb.Namespace, name: pdb.Name})
	}
	if !present {
		return
	}
	if stale, after := dc.staleDisruption(pod); stale {
		dc.Queue().AddAfter(key{pod: true, namespace: pod.Namespace, name: pod.Name}, after)
	}
}

// budgetFor is the budget whose sync pod's changes concern: the first
// (by name) of those selecting it, with a MultiplePodDisruptionBudgets
// event on the pod when there are several, as kube records.
func (dc *Controller) budgetFor(pod *corev1.Pod) *policyv1.PodDisruptionBudget {
	all, err := dc.pdbs.Namespace(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var pdbs []*policyv1.PodDisruptionBudget
	for _, pdb := range all {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		// A budget with no selector selects nothing.
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		pdbs = append(pdbs, pdb)
	}
	if len(pdbs) == 0 {
		return nil
	}
	slices.SortFunc(pdbs, func(a, b *policyv1.PodDisruptionBudget) int { return strings.Compare(a.Name, b.Name) })
	if len(pdbs) > 1 {
		dc.recorder.Eventf(pod, corev1.EventTypeWarning, "MultiplePodDisruptionBudgets",
			"Pod %q/%q matches multiple PodDisruptionBudgets.  Chose %q arbitrarily.", pod.Namespace, pod.Name, pdbs[0].Name)
	}
	return pdbs[0]
}

// sync syncs the budget, or clears the pod's stale condition, of k.
func (dc *Controller) sync(ctx context.Context, k key) (controller.Result, error) {
	if k.pod {
		return dc.syncStaleDisruption(ctx, k)
	}
	pdb, err := dc.pdbs.Namespace(k.namespace).Get(k.name)
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	recheck, err := dc.trySync(ctx, pdb)
	switch {
	case apierrors.IsConflict(err):
		// Retried with the cache's newer copy, with no fail-safe.
		return controller.Result{}, err
	case err != nil:
		// As kube: once no disruption is allowed, the budget is not
		// looked at again before something changes.
		dc.Logger().Error("failed to sync PodDisruptionBudget", "pdb", k.namespace+"/"+k.name, "err", err)
		return controller.Result{}, dc.failSafe(ctx, pdb, err)
	}
	return controller.Result{RequeueAfter: recheck}, nil
}

// trySync writes pdb's status from its pods; it returns when the budget
// is to be looked at again, for a disrupted pod's entry to expire (zero:
// not).
func (dc *Controller) trySync(ctx context.Context, pdb *policyv1.PodDisruptionBudget) (time.Duration, error) {
	pods, err := dc.podsOf(pdb)
	if err != nil {
		dc.recorder.Eventf(pdb, corev1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return 0, err
	}
	if len(pods) == 0 {
		dc.recorder.Eventf(pdb, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	expected, desired, unmanaged, err := dc.expectedPodCount(ctx, pdb, pods)
	if err != nil {
		dc.recorder.Eventf(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return 0, err
	}
	if len(unmanaged) > 0 {
		dc.recorder.Eventf(pdb, corev1.EventTypeWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" "+
			"field of the PDB to an integer value.", pdb.Spec.Selector)
	}
	now := dc.now()
	disrupted, recheck := dc.disruptedPods(pods, pdb, now)
	healthy := countHealthy(pods, disrupted, now)
	if err := dc.updateStatus(ctx, pdb, healthy, desired, expected, disrupted); err != nil {
		return 0, err
	}
	if recheck.IsZero() {
		return 0, nil
	}
	return max(recheck.Sub(now), time.Nanosecond), nil
}

// podsOf returns the pods pdb's selector selects in its namespace.
func (dc *Controller) podsOf(pdb *policyv1.PodDisruptionBudget) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return nil, err
	}
	return dc.pods.Namespace(pdb.Namespace).List(sel)
}

// expectedPodCount is kube's: with maxUnavailable, or a minAvailable
// percentage, the pods expected are the scales of their controllers added
// up (unmanaged pods named apart); with an integer minAvailable, the pods
// there are.
func (dc *Controller) expectedPodCount(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (expected, desired int32, unmanaged []string, err error) {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		if expected, unmanaged, err = dc.expectedScale(ctx, pods); err != nil {
			return 0, 0, nil, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desired = max(expected-int32(maxUnavailable), 0)
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		desired = pdb.Spec.MinAvailable.IntVal
		expected = int32(len(pods))
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.String:
		if expected, unmanaged, err = dc.expectedScale(ctx, pods); err != nil {
			return 0, 0, nil, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desired = int32(minAvailable)
	}
	return expected, desired, unmanaged, nil
}

// expectedScale adds up the scales of the controllers of pods, each
// counted once; pods with no controller are returned by name.
func (dc *Controller) expectedScale(ctx context.Context, pods []*corev1.Pod) (int32, []string, error) {
	scales := map[types.UID]int32{}
	var unmanaged []string
	for _, pod := range pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil {
			unmanaged = append(unmanaged, pod.Name)
			continue
		}
		if _, found := scales[ref.UID]; found {
			continue
		}
		found := false
		for _, finder := range dc.finders() {
			uid, scale, ok, err := finder(ctx, ref, pod.Namespace)
			if err != nil {
				return 0, nil, err
			}
			if ok {
				scales[uid] = scale
				found = true
				break
			}
		}
		if !found {
			return 0, nil, fmt.Errorf("found no controllers for pod %q", pod.Name)
		}
	}
	var expected int32
	for _, n := range scales {
		expected += n
	}
	return expected, unmanaged, nil
}

// finder maps a pod's controller reference to the controller's uid and
// scale; ok is false when the reference is not of its kind or names no
// such controller.
type finder func(ctx context.Context, ref *metav1.OwnerReference, namespace string) (uid types.UID, scale int32, ok bool, err error)

// finders are kube's, in kube's order: the workload controllers from the
// informers, and then any controller with a scale subresource.
func (dc *Controller) finders() []finder {
	return []finder{dc.replicationController, dc.deployment, dc.replicaSet, dc.statefulSet, dc.scaleController}
}

// ofKind reports whether ref is of kind in one of groups; a reference
// whose apiVersion does not parse is an error.
func ofKind(ref *metav1.OwnerReference, kind string, groups ...string) (bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false, err
	}
	return ref.Kind == kind && slices.Contains(groups, gv.Group), nil
}

func (dc *Controller) replicationController(_ context.Context, ref *metav1.OwnerReference, ns string) (types.UID, int32, bool, error) {
	if ok, err := ofKind(ref, "ReplicationController", ""); !ok || err != nil {
		return "", 0, false, err
	}
	rc, err := dc.rcs.Namespace(ns).Get(ref.Name)
	if err != nil || rc.UID != ref.UID {
		return "", 0, false, nil
	}
	return rc.UID, ptrOr(rc.Spec.Replicas), true, nil
}

// replicaSet finds a ReplicaSet no Deployment controls.
func (dc *Controller) replicaSet(_ context.Context, ref *metav1.OwnerReference, ns string) (types.UID, int32, bool, error) {
	rs, err := dc.ownedReplicaSet(ref, ns)
	if rs == nil || err != nil {
		return "", 0, false, err
	}
	if owner := metav1.GetControllerOfNoCopy(rs); owner != nil && owner.Kind == "Deployment" {
		return "", 0, false, nil
	}
	return rs.UID, ptrOr(rs.Spec.Replicas), true, nil
}

// deployment finds the Deployment of a pod's ReplicaSet.
func (dc *Controller) deployment(_ context.Context, ref *metav1.OwnerReference, ns string) (types.UID, int32, bool, error) {
	rs, err := dc.ownedReplicaSet(ref, ns)
	if rs == nil || err != nil {
		return "", 0, false, err
	}
	owner := metav1.GetControllerOfNoCopy(rs)
	if owner == nil {
		return "", 0, false, nil
	}
	if ok, err := ofKind(owner, "Deployment", "apps", "extensions"); !ok || err != nil {
		return "", 0, false, err
	}
	d, err := dc.ds.Namespace(rs.Namespace).Get(owner.Name)
	if err != nil || d.UID != owner.UID {
		return "", 0, false, nil
	}
	return d.UID, ptrOr(d.Spec.Replicas), true, nil
}

// ownedReplicaSet is the ReplicaSet ref names, nil when ref is not one or
// the cache holds no such ReplicaSet.
func (dc *Controller) ownedReplicaSet(ref *metav1.OwnerReference, ns string) (*appsv1.ReplicaSet, error) {
	if ok, err := ofKind(ref, "ReplicaSet", "apps", "extensions"); !ok || err != nil {
		return nil, err
	}
	rs, err := dc.rss.Namespace(ns).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil, nil
	}
	return rs, nil
}

func (dc *Controller) statefulSet(_ context.Context, ref *metav1.OwnerReference, ns string) (types.UID, int32, bool, error) {
	if ok, err := ofKind(ref, "StatefulSet", "apps"); !ok || err != nil {
		return "", 0, false, err
	}
	ss, err := dc.sss.Namespace(ns).Get(ref.Name)
	if err != nil || ss.UID != ref.UID {
		return "", 0, false, nil
	}
	return ss.UID, ptrOr(ss.Spec.Replicas), true, nil
}

// scaleController reads the scale subresource of the controller ref
// names; a controller that has none is an error, in kube's words.
func (dc *Controller) scaleController(ctx context.Context, ref *metav1.OwnerReference, ns string) (types.UID, int32, bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", 0, false, err
	}
	gvr, err := dc.client.ResourceFor(ctx, gv.WithKind(ref.Kind))
	if err != nil {
		return "", 0, false, err
	}
	scale, err := dc.client.GetScale(ctx, gvr, ns, ref.Name)
	if apierrors.IsNotFound(err) {
		// The controller is gone, or serves no scale: which is told
		// apart by discovery.
		serves, err := dc.client.ServesScale(ctx, gvr)
		if err != nil {
			return "", 0, false, err
		}
		if !serves {
			return "", 0, false, fmt.Errorf("%s does not implement the scale subresource", gvr.GroupResource().String())
		}
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, err
	}
	if scale.UID != ref.UID {
		return "", 0, false, nil
	}
	return scale.UID, scale.Spec.Replicas, true, nil
}

func ptrOr(n *int32) int32 {
	if n == nil {
		return 0
	}
	return *n
}

// disruptedPods is the budget's disruptedPods as kube rebuilds it: the
// entries of pods still there and not yet being deleted whose timeout
// has not run out (a NotDeleted event for each that has), and the
// earliest time one of them will.
func (dc *Controller) disruptedPods(pods []*corev1.Pod, pdb *policyv1.PodDisruptionBudget, now time.Time) (map[string]metav1.Time, time.Time) {
	out := map[string]metav1.Time{}
	var recheck time.Time
	if pdb.Status.DisruptedPods == nil {
		return out, recheck
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		at, found := pdb.Status.DisruptedPods[pod.Name]
		if !found {
			continue
		}
		expected := at.Add(DeletionTimeout)
		if expected.Before(now) {
			// kube's message names the namespace twice.
			dc.recorder.Eventf(pod, corev1.EventTypeWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't",
				pdb.Namespace, pdb.Namespace)
			continue
		}
		if recheck.IsZero() || expected.Before(recheck) {
			recheck = expected
		}
		out[pod.Name] = at
	}
	return out, recheck
}

// countHealthy counts the Ready pods neither being deleted nor recorded
// as about to be.
func countHealthy(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if at, found := disrupted[pod.Name]; found && at.Add(DeletionTimeout).After(now) {
			continue
		}
		if podutil.IsPodReady(pod) {
			n++
		}
	}
	return n
}

// updateStatus writes pdb's status when it differs from the one counted;
// no disruption is allowed while no pod is expected.
func (dc *Controller) updateStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget, healthy, desired, expected int32, disrupted map[string]metav1.Time) error {
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	st := pdb.Status
	if st.CurrentHealthy == healthy && st.DesiredHealthy == desired && st.ExpectedPods == expected && st.DisruptionsAllowed == allowed &&
		apiequality.Semantic.DeepEqual(st.DisruptedPods, disrupted) && st.ObservedGeneration == pdb.Generation && pdbhelper.ConditionsAreUpToDate(pdb) {
		return nil
	}
	next := pdb.DeepCopy()
	next.Status = policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy:     healthy,
		DesiredHealthy:     desired,
		ExpectedPods:       expected,
		DisruptionsAllowed: allowed,
		DisruptedPods:      disrupted,
		ObservedGeneration: pdb.Generation,
		Conditions:         next.Status.Conditions,
	}
	pdbhelper.UpdateDisruptionAllowedCondition(next)
	_, err := dc.client.UpdatePDBStatus(ctx, next)
	return err
}

// failSafe allows no disruption on pdb when its sync failed with err, the
// condition saying why, so that no eviction is approved on a status that
// could not be counted.
func (dc *Controller) failSafe(ctx context.Context, pdb *policyv1.PodDisruptionBudget, err error) error {
	next := pdb.DeepCopy()
	next.Status.DisruptionsAllowed = 0
	if next.Status.Conditions == nil {
		next.Status.Conditions = []metav1.Condition{}
	}
	apimeta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{
		Type:               policyv1.DisruptionAllowedCondition,
		Status:             metav1.ConditionFalse,
		Reason:             policyv1.SyncFailedReason,
		Message:            err.Error(),
		ObservedGeneration: next.Status.ObservedGeneration,
	})
	_, uerr := dc.client.UpdatePDBStatus(ctx, next)
	return uerr
}

// staleDisruption reports whether pod, not being deleted nor terminal,
// holds a True DisruptionTarget condition not set by its kubelet, and how
// long until the condition is stale.
func (dc *Controller) staleDisruption(pod *corev1.Pod) (bool, time.Duration) {
	if pod.DeletionTimestamp != nil {
		return false, 0
	}
	_, c := podutil.GetPodCondition(&pod.Status, corev1.DisruptionTarget)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason == corev1.PodReasonTerminationByKubelet || podutil.IsPodPhaseTerminal(pod.Status.Phase) {
		return false, 0
	}
	return true, max(dc.stale-dc.now().Sub(c.LastTransitionTime.Time), 0)
}

// syncStaleDisruption sets the pod's DisruptionTarget condition to False
// once it is stale.
func (dc *Controller) syncStaleDisruption(ctx context.Context, k key) (controller.Result, error) {
	pod, err := dc.pods.Namespace(k.namespace).Get(k.name)
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	stale, after := dc.staleDisruption(pod)
	if !stale {
		return controller.Result{}, nil
	}
	if after > 0 {
		return controller.Result{RequeueAfter: after}, nil
	}
	next := pod.DeepCopy()
	if !podutil.UpdatePodCondition(&next.Status, &corev1.PodCondition{
		Type:               corev1.DisruptionTarget,
		ObservedGeneration: podutil.CalculatePodConditionObservedGeneration(&next.Status, next.Generation, corev1.DisruptionTarget),
		Status:             corev1.ConditionFalse,
	}) {
		return controller.Result{}, nil
	}
	if _, err := dc.client.UpdatePodStatus(ctx, next); err != nil {
		return controller.Result{}, err
	}
	dc.Logger().Debug("reset stale DisruptionTarget condition to False", "pod", k.namespace+"/"+k.name)
	return controller.Result{}, nil
}
