package daemonset

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubecontroller "k8s.io/kubernetes/pkg/controller"
	"k8s.io/kubernetes/pkg/controller/daemon"
	"k8s.io/kubernetes/pkg/controller/daemon/util"
	labelsutil "k8s.io/kubernetes/pkg/util/labels"

	"github.com/listwatch/listwatch/controller"
)

// rollingUpdate takes one step of a RollingUpdate, as kube's does.
// Without surge it deletes old pods, the unavailable ones and then as
// many available ones as maxUnavailable leaves room for (manage creates
// their replacements on the next sync); with surge it creates new pods
// beside old ones, on the nodes whose old pod is unavailable and on at
// most maxSurge more, and deletes each old pod once the new one beside
// it is available.
func (r *run) rollingUpdate(ctx context.Context, hash string) error {
	ds := r.ds
	byNode, err := r.nodesToPods(ctx, false)
	if err != nil {
		return err
	}
	maxSurge, maxUnavailable, desired, err := r.updatedDesiredNodeCounts(byNode)
	if err != nil {
		return fmt.Errorf("couldn't get unavailable numbers: %w", err)
	}
	now := metav1.Time{Time: r.dsc.failedPods.Clock.Now()}
	available := func(pod *corev1.Pod) bool { return podutil.IsPodAvailable(pod, ds.Spec.MinReadySeconds, now) }

	if maxSurge == 0 {
		var numUnavailable int
		var replacements, candidates []string
		for _, pods := range byNode {
			newPod, oldPod, ok := r.updatedPodsOnNode(pods, hash)
			switch {
			case !ok:
				// Excess pods: manage prunes them; the node counts as
				// unavailable.
				numUnavailable++
			case (oldPod == nil) == (newPod == nil):
				// manage creates or deletes a pod here.
				numUnavailable++
			case newPod != nil:
				if !available(newPod) {
					numUnavailable++
				}
			case !available(oldPod):
				// An old pod that is not available is replaced at once.
				replacements = append(replacements, oldPod.Name)
				numUnavailable++
			case numUnavailable >= maxUnavailable:
			default:
				candidates = append(candidates, oldPod.Name)
			}
		}
		remaining := min(max(maxUnavailable-numUnavailable, 0), len(candidates))
		return r.syncNodes(ctx, append(replacements, candidates[:remaining]...), nil, hash)
	}

	var oldPodsToDelete, shouldNotRunPodsToDelete, candidateNewNodes, allowedNewNodes []string
	var numSurge, numAvailable int
	for nodeName, pods := range byNode {
		newPod, oldPod, ok := r.updatedPodsOnNode(pods, hash)
		if !ok {
			// Excess pods: manage prunes them; the node counts as a
			// surge.
			numSurge++
			continue
		}
		switch {
		case oldPod != nil:
			if available(oldPod) {
				numAvailable++
			}
		case newPod != nil:
			if available(newPod) {
				numAvailable++
			}
		}
		switch {
		case oldPod == nil:
			// manage does what this node needs.
		case newPod == nil:
			node, ok, err := r.dsc.inf.Nodes.GetIndexer().GetByKey(nodeName)
			if err != nil || !ok {
				return fmt.Errorf("couldn't get node for nodeName %q: %w", nodeName, nodeNotFound(err, nodeName))
			}
			shouldRun, _ := nodeShouldRun(node, ds)
			switch {
			case !available(oldPod) && !shouldRun:
				oldPodsToDelete = append(oldPodsToDelete, oldPod.Name)
			case !available(oldPod):
				allowedNewNodes = append(allowedNewNodes, nodeName)
			case !shouldRun:
				shouldNotRunPodsToDelete = append(shouldNotRunPodsToDelete, oldPod.Name)
			case numSurge >= maxSurge:
			default:
				candidateNewNodes = append(candidateNewNodes, nodeName)
			}
		default:
			if !available(newPod) {
				// Surged here, waiting for the new pod.
				numSurge++
				continue
			}
			oldPodsToDelete = append(oldPodsToDelete, oldPod.Name)
		}
	}
	// With surge the owner expects full availability: a pod on a node
	// the set no longer selects goes only once a pod elsewhere is
	// available in its stead.
	if deletable := min(numAvailable-desired, len(shouldNotRunPodsToDelete)); deletable > 0 {
		for _, name := range shouldNotRunPodsToDelete[:deletable] {
			if _, err := r.dsc.pods.Namespace(ds.Namespace).Get(name); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("couldn't get pod which should be deleted due to scheduling constraints %q: %w", name, err)
			}
			oldPodsToDelete = append(oldPodsToDelete, name)
		}
	}
	remaining := min(max(maxSurge-numSurge, 0), len(candidateNewNodes))
	return r.syncNodes(ctx, oldPodsToDelete, append(allowedNewNodes, candidateNewNodes[:remaining]...), hash)
}

