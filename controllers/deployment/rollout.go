package deployment

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// rolloutRolling takes one step of a rolling update: scale the new
// ReplicaSet up as far as maxSurge allows, else scale old ones down as far
// as maxUnavailable allows, else (the rollout complete) delete surplus
// history; then the status.
func (r *run) rolloutRolling(rsList []*appsv1.ReplicaSet) error {
	newRS, old, err := r.replicaSets(rsList, true)
	if err != nil {
		return err
	}
	all := append(slices.Clip(old), newRS)
	scaledUp, err := r.reconcileNewReplicaSet(all, newRS)
	if err != nil {
		return err
	}
	if scaledUp {
		return r.syncRolloutStatus(all, newRS)
	}
	if r.reconcileOldReplicaSets(all, active(old), newRS) {
		return r.syncRolloutStatus(all, newRS)
	}
	if complete(r.d, &r.d.Status) {
		if err := r.cleanup(old); err != nil {
			return err
		}
	}
	return r.syncRolloutStatus(all, newRS)
}

func (r *run) reconcileNewReplicaSet(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (bool, error) {
	want := replicasOf(r.d)
	switch cur := rsReplicas(newRS); {
	case cur == want:
		return false, nil
	case cur > want:
		scaled, _, err := r.scaleReplicaSet(newRS, want, false)
		return scaled, err
	}
	scaled, _, err := r.scaleReplicaSet(newRS, newReplicasFor(r.d, all, newRS), false)
	return scaled, err
}

// reconcileOldReplicaSets scales old ReplicaSets down, first by their
// unavailable replicas (which costs no availability), then by what
// availability beyond spec.replicas-maxUnavailable allows; never so far
// that the new ReplicaSet's own unavailable pods would take availability
// below the floor. It reports whether anything was scaled. Failures are
// not returned: the next sync tries again, as kube's controller does.
func (r *run) reconcileOldReplicaSets(all, old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) bool {
	if specTotal(old) == 0 {
		return false
	}
	minAvailable := replicasOf(r.d) - maxUnavailable(r.d)
	newUnavailable := rsReplicas(newRS) - newRS.Status.AvailableReplicas
	maxScaledDown := specTotal(all) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false
	}
	old, cleaned, err := r.cleanupUnhealthyReplicas(old, maxScaledDown)
	if err != nil {
		r.c.Logger().Info("scaling down unhealthy replicas failed", "deployment", r.d.Namespace+"/"+r.d.Name, "err", err)
		return false
	}
	scaled, err := r.scaleDownOldForRollingUpdate(append(slices.Clip(old), newRS), old)
	if err != nil {
		r.c.Logger().Info("scaling down old replica sets failed", "deployment", r.d.Namespace+"/"+r.d.Name, "err", err)
		return false
	}
	return cleaned+scaled > 0
}

// cleanupUnhealthyReplicas takes up to limit unavailable replicas off the
// old ReplicaSets, oldest first; it returns old with the ReplicaSets as
// written.
func (r *run) cleanupUnhealthyReplicas(old []*appsv1.ReplicaSet, limit int32) ([]*appsv1.ReplicaSet, int32, error) {
	slices.SortFunc(old, byCreation)
	var done int32
	for i, rs := range old {
		if done >= limit {
			break
		}
		size := rsReplicas(rs)
		if size == 0 || size == rs.Status.AvailableReplicas {
			continue
		}
		n := min(limit-done, size-rs.Status.AvailableReplicas)
		if n < 0 {
			return old, done, fmt.Errorf("replica set %s/%s reports more available replicas (%d) than it has (%d)",
				rs.Namespace, rs.Name, rs.Status.AvailableReplicas, size)
		}
		_, updated, err := r.scaleReplicaSet(rs, size-n, false)
		if err != nil {
			return old, done, err
		}
		done += n
		old[i] = updated
	}
	return old, done, nil
}

