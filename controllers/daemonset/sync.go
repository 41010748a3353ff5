package daemonset

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubecontroller "k8s.io/kubernetes/pkg/controller"
	"k8s.io/kubernetes/pkg/controller/daemon"
	"k8s.io/kubernetes/pkg/controller/daemon/util"

	"github.com/listwatch/listwatch/controller"
)

// Reasons of the events about DaemonSets, kube's.
const (
	SelectingAllReason       = daemon.SelectingAllReason
	FailedDaemonPodReason    = daemon.FailedDaemonPodReason
	SucceededDaemonPodReason = daemon.SucceededDaemonPodReason
)

// statusUpdateRetries is how many times a failed status write is retried
// on a fresh read of the set before the sync fails: kube's
// StatusUpdateRetries.
const statusUpdateRetries = 1

// nodeShouldRun is kube's NodeShouldRunDaemonPod: whether ds should run
// a pod on node that has none, and whether a pod already there should
// keep running.
func nodeShouldRun(node *corev1.Node, ds *appsv1.DaemonSet) (shouldRun, shouldContinueRunning bool) {
	return daemon.NodeShouldRunDaemonPod(klog.Background(), node, ds)
}

// run is one sync of one set: what its steps share.
type run struct {
	dsc   *Controller
	ds    *appsv1.DaemonSet
	key   string
	nodes []*corev1.Node
	adopt *controller.AdoptionCheck
	// generation is the set's deprecated template generation, nil when
	// it has none (or an unparsable one, as kube treats it).
	generation *int64
	// requeue is the earliest time the set should be looked at again
	// (a failed pod's backoff, a pod becoming available); zero: none.
	requeue time.Duration
}

// after asks for another sync of the set in d (the earliest asked wins).
func (r *run) after(d time.Duration) {
	d = max(d, time.Millisecond)
	if r.requeue == 0 || d < r.requeue {
		r.requeue = d
	}
}

// sync brings the DaemonSet of key, its pods and its revisions in line,
// as kube's syncDaemonSet does: the current template's revision made (or
// found), then, once the pod creations and deletions of the last sync are
// all seen, the pods each node should run created and the others deleted,
// the rolling update's step taken, the history trimmed; and the status
// written in every case.
func (dsc *Controller) sync(ctx context.Context, key string) (controller.Result, error) {
	ds, ok, err := dsc.inf.DaemonSets.GetIndexer().GetByKey(key)
	if err != nil {
		return controller.Result{}, err
	}
	if !ok {
		dsc.expectations.DeleteExpectations(key)
		return controller.Result{}, nil
	}
	nodes := dsc.inf.Nodes.GetIndexer().List()
	if reflect.DeepEqual(ds.Spec.Selector, &metav1.LabelSelector{}) {
		dsc.recorder.Eventf(ds, corev1.EventTypeWarning, SelectingAllReason, "This daemon set is selecting all pods. A non-empty selector is required.")
		return controller.Result{}, nil
	}
	// A set being deleted may have lost its revisions already (the
	// garbage collector deletes them in no order with its pods): its
	// status cannot be computed, and kube leaves it.
	if ds.DeletionTimestamp != nil {
		return controller.Result{}, nil
	}
	r := &run{dsc: dsc, ds: ds, key: key, nodes: nodes, adopt: &controller.AdoptionCheck{
		Owner: ds, Kind: controllerKind.Kind,
		Get: func(ctx context.Context) (metav1.Object, error) {
			return dsc.client.GetDaemonSet(ctx, ds.Namespace, ds.Name)
		},
	}}
	if r.generation, err = util.GetTemplateGeneration(ds); err != nil {
		r.generation = nil
	}
	cur, old, err := r.constructHistory(ctx)
	if err != nil {
		return controller.Result{}, fmt.Errorf("failed to construct revisions of DaemonSet: %w", err)
	}
	hash := cur.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	if !dsc.expectations.SatisfiedExpectations(key) {
		// Only the status: observedGeneration stays, this generation
		// was not acted on.
		err := r.updateStatus(ctx, hash, false)
		return controller.Result{RequeueAfter: r.requeue}, err
	}
	err = r.update(ctx, hash, old)
	statusErr := r.updateStatus(ctx, hash, true)
	switch {
	case err != nil && statusErr != nil:
		dsc.log.Error("failed to update status", "daemonset", key, "err", statusErr)
		return controller.Result{}, err
	case err != nil:
		return controller.Result{}, err
	case statusErr != nil:
		return controller.Result{}, statusErr
	}
	return controller.Result{RequeueAfter: r.requeue}, nil
}