// nodeNotFound is the error of a node the cache does not hold.
func nodeNotFound(err error, name string) error {
	if err != nil {
		return err
	}
	return apierrors.NewNotFound(corev1.Resource("nodes"), name)
}

// updatedPodsOnNode returns a node's one pod of the current revision and
// its one older pod (either may be nil), leaving out pods being deleted;
// ok is false when it has more than one of either, which manage prunes
// first.
func (r *run) updatedPodsOnNode(pods []*corev1.Pod, hash string) (newPod, oldPod *corev1.Pod, ok bool) {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if util.IsPodUpdated(pod, hash, r.generation) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = pod
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = pod
		}
	}
	return newPod, oldPod, true
}

// updatedDesiredNodeCounts returns the surge and unavailability the
// update strategy allows and how many nodes should run a pod, and adds
// to byNode an empty entry for each of those that has none.
func (r *run) updatedDesiredNodeCounts(byNode map[string][]*corev1.Pod) (maxSurge, maxUnavailable, desired int, err error) {
	for _, node := range r.nodes {
		if shouldRun, _ := nodeShouldRun(node, r.ds); !shouldRun {
			continue
		}
		desired++
		if _, ok := byNode[node.Name]; !ok {
			byNode[node.Name] = nil
		}
	}
	if maxUnavailable, err = util.UnavailableCount(r.ds, desired); err != nil {
		return -1, -1, -1, fmt.Errorf("invalid value for MaxUnavailable: %w", err)
	}
	if maxSurge, err = util.SurgeCount(r.ds, desired); err != nil {
		return -1, -1, -1, fmt.Errorf("invalid value for MaxSurge: %w", err)
	}
	if desired > 0 && maxUnavailable == 0 && maxSurge == 0 {
		// Neither allowed (the API server does not let that through):
		// kube allows one unavailable pod.
		r.dsc.log.Info("DaemonSet is not configured for surge or unavailability, defaulting to accepting unavailability", "daemonset", r.key)
		maxUnavailable = 1
	}
	return maxSurge, maxUnavailable, desired, nil
}

// constructHistory returns the set's revision of its current template,
// made if there is none, and its other revisions: it adopts the orphans
// its selector matches, labels every revision with its hash, keeps one
// revision of the current template (the newest; the set's pods are
// relabelled to it) and numbers it after the others.
func (r *run) constructHistory(ctx context.Context) (cur *appsv1.ControllerRevision, old []*appsv1.ControllerRevision, err error) {
	histories, err := r.claimRevisions(ctx)
	if err != nil {
		return nil, nil, err
	}
	var current []*appsv1.ControllerRevision
	for _, h := range histories {
		if _, ok := h.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; !ok {
			// Revisions of old releases lack the label: their name
			// stands in for the hash.
			toUpdate := h.DeepCopy()
			if toUpdate.Labels == nil {
				toUpdate.Labels = map[string]string{}
			}
			toUpdate.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = toUpdate.Name
			if h, err = r.dsc.client.UpdateRevision(ctx, toUpdate); err != nil {
				return nil, nil, err
			}
		}
		match, err := daemon.Match(r.ds, h)
		if err != nil {
			return nil, nil, err
		}
		if match {
			current = append(current, h)
		} else {
			old = append(old, h)
		}
	}
	next := maxRevision(old) + 1
	if len(current) == 0 {
		cur, err = r.snapshot(ctx, next)
		return cur, old, err
	}
	if cur, err = r.dedupCurrent(ctx, current); err != nil {
		return nil, nil, err
	}
	if cur.Revision < next {
		toUpdate := cur.DeepCopy()
		toUpdate.Revision = next
		if _, err := r.dsc.client.UpdateRevision(ctx, toUpdate); err != nil {
			return nil, nil, err
		}
	}
	return cur, old, nil
}

