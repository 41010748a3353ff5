package deployment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// run is one sync of one Deployment. d is the controller's copy, kept up
// to date with what the server returns for each write, so that the writes
// of one sync do not conflict with one another.
type run struct {
	c   *Controller
	ctx context.Context
	d   *appsv1.Deployment
	// requeueAfter, when not negative, asks for another sync after it:
	// the progress deadline check.
	requeueAfter time.Duration
	// wroteD is a copy of what the last write of the Deployment in this
	// sync returned, for the next sync to build on if the cache has not
	// shown it yet.
	wroteD *appsv1.Deployment
}

// wrote records that base, as this sync saw it, was written and the
// server returned rs, and returns rs: later steps of the sync, and later
// syncs while the cache lags, build on it (kube's controller reads the
// cache again, and conflicts).
func (r *run) wrote(base, rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	r.c.rsWrites.Replaced(rs.Namespace+"/"+rs.Name, base, rs)
	return rs
}

// latest replaces, in place, the ReplicaSets of rsList that this
// controller has written since the cache last showed them by what it
// wrote.
func (r *run) latest(rsList []*appsv1.ReplicaSet) {
	for i, rs := range rsList {
		rsList[i] = r.c.rsWrites.Latest(rs.Namespace+"/"+rs.Name, rs)
	}
}

func (r *run) syncDeployment() error {
	d := r.d
	if d.Spec.Selector == nil {
		// Validation refuses it; such a Deployment selects nothing.
		return nil
	}
	if reflect.DeepEqual(*d.Spec.Selector, metav1.LabelSelector{}) {
		r.c.event(d, corev1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			return r.updateStatus()
		}
		return nil
	}
	rsList, err := r.claimReplicaSets()
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		return r.syncStatusOnly(rsList)
	}
	if err := r.checkPausedConditions(); err != nil {
		return err
	}
	if r.d.Spec.Paused {
		return r.scaleAndSyncStatus(rsList)
	}
	if _, ok := rollbackTo(r.d); ok {
		return r.rollback(rsList)
	}
	scaling, err := r.isScalingEvent(rsList)
	if err != nil {
		return err
	}
	if scaling {
		return r.scaleAndSyncStatus(rsList)
	}
	switch r.d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return r.rolloutRecreate(rsList)
	case appsv1.RollingUpdateDeploymentStrategyType:
		return r.rolloutRolling(rsList)
	}
	return fmt.Errorf("deployment %s/%s: unexpected strategy %q", d.Namespace, d.Name, d.Spec.Strategy.Type)
}

// updateStatus writes r.d's status (and annotations) and keeps what the
// server returned.
func (r *run) updateStatus() error {
	updated, err := r.c.client.UpdateDeploymentStatus(r.ctx, r.d)
	if err != nil {
		return fmt.Errorf("updating status of deployment %s/%s: %w", r.d.Namespace, r.d.Name, err)
	}
	r.d, r.wroteD = updated, updated.DeepCopy()
	return nil
}

// claimReplicaSets returns the ReplicaSets the Deployment manages: those
// of its namespace it controls and its selector matches, and the orphans
// its selector matches, which it adopts. Those it controls and no longer
// matches are released.
func (r *run) claimReplicaSets() ([]*appsv1.ReplicaSet, error) {
	d := r.d
	all, err := r.c.replicaSets.Namespace(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has an invalid selector: %w", d.Namespace, d.Name, err)
	}
	deleting := d.DeletionTimestamp != nil
	var owned []*appsv1.ReplicaSet
	var errs []error
	rechecked := false
	var recheckErr error
	for _, rs := range all {
		matches := sel.Matches(labels.Set(rs.Labels))
		ref := metav1.GetControllerOfNoCopy(rs)
		switch {
		case ref != nil && ref.UID != d.UID:
			// Another controller's.
		case ref != nil && matches:
			owned = append(owned, rs)
		case ref != nil:
			if deleting {
				continue
			}
			if err := r.release(rs); err != nil {
				errs = append(errs, err)
			}
		case !matches || deleting || rs.DeletionTimestamp != nil:
			// Not ours to adopt.
		default:
			if !rechecked {
				rechecked, recheckErr = true, r.recheck()
			}
			if recheckErr != nil {
				errs = append(errs, recheckErr)
				continue
			}
			adopted, err := r.adopt(rs)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				errs = append(errs, err)
			default:
				owned = append(owned, adopted)
			}
		}
	}
	return owned, errors.Join(errs...)
}