// scaleDownOldForRollingUpdate takes off the old ReplicaSets, oldest
// first, the available replicas beyond spec.replicas-maxUnavailable.
func (r *run) scaleDownOldForRollingUpdate(all, old []*appsv1.ReplicaSet) (int32, error) {
	minAvailable := replicasOf(r.d) - maxUnavailable(r.d)
	available := availableTotal(all)
	if available <= minAvailable {
		return 0, nil
	}
	slices.SortFunc(old, byCreation)
	budget := available - minAvailable
	var done int32
	for _, rs := range old {
		if done >= budget {
			break
		}
		size := rsReplicas(rs)
		if size == 0 {
			continue
		}
		n := min(size, budget-done)
		if _, _, err := r.scaleReplicaSet(rs, size-n, false); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// rolloutRecreate takes one step of a Recreate rollout: scale every old
// ReplicaSet to zero, wait until none of their pods runs, then create or
// scale up the new one.
func (r *run) rolloutRecreate(rsList []*appsv1.ReplicaSet) error {
	// The new ReplicaSet is not created before the old pods are gone, so
	// that the two never run together.
	newRS, old, err := r.replicaSets(rsList, false)
	if err != nil {
		return err
	}
	all := append(slices.Clip(old), newRS)
	scaledDown := false
	for _, rs := range active(old) {
		scaled, _, err := r.scaleReplicaSet(rs, 0, false)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || scaled
	}
	if scaledDown {
		return r.syncRolloutStatus(all, newRS)
	}
	running, err := r.oldPodsRunning(newRS, old, rsList)
	if err != nil {
		return err
	}
	if running {
		return r.syncRolloutStatus(all, newRS)
	}
	if newRS == nil {
		if newRS, old, err = r.replicaSets(rsList, true); err != nil {
			return err
		}
		all = append(slices.Clip(old), newRS)
	}
	if _, _, err := r.scaleReplicaSet(newRS, replicasOf(r.d), false); err != nil {
		return err
	}
	if complete(r.d, &r.d.Status) {
		if err := r.cleanup(old); err != nil {
			return err
		}
	}
	return r.syncRolloutStatus(all, newRS)
}

// oldPodsRunning reports whether an old ReplicaSet still counts pods, or
// a pod controlled by one of rsList other than newRS has not finished
// (Succeeded or Failed).
func (r *run) oldPodsRunning(newRS *appsv1.ReplicaSet, old, rsList []*appsv1.ReplicaSet) (bool, error) {
	if statusTotal(old) > 0 {
		return true, nil
	}
	owners := make(map[types.UID]bool, len(rsList))
	for _, rs := range rsList {
		if newRS == nil || rs.UID != newRS.UID {
			owners[rs.UID] = true
		}
	}
	pods, err := r.c.pods.Namespace(r.d.Namespace).List(labels.Everything())
	if err != nil {
		return false, err
	}
	for _, pod := range pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil || !owners[ref.UID] {
			continue
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return true, nil
		}
	}
	return false, nil
}

// calculateStatus is the Deployment's status as its ReplicaSets show it,
// with the Available condition set by whether availability is at least
// spec.replicas-maxUnavailable.
func (r *run) calculateStatus(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) appsv1.DeploymentStatus {
	d := r.d
	available := availableTotal(all)
	s := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            statusTotal(all),
		UpdatedReplicas:     statusTotal([]*appsv1.ReplicaSet{newRS}),
		ReadyReplicas:       readyTotal(all),
		AvailableReplicas:   available,
		UnavailableReplicas: max(specTotal(all)-available, 0),
		TerminatingReplicas: terminatingTotal(all),
		CollisionCount:      d.Status.CollisionCount,
		Conditions:          slices.Clone(d.Status.Conditions),
	}
	if available >= replicasOf(d)-maxUnavailable(d) {
		setCondition(&s, newCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, ReasonMinimumReplicasAvailable, "Deployment has minimum availability."))
	} else {
		setCondition(&s, newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, ReasonMinimumReplicasUnavailable, "Deployment does not have minimum availability."))
	}
	return s
}

// syncStatus writes the calculated status when it differs.
func (r *run) syncStatus(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	s := r.calculateStatus(all, newRS)
	if reflect.DeepEqual(r.d.Status, s) {
		return nil
	}
	r.d.Status = s
	return r.updateStatus()
}

// syncRolloutStatus writes the status of a rollout: the calculated one,
// with Progressing brought up to date (complete, progressing, or past its
// deadline) and the new ReplicaSet's ReplicaFailure condition (else an
// old one's) carried over. When nothing changed and the rollout is
// neither complete nor timed out, a sync is asked for when the deadline
// will have passed.
func (r *run) syncRolloutStatus(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	d := r.d
	s := r.calculateStatus(all, newRS)
	if !hasProgressDeadline(d) {
		removeCondition(&s, appsv1.DeploymentProgressing)
	}
	cur := getCondition(d.Status, appsv1.DeploymentProgressing)
	// One ReplicaSet whose rollout was seen complete: nothing to track.
	done := s.Replicas == s.UpdatedReplicas && cur != nil && cur.Reason == ReasonNewReplicaSetAvailable
	if hasProgressDeadline(d) && !done {
		subject := fmt.Sprintf("Deployment %q", d.Name)
		if newRS != nil {
			subject = fmt.Sprintf("ReplicaSet %q", newRS.Name)
		}
		switch {
		case complete(d, &s):
			setCondition(&s, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewReplicaSetAvailable, subject+" has successfully progressed."))
		case progressing(d, &s):
			// Progress moves lastUpdateTime even when the reason stays,
			// which setCondition would not do.
			c := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonReplicaSetUpdated, subject+" is progressing.")
			if cur != nil {
				if cur.Status == corev1.ConditionTrue {
					c.LastTransitionTime = cur.LastTransitionTime
				}
				removeCondition(&s, appsv1.DeploymentProgressing)
			}
			setCondition(&s, c)
		case timedOut(d, &s):
			setCondition(&s, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonProgressDeadlineExceeded, subject+" has timed out progressing."))
		}
	}
	if f, ok := replicaFailure(all, newRS); ok {
		setCondition(&s, f)
	} else {
		removeCondition(&s, appsv1.DeploymentReplicaFailure)
	}
	if reflect.DeepEqual(d.Status, s) {
		r.requeueAfter = stuckCheckAfter(d, &s)
		return nil
	}
	d.Status = s
	return r.updateStatus()
}