// claimRevisions returns the revisions of the set's namespace that it
// controls and its selector matches, and the orphans it matches, which it
// adopts; those it controls but no longer matches, it releases (kube's
// ClaimControllerRevisions).
func (r *run) claimRevisions(ctx context.Context) ([]*appsv1.ControllerRevision, error) {
	ds := r.ds
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	idx := r.dsc.inf.ControllerRevisions.GetIndexer()
	owned, err := controller.Controlled(idx, ds.Namespace, ds.UID)
	if err != nil {
		return nil, err
	}
	orphans, err := controller.Orphans(idx, ds.Namespace)
	if err != nil {
		return nil, err
	}
	var claimed []*appsv1.ControllerRevision
	var errs []error
	for _, h := range owned {
		if selector.Matches(labels.Set(h.Labels)) {
			claimed = append(claimed, h)
		} else if _, err := controller.ReleaseRevision(ctx, r.dsc.client, ds, h); err != nil {
			errs = append(errs, err)
		}
	}
	for _, h := range orphans {
		if h.DeletionTimestamp != nil || !selector.Matches(labels.Set(h.Labels)) {
			continue
		}
		if err := r.adopt.Check(ctx); err != nil {
			errs = append(errs, err)
			break
		}
		adopted, err := controller.AdoptRevision(ctx, r.dsc.client, ds, controllerKind, h)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, err)
		default:
			claimed = append(claimed, adopted)
		}
	}
	if len(errs) > 0 {
		return claimed, fmt.Errorf("claiming ControllerRevisions of DaemonSet %s: %w", r.key, errors.Join(errs...))
	}
	return claimed, nil
}

// maxRevision is the highest revision number of revs, 0 for none.
func maxRevision(revs []*appsv1.ControllerRevision) int64 {
	var m int64
	for _, h := range revs {
		m = max(m, h.Revision)
	}
	return m
}

// dedupCurrent keeps, of several revisions of the current template, the
// one with the highest number: the set's pods are relabelled with its
// hash, the others deleted.
func (r *run) dedupCurrent(ctx context.Context, current []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	if len(current) == 1 {
		return current[0], nil
	}
	var keep *appsv1.ControllerRevision
	var maxRev int64
	for _, h := range current {
		if h.Revision >= maxRev {
			keep, maxRev = h, h.Revision
		}
	}
	pods, err := r.claimPods(ctx)
	if err != nil {
		return nil, err
	}
	keepHash := keep.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	for _, pod := range pods {
		if pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == keepHash {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{appsv1.DefaultDaemonSetUniqueLabelKey: keepHash}}})
		if err != nil {
			return nil, err
		}
		if _, err := r.dsc.client.PatchPod(ctx, r.ds.Namespace, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return nil, err
		}
	}
	for _, h := range current {
		if h.Name == keep.Name {
			continue
		}
		if err := r.dsc.client.DeleteRevision(ctx, r.ds.Namespace, h.Name); err != nil {
			return nil, err
		}
	}
	return keep, nil
}