// recheck reads the Deployment afresh before it adopts anything: one
// deleted (or deleted and made again) since the cache saw it must not.
func (r *run) recheck() error {
	fresh, err := r.c.client.GetDeployment(r.ctx, r.d.Namespace, r.d.Name)
	if err != nil {
		return fmt.Errorf("rechecking deployment %s/%s before adoption: %w", r.d.Namespace, r.d.Name, err)
	}
	if fresh.UID != r.d.UID {
		return fmt.Errorf("deployment %s/%s is gone: uid %s, was %s", r.d.Namespace, r.d.Name, fresh.UID, r.d.UID)
	}
	if fresh.DeletionTimestamp != nil {
		return fmt.Errorf("deployment %s/%s is being deleted; not adopting", r.d.Namespace, r.d.Name)
	}
	return nil
}

// ownerPatch is the strategic merge patch of a ReplicaSet's owner
// references, with its UID as precondition.
type ownerPatch struct {
	Metadata struct {
		OwnerReferences []any     `json:"ownerReferences"`
		UID             types.UID `json:"uid"`
	} `json:"metadata"`
}

func (r *run) adopt(rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	var p ownerPatch
	p.Metadata.UID = rs.UID
	p.Metadata.OwnerReferences = []any{metav1.NewControllerRef(r.d, Kind)}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	adopted, err := r.c.client.PatchReplicaSet(r.ctx, rs.Namespace, rs.Name, data)
	if err != nil {
		return nil, fmt.Errorf("adopting replica set %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	return r.wrote(rs, adopted), nil
}

func (r *run) release(rs *appsv1.ReplicaSet) error {
	var p ownerPatch
	p.Metadata.UID = rs.UID
	p.Metadata.OwnerReferences = []any{map[string]any{"$patch": "delete", "uid": r.d.UID}}
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = r.c.client.PatchReplicaSet(r.ctx, rs.Namespace, rs.Name, data)
	// Gone, or replaced (the UID precondition fails): released already.
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return fmt.Errorf("releasing replica set %s/%s: %w", rs.Namespace, rs.Name, err)
}

// replicaSets returns the Deployment's new ReplicaSet (nil when there is
// none and create is false) and its old ones, bringing the new one's
// annotations and minReadySeconds, and the Deployment's revision, up to
// date.
func (r *run) replicaSets(rsList []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	r.latest(rsList)
	existing := newReplicaSetOf(r.d, rsList)
	old := oldReplicaSetsOf(rsList, existing)
	newRS, err := r.newReplicaSet(existing, old, create)
	if err != nil {
		return nil, nil, err
	}
	return newRS, old, nil
}

func (r *run) newReplicaSet(existing *appsv1.ReplicaSet, old []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, error) {
	d := r.d
	newRevision := maxRevision(old) + 1
	if existing != nil {
		rs := existing.DeepCopy()
		changed := setNewReplicaSetAnnotations(d, rs, newRevision, true)
		if changed || rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			// The Deployment's revision follows on the sync this
			// update brings about.
			updated, err := r.c.client.UpdateReplicaSet(r.ctx, rs)
			if err != nil {
				return nil, fmt.Errorf("updating replica set %s/%s: %w", rs.Namespace, rs.Name, err)
			}
			return r.wrote(existing, updated), nil
		}
		needsUpdate := setDeploymentRevision(d, rs.Annotations[RevisionAnnotation])
		if hasProgressDeadline(d) && getCondition(d.Status, appsv1.DeploymentProgressing) == nil {
			// Progress is measured from the first time the controller
			// saw the new ReplicaSet.
			setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonFoundNewReplicaSet,
				fmt.Sprintf("Found new replica set %q", rs.Name)))
			needsUpdate = true
		}
		if needsUpdate {
			if err := r.updateStatus(); err != nil {
				return nil, err
			}
		}
		return rs, nil
	}
	if !create {
		return nil, nil
	}
	return r.createReplicaSet(old, newRevision)
}