// update creates and deletes pods, takes a step of the rolling update
// and trims the history.
func (r *run) update(ctx context.Context, hash string, old []*appsv1.ControllerRevision) error {
	if err := r.manage(ctx, hash); err != nil {
		return err
	}
	if r.dsc.expectations.SatisfiedExpectations(r.key) && r.ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if err := r.rollingUpdate(ctx, hash); err != nil {
			return err
		}
	}
	if err := r.cleanupHistory(ctx, old); err != nil {
		return fmt.Errorf("failed to clean up revisions of DaemonSet: %w", err)
	}
	return nil
}

// claimPods returns the pods the set manages: its own that its selector
// matches and the orphans of its namespace that it does, which it adopts;
// its own that it no longer selects, it releases.
func (r *run) claimPods(ctx context.Context) ([]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(r.ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	idx := r.dsc.inf.Pods.GetIndexer()
	owned, err := controller.ControlledPods(idx, r.ds.Namespace, r.ds.UID)
	if err != nil {
		return nil, err
	}
	orphans, err := controller.Orphans(idx, r.ds.Namespace)
	if err != nil {
		return nil, err
	}
	m := &controller.PodControllerRefManager{
		Control:    r.dsc.podControl,
		Controller: r.ds,
		Selector:   selector,
		Kind:       controllerKind,
		Recheck:    r.adopt.Fresh,
	}
	return m.ClaimPods(ctx, append(owned[:len(owned):len(owned)], orphans...))
}

// nodesToPods returns the set's pods by the node each is for (bound to,
// or, while pending, required by its node affinity). Terminal pods being
// deleted are left out unless includeDeletedTerminal.
func (r *run) nodesToPods(ctx context.Context, includeDeletedTerminal bool) (map[string][]*corev1.Pod, error) {
	pods, err := r.claimPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("couldn't get node to daemon pod mapping for daemon set %q: %w", r.ds.Name, err)
	}
	out := make(map[string][]*corev1.Pod)
	for _, pod := range pods {
		if !includeDeletedTerminal && podutil.IsPodTerminal(pod) && pod.DeletionTimestamp != nil {
			continue
		}
		node, err := util.GetTargetNodeName(pod)
		if err != nil {
			continue
		}
		out[node] = append(out[node], pod)
	}
	return out, nil
}

// manage creates the pods nodes that should run one lack, and deletes
// those on nodes that should not, the failed and succeeded ones, the
// extra ones on a node, and the pending ones of nodes gone.
func (r *run) manage(ctx context.Context, hash string) error {
	byNode, err := r.nodesToPods(ctx, false)
	if err != nil {
		return err
	}
	var create, del []string
	for _, node := range r.nodes {
		c, d := r.podsShouldBeOnNode(node, byNode, hash)
		create = append(create, c...)
		del = append(del, d...)
	}
	del = append(del, unscheduledPodsWithoutNode(r.nodes, byNode)...)
	return r.syncNodes(ctx, del, create, hash)
}