// timedOut reports whether the Progressing condition of s shows no
// progress for longer than the deadline (or says so already).
func timedOut(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	c := getCondition(*s, appsv1.DeploymentProgressing)
	switch {
	case c == nil, c.Reason == ReasonNewReplicaSetAvailable:
		return false
	case c.Reason == ReasonProgressDeadlineExceeded:
		return true
	}
	deadline := c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
	return deadline.Before(time.Now())
}

// stuckCheckAfter is when d, whose status did not change, must be looked
// at again to see whether its progress deadline has passed: -1 when it
// need not be (no deadline, complete, or timed out already). Beyond a
// second away, a second is added, as kube does, against clock skew;
// closer, just past the deadline.
func stuckCheckAfter(d *appsv1.Deployment, s *appsv1.DeploymentStatus) time.Duration {
	c := getCondition(d.Status, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || c == nil || complete(d, s) || c.Reason == ReasonProgressDeadlineExceeded {
		return -1
	}
	after := time.Until(c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second))
	if after < time.Second {
		return max(after, 0) + time.Millisecond
	}
	return after + time.Second
}

// replicaFailure is the ReplicaFailure condition to carry over: the new
// ReplicaSet's first, else the first of any.
func replicaFailure(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (appsv1.DeploymentCondition, bool) {
	for _, rs := range append([]*appsv1.ReplicaSet{newRS}, all...) {
		if rs == nil {
			continue
		}
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure {
				return appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: c.Status, Reason: c.Reason,
					Message: c.Message, LastUpdateTime: c.LastTransitionTime, LastTransitionTime: c.LastTransitionTime}, true
			}
		}
	}
	return appsv1.DeploymentCondition{}, false
}

// rollbackTo reads the deprecated rollback annotation (what
// extensions/v1beta1's spec.rollbackTo became): the revision to go back
// to, 0 for the previous one. An unreadable one is ignored.
func rollbackTo(d *appsv1.Deployment) (int64, bool) {
	v := d.Annotations[appsv1.DeprecatedRollbackTo]
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// rollback serves the deprecated rollback annotation: the template of the
// ReplicaSet of the revision asked for becomes the Deployment's, and the
// annotation is removed. kubectl rollout undo does not use it: it puts
// the old template back itself, and the rollout does the rest.
func (r *run) rollback(rsList []*appsv1.ReplicaSet) error {
	newRS, old, err := r.replicaSets(rsList, true)
	if err != nil {
		return err
	}
	all := append(slices.Clip(old), newRS)
	revision, _ := rollbackTo(r.d)
	if revision == 0 {
		if revision = previousRevision(all); revision == 0 {
			r.c.event(r.d, corev1.EventTypeWarning, reasonRollbackRevisionNotFound, "Unable to find last revision.")
			return r.clearRollbackTo()
		}
	}
	for _, rs := range all {
		if v, err := revisionOf(rs); err != nil || v != revision {
			continue
		}
		if equalIgnoringHash(&r.d.Spec.Template, &rs.Spec.Template) {
			r.c.event(r.d, corev1.EventTypeWarning, reasonRollbackTemplateUnchanged,
				"The rollback revision contains the same template as current deployment %q", r.d.Name)
			return r.clearRollbackTo()
		}
		r.d.Spec.Template.ObjectMeta = *rs.Spec.Template.ObjectMeta.DeepCopy()
		r.d.Spec.Template.Spec = *rs.Spec.Template.Spec.DeepCopy()
		delete(r.d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
		// The Deployment takes the ReplicaSet's annotations, but the
		// controller's own and kubectl apply's.
		kept := map[string]string{}
		for k, v := range r.d.Annotations {
			if notCopied[k] {
				kept[k] = v
			}
		}
		for k, v := range rs.Annotations {
			if !notCopied[k] {
				kept[k] = v
			}
		}
		r.d.Annotations = kept
		if err := r.clearRollbackTo(); err != nil {
			return err
		}
		r.c.event(r.d, corev1.EventTypeNormal, reasonRollbackDone, "Rolled back deployment %q to revision %d", r.d.Name, revision)
		return nil
	}
	r.c.event(r.d, corev1.EventTypeWarning, reasonRollbackRevisionNotFound, "Unable to find the revision to rollback to.")
	return r.clearRollbackTo()
}

func (r *run) clearRollbackTo() error {
	delete(r.d.Annotations, appsv1.DeprecatedRollbackTo)
	updated, err := r.c.client.UpdateDeployment(r.ctx, r.d)
	if err != nil {
		return fmt.Errorf("updating deployment %s/%s: %w", r.d.Namespace, r.d.Name, err)
	}
	r.d, r.wroteD = updated, updated.DeepCopy()
	return nil
}