// createReplicaSet creates the Deployment's ReplicaSet of its current
// template, named by the template's hash. A ReplicaSet of that name with
// another template is a hash collision: collisionCount goes up, which
// changes the hash the next sync tries.
func (r *run) createReplicaSet(old []*appsv1.ReplicaSet, revision int64) (*appsv1.ReplicaSet, error) {
	d := r.d
	hash := PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	template := *d.Spec.Template.DeepCopy()
	template.Labels = withLabel(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	selector := d.Spec.Selector.DeepCopy()
	if selector.MatchLabels == nil {
		selector.MatchLabels = map[string]string{}
	}
	selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	zero := int32(0)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            replicaSetName(d.Name, hash),
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, Kind)},
			Labels:          template.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        &zero,
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selector,
			Template:        template,
		},
	}
	replicas := newReplicasFor(d, append(slices.Clip(old), rs), rs)
	rs.Spec.Replicas = &replicas
	setNewReplicaSetAnnotations(d, rs, revision, false)

	created, err := r.c.client.CreateReplicaSet(r.ctx, rs)
	existed := false
	switch {
	case apierrors.IsAlreadyExists(err):
		// A stale cache, most likely: the ReplicaSet is ours if we
		// control it and it has our template.
		cur, getErr := r.c.replicaSets.Namespace(rs.Namespace).Get(rs.Name)
		if getErr != nil {
			return nil, getErr
		}
		if ref := metav1.GetControllerOfNoCopy(cur); ref != nil && ref.UID == d.UID && equalIgnoringHash(&d.Spec.Template, &cur.Spec.Template) {
			created, existed = cur, true
			break
		}
		if d.Status.CollisionCount == nil {
			d.Status.CollisionCount = new(int32)
		}
		*d.Status.CollisionCount++
		if uerr := r.updateStatus(); uerr == nil {
			r.c.Logger().Info("hash collision; collisionCount raised", "deployment", d.Namespace+"/"+d.Name,
				"replicaSet", rs.Name, "collisionCount", *r.d.Status.CollisionCount)
		}
		return nil, fmt.Errorf("creating replica set %s/%s: %w", rs.Namespace, rs.Name, err)
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, err
	case err != nil:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
		if hasProgressDeadline(d) {
			setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonReplicaSetCreateError, msg))
			// The creation's error is the one to report.
			_ = r.updateStatus()
		}
		r.c.event(r.d, corev1.EventTypeWarning, ReasonReplicaSetCreateError, "%s", msg)
		return nil, fmt.Errorf("creating replica set %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	if !existed && replicas > 0 {
		r.c.event(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, replicas)
	}
	needsUpdate := setDeploymentRevision(d, strconv.FormatInt(revision, 10))
	if !existed && hasProgressDeadline(d) {
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewReplicaSetCreated,
			fmt.Sprintf("Created new replica set %q", created.Name)))
		needsUpdate = true
	}
	if needsUpdate {
		if err := r.updateStatus(); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// withLabel returns a copy of l with key set to value.
func withLabel(l map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(l)+1)
	for k, v := range l {
		out[k] = v
	}
	out[key] = value
	return out
}

// checkPausedConditions records a pause or a resume in the Progressing
// condition, so that the time spent paused does not count against the
// progress deadline. A deadline already exceeded stays so.
func (r *run) checkPausedConditions() error {
	d := r.d
	if !hasProgressDeadline(d) {
		return nil
	}
	cond := getCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == ReasonProgressDeadlineExceeded {
		return nil
	}
	pausedRecorded := cond != nil && cond.Reason == ReasonDeploymentPaused
	switch {
	case d.Spec.Paused && !pausedRecorded:
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonDeploymentPaused, "Deployment is paused"))
	case !d.Spec.Paused && pausedRecorded:
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonDeploymentResumed, "Deployment is resumed"))
	default:
		return nil
	}
	return r.updateStatus()
}

// isScalingEvent reports whether spec.replicas changed since the active
// ReplicaSets were last sized (their desired-replicas annotation).
func (r *run) isScalingEvent(rsList []*appsv1.ReplicaSet) (bool, error) {
	newRS, old, err := r.replicaSets(rsList, false)
	if err != nil {
		return false, err
	}
	for _, rs := range active(append(old, newRS)) {
		if desired, ok := annotationInt32(rs, DesiredReplicasAnnotation); ok && desired != replicasOf(r.d) {
			return true, nil
		}
	}
	return false, nil
}

// syncStatusOnly writes the status and does nothing else: for a
// Deployment being deleted.
func (r *run) syncStatusOnly(rsList []*appsv1.ReplicaSet) error {
	newRS, old, err := r.replicaSets(rsList, false)
	if err != nil {
		return err
	}
	return r.syncStatus(append(old, newRS), newRS)
}

// scaleAndSyncStatus serves scaling events and paused Deployments: the
// ReplicaSets are resized and nothing rolls.
func (r *run) scaleAndSyncStatus(rsList []*appsv1.ReplicaSet) error {
	newRS, old, err := r.replicaSets(rsList, false)
	if err != nil {
		return err
	}
	if err := r.scale(newRS, old); err != nil {
		return err
	}
	if _, rollingBack := rollbackTo(r.d); r.d.Spec.Paused && !rollingBack {
		if err := r.cleanup(old); err != nil {
			return err
		}
	}
	return r.syncStatus(append(old, newRS), newRS)
}