// templatePatch is what a DaemonSet's revision holds: a strategic merge
// patch that puts its spec.template back, as kube's getPatch makes it
// (daemon.Match compares revisions with it).
func templatePatch(ds *appsv1.DaemonSet) ([]byte, error) {
	b, err := json.Marshal(ds)
	if err != nil {
		return nil, err
	}
	var raw struct {
		Spec struct {
			Template map[string]any `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	raw.Spec.Template["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": raw.Spec.Template}})
}

// snapshot creates the revision of the set's current template, numbered
// revision, named "<set>-<hash of the template and collisionCount>". A
// revision of that name holding this template is the one; one holding
// another is a hash collision: the set's collisionCount goes up (so the
// next sync tries another name) and the sync fails.
func (r *run) snapshot(ctx context.Context, revision int64) (*appsv1.ControllerRevision, error) {
	ds := r.ds
	patch, err := templatePatch(ds)
	if err != nil {
		return nil, err
	}
	hash := kubecontroller.ComputeHash(&ds.Spec.Template, ds.Status.CollisionCount)
	name := ds.Name + "-" + hash
	h := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       ds.Namespace,
			Labels:          labelsutil.CloneAndAddLabel(ds.Spec.Template.Labels, appsv1.DefaultDaemonSetUniqueLabelKey, hash),
			Annotations:     ds.Annotations,
			OwnerReferences: []metav1.OwnerReference{*controller.NewControllerRef(ds, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: patch},
		Revision: revision,
	}
	created, createErr := r.dsc.client.CreateRevision(ctx, h)
	if !apierrors.IsAlreadyExists(createErr) {
		return created, createErr
	}
	existing, err := r.dsc.client.GetRevision(ctx, ds.Namespace, name)
	if err != nil {
		return nil, err
	}
	if match, err := daemon.Match(ds, existing); err != nil || match {
		return existing, err
	}
	// A collision: counted on the set as the server has it, unless the
	// count this sync used was stale already.
	fresh, err := r.dsc.client.GetDaemonSet(ctx, ds.Namespace, ds.Name)
	if err != nil {
		return nil, err
	}
	if !equalCounts(fresh.Status.CollisionCount, ds.Status.CollisionCount) {
		return nil, fmt.Errorf("found a stale collision count (%d, expected %d) of DaemonSet %q while processing; will retry until it is updated", deref(ds.Status.CollisionCount), deref(fresh.Status.CollisionCount), ds.Name)
	}
	fresh.Status.CollisionCount = new(deref(fresh.Status.CollisionCount) + 1)
	if _, err := r.dsc.client.UpdateDaemonSetStatus(ctx, fresh); err != nil {
		return nil, err
	}
	r.dsc.log.Info("found a hash collision for DaemonSet - bumping collisionCount to resolve it", "daemonset", r.key, "collisionCount", *fresh.Status.CollisionCount)
	return nil, createErr
}

func equalCounts(a, b *int32) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// cleanupHistory deletes the oldest of the set's old revisions beyond
// revisionHistoryLimit, keeping any that a pod of the set (terminal ones
// being deleted included) still runs.
func (r *run) cleanupHistory(ctx context.Context, old []*appsv1.ControllerRevision) error {
	byNode, err := r.nodesToPods(ctx, true)
	if err != nil {
		return err
	}
	toKill := len(old) - int(*r.ds.Spec.RevisionHistoryLimit)
	if toKill <= 0 {
		return nil
	}
	live := map[string]bool{}
	for _, pods := range byNode {
		for _, pod := range pods {
			if h := pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; h != "" {
				live[h] = true
			}
		}
	}
	old = slices.Clone(old)
	slices.SortStableFunc(old, func(a, b *appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	for _, h := range old {
		if toKill <= 0 {
			break
		}
		if live[h.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] {
			continue
		}
		if err := r.dsc.client.DeleteRevision(ctx, r.ds.Namespace, h.Name); err != nil {
			return err
		}
		toKill--
	}
	return nil
}