// podsShouldBeOnNode returns whether node needs a pod of the set created
// (its name, or none) and which of the set's pods on it are to be
// deleted, as kube's podsShouldBeOnNode decides.
func (r *run) podsShouldBeOnNode(node *corev1.Node, byNode map[string][]*corev1.Pod, hash string) (create, del []string) {
	ds := r.ds
	shouldRun, shouldContinue := nodeShouldRun(node, ds)
	pods, exists := byNode[node.Name]
	switch {
	case shouldRun && !exists:
		create = append(create, node.Name)
	case shouldContinue:
		var running []*corev1.Pod
		for _, pod := range pods {
			if pod.DeletionTimestamp != nil {
				continue
			}
			switch pod.Status.Phase {
			case corev1.PodFailed:
				// The set must not fight a kubelet that keeps rejecting
				// its pod: the deletions back off, per node.
				key := fmt.Sprintf("%s/%d/%s", ds.UID, ds.Status.ObservedGeneration, node.Name)
				now := r.dsc.failedPods.Clock.Now()
				if r.dsc.failedPods.IsInBackOffSinceUpdate(key, now) {
					r.after(r.dsc.failedPods.Get(key))
					continue
				}
				r.dsc.failedPods.Next(key, now)
				r.dsc.recorder.Eventf(ds, corev1.EventTypeWarning, FailedDaemonPodReason, "%s",
					fmt.Sprintf("Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, node.Name))
				del = append(del, pod.Name)
			case corev1.PodSucceeded:
				r.dsc.recorder.Eventf(ds, corev1.EventTypeNormal, SucceededDaemonPodReason, "%s",
					fmt.Sprintf("Found succeeded daemon pod %s/%s on node %s, will try to delete it", pod.Namespace, pod.Name, node.Name))
				del = append(del, pod.Name)
			default:
				running = append(running, pod)
			}
		}
		if !util.AllowsSurge(ds) {
			// One pod a node: all but the oldest go.
			if len(running) > 1 {
				sortOldestFirst(running)
				for _, p := range running[1:] {
					del = append(del, p.Name)
				}
			}
			break
		}
		if len(running) <= 1 {
			if len(running) == 0 && shouldRun {
				// Surging, a node keeps at least one pod that is not
				// being deleted.
				create = append(create, node.Name)
			}
			break
		}
		// Surging, a node keeps two pods only while the oldest of the
		// current revision is not yet available and the oldest old one
		// is ready; every other pod goes.
		var oldestNew, oldestOld *corev1.Pod
		sortOldestFirst(running)
		for _, pod := range running {
			if pod.Labels[appsv1.ControllerRevisionHashLabelKey] == hash {
				if oldestNew == nil {
					oldestNew = pod
					continue
				}
			} else if oldestOld == nil {
				oldestOld = pod
				continue
			}
			del = append(del, pod.Name)
		}
		if oldestNew != nil && oldestOld != nil {
			switch {
			case !podutil.IsPodReady(oldestOld):
				del = append(del, oldestOld.Name)
			case podutil.IsPodAvailable(oldestNew, ds.Spec.MinReadySeconds, metav1.Time{Time: r.dsc.failedPods.Clock.Now()}):
				del = append(del, oldestOld.Name)
			}
		}
	case !shouldContinue && exists:
		for _, pod := range pods {
			if pod.DeletionTimestamp == nil {
				del = append(del, pod.Name)
			}
		}
	}
	return create, del
}

// sortOldestFirst orders a node's pods as kube's
// podByCreationTimestampAndPhase: bound pods first, then the oldest, then
// by name.
func sortOldestFirst(pods []*corev1.Pod) {
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		if ab, bb := a.Spec.NodeName != "", b.Spec.NodeName != ""; ab != bb {
			if ab {
				return -1
			}
			return 1
		}
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return cmp.Compare(a.Name, b.Name)
		}
		if a.CreationTimestamp.Before(&b.CreationTimestamp) {
			return -1
		}
		return 1
	})
}

// unscheduledPodsWithoutNode returns the set's pending pods meant for
// nodes that are gone: nothing else would delete them.
func unscheduledPodsWithoutNode(nodes []*corev1.Node, byNode map[string][]*corev1.Pod) []string {
	exists := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		exists[n.Name] = true
	}
	var out []string
	for name, pods := range byNode {
		if exists[name] {
			continue
		}
		for _, pod := range pods {
			if pod.Spec.NodeName == "" {
				out = append(out, pod.Name)
			}
		}
	}
	return out
}