// scale resizes the ReplicaSets to the Deployment's spec.replicas: the
// one active (or newest) ReplicaSet takes them all; a saturated new one
// leaves the old ones at zero; otherwise, during a rolling update, the
// change is spread over the active ReplicaSets in proportion to their
// size, largest first, and what rounding leaves over goes to the largest.
func (r *run) scale(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) error {
	d := r.d
	if rs := activeOrLatest(newRS, old); rs != nil {
		if rsReplicas(rs) == replicasOf(d) {
			return nil
		}
		_, _, err := r.scaleReplicaSet(rs, replicasOf(d), false)
		return err
	}
	if saturated(d, newRS) {
		for _, rs := range active(old) {
			if _, _, err := r.scaleReplicaSet(rs, 0, false); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRollingUpdate(d) {
		return nil
	}
	all := active(append(slices.Clip(old), newRS))
	allowed := int32(0)
	if replicasOf(d) > 0 {
		allowed = replicasOf(d) + maxSurge(d)
	}
	toAdd := allowed - specTotal(all)
	switch {
	case toAdd > 0:
		slices.SortFunc(all, bySizeNewer)
	case toAdd < 0:
		slices.SortFunc(all, bySizeOlder)
	}
	sizes := make([]int32, len(all))
	added := int32(0)
	for i, rs := range all {
		p := proportion(d, rs, toAdd, added)
		sizes[i] = rsReplicas(rs) + p
		added += p
	}
	if toAdd != 0 && len(all) > 0 {
		sizes[0] = max(sizes[0]+toAdd-added, 0)
	}
	for i, rs := range all {
		if _, _, err := r.scaleReplicaSet(rs, sizes[i], true); err != nil {
			return err
		}
	}
	return nil
}

// scaleReplicaSet sets rs's replicas to size along with its replicas
// annotations; unless force, it does nothing when the size is right
// already. It reports whether the size changed, and returns the
// ReplicaSet as written.
func (r *run) scaleReplicaSet(rs *appsv1.ReplicaSet, size int32, force bool) (bool, *appsv1.ReplicaSet, error) {
	d := r.d
	cur := rsReplicas(rs)
	if !force && cur == size {
		return false, rs, nil
	}
	desired, maxReplicas := replicasOf(d), replicasOf(d)+maxSurge(d)
	resize := cur != size
	if !resize && !replicasAnnotationsStale(rs, desired, maxReplicas) {
		return false, rs, nil
	}
	updated, err := r.c.client.ScaleReplicaSet(r.ctx, rs, size, replicasAnnotations(desired, maxReplicas))
	if apierrors.IsConflict(err) {
		// The ReplicaSet's spec moved on since the cache showed it: the
		// informer brings the newer one, and with it the next sync,
		// which decides again on it.
		return false, rs, fmt.Errorf("scaling replica set %s/%s to %d: %w", rs.Namespace, rs.Name, size, errStale)
	}
	if err != nil {
		return false, rs, fmt.Errorf("scaling replica set %s/%s to %d: %w", rs.Namespace, rs.Name, size, err)
	}
	r.wrote(rs, updated)
	if resize {
		op := "down"
		if cur < size {
			op = "up"
		}
		r.c.event(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", op, rs.Name, cur, size)
	}
	return resize, updated, nil
}

// cleanup deletes the oldest old ReplicaSets beyond revisionHistoryLimit,
// skipping any that still runs pods, wants some, is not yet observed by
// its controller, or is being deleted.
func (r *run) cleanup(old []*appsv1.ReplicaSet) error {
	d := r.d
	if !hasRevisionHistoryLimit(d) {
		return nil
	}
	var alive []*appsv1.ReplicaSet
	for _, rs := range old {
		if rs != nil && rs.DeletionTimestamp == nil {
			alive = append(alive, rs)
		}
	}
	excess := len(alive) - int(*d.Spec.RevisionHistoryLimit)
	if excess <= 0 {
		return nil
	}
	slices.SortFunc(alive, byRevision)
	for _, rs := range alive[:excess] {
		if rs.Status.Replicas != 0 || rsReplicas(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		if err := r.c.client.DeleteReplicaSet(r.ctx, rs.Namespace, rs.Name); err != nil && !apierrors.IsNotFound(err) {
			// Stop at the first failure rather than press on against a
			// server in trouble.
			return fmt.Errorf("deleting old replica set %s/%s: %w", rs.Namespace, rs.Name, err)
		}
	}
	return nil
}