// syncNodes deletes the pods named and creates a pod for each node named,
// at most the controller's burst of each, the creations in slow-start
// batches, with the set's expectations raised first so that the next
// sync waits for the cache to show them.
func (r *run) syncNodes(ctx context.Context, del, create []string, hash string) error {
	dsc, ds := r.dsc, r.ds
	createDiff, deleteDiff := min(len(create), dsc.burst), min(len(del), dsc.burst)
	dsc.expectations.SetExpectations(r.key, createDiff, deleteDiff)
	template := util.CreatePodTemplate(ds.Spec.Template, r.generation, hash)
	ref := controller.NewControllerRef(ds, controllerKind)
	var attempted atomic.Int64
	_, createErr := controller.SlowStartBatch(ctx, createDiff, kubecontroller.SlowStartInitialBatchSize, createDiff, func(ctx context.Context, i int) error {
		attempted.Add(1)
		pod := template.DeepCopy()
		// The scheduler binds the pod to its node through a required
		// node affinity on the node's name.
		pod.Spec.Affinity = util.ReplaceDaemonSetPodNodeNameNodeAffinity(pod.Spec.Affinity, create[i])
		err := dsc.podControl.CreatePods(ctx, ds.Namespace, pod, ds, ref)
		if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// The namespace is going: so will the set.
			return nil
		}
		if err != nil {
			dsc.expectations.CreationObserved(r.key)
		}
		return err
	})
	if skipped := createDiff - int(attempted.Load()); createErr != nil && skipped > 0 {
		// Creations never tried are not expected.
		dsc.expectations.LowerExpectations(r.key, skipped, 0)
	}
	var mu sync.Mutex
	errs := []error{createErr}
	var wg sync.WaitGroup
	for _, name := range del[:deleteDiff] {
		wg.Go(func() {
			if err := dsc.podControl.DeletePod(ctx, ds.Namespace, name, ds); err != nil {
				// A deletion that failed will never be seen.
				dsc.expectations.DeletionObserved(r.key)
				if !apierrors.IsNotFound(err) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// updateStatus computes the set's status from its pods on the nodes and
// writes it when it changed (observedGeneration too when
// updateObservedGen), as kube's updateDaemonSetStatus does. With
// minReadySeconds, a set whose ready pods are not all available is
// looked at again then.
func (r *run) updateStatus(ctx context.Context, hash string, updateObservedGen bool) error {
	ds := r.ds
	byNode, err := r.nodesToPods(ctx, false)
	if err != nil {
		return err
	}
	now := r.dsc.failedPods.Clock.Now()
	var st appsv1.DaemonSetStatus
	for _, node := range r.nodes {
		shouldRun, _ := nodeShouldRun(node, ds)
		pods := byNode[node.Name]
		scheduled := len(pods) > 0
		if !shouldRun {
			if scheduled {
				st.NumberMisscheduled++
			}
			continue
		}
		st.DesiredNumberScheduled++
		if !scheduled {
			continue
		}
		st.CurrentNumberScheduled++
		sortOldestFirst(pods)
		pod := pods[0]
		if podutil.IsPodReady(pod) {
			st.NumberReady++
			if podutil.IsPodAvailable(pod, ds.Spec.MinReadySeconds, metav1.Time{Time: now}) {
				st.NumberAvailable++
			}
		}
		if util.IsPodUpdated(pod, hash, r.generation) {
			st.UpdatedNumberScheduled++
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	if err := r.storeStatus(ctx, st, updateObservedGen); err != nil {
		return fmt.Errorf("error storing status for daemon set %s: %w", r.key, err)
	}
	if ds.Spec.MinReadySeconds > 0 && st.NumberReady != st.NumberAvailable {
		r.after(time.Duration(ds.Spec.MinReadySeconds) * time.Second)
	}
	return nil
}

// storeStatus writes the counts of st, unless the set has them already
// and its status is of its generation; a failed write is retried once on
// the set read afresh.
func (r *run) storeStatus(ctx context.Context, st appsv1.DaemonSetStatus, updateObservedGen bool) error {
	ds := r.ds
	cur := ds.Status
	if cur.DesiredNumberScheduled == st.DesiredNumberScheduled && cur.CurrentNumberScheduled == st.CurrentNumberScheduled &&
		cur.NumberMisscheduled == st.NumberMisscheduled && cur.NumberReady == st.NumberReady &&
		cur.UpdatedNumberScheduled == st.UpdatedNumberScheduled && cur.NumberAvailable == st.NumberAvailable &&
		cur.NumberUnavailable == st.NumberUnavailable && cur.ObservedGeneration >= ds.Generation {
		return nil
	}
	toUpdate := ds.DeepCopy()
	for i := 0; ; i++ {
		if updateObservedGen {
			toUpdate.Status.ObservedGeneration = ds.Generation
		}
		toUpdate.Status.DesiredNumberScheduled = st.DesiredNumberScheduled
		toUpdate.Status.CurrentNumberScheduled = st.CurrentNumberScheduled
		toUpdate.Status.NumberMisscheduled = st.NumberMisscheduled
		toUpdate.Status.NumberReady = st.NumberReady
		toUpdate.Status.UpdatedNumberScheduled = st.UpdatedNumberScheduled
		toUpdate.Status.NumberAvailable = st.NumberAvailable
		toUpdate.Status.NumberUnavailable = st.NumberUnavailable
		_, err := r.dsc.client.UpdateDaemonSetStatus(ctx, toUpdate)
		if err == nil || i >= statusUpdateRetries {
			return err
		}
		if toUpdate, err = r.dsc.client.GetDaemonSet(ctx, ds.Namespace, ds.Name); err != nil {
			return err
		}
	}
}
