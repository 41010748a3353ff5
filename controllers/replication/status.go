package replication

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons of the ReplicaFailure condition.
const (
	ReasonFailedCreate = "FailedCreate"
	ReasonFailedDelete = "FailedDelete"
)

// calculateStatus returns rc's status for its active, controlled pods at
// now. managed tells whether manageReplicas ran in this sync, and manageErr
// what it returned: the ReplicaFailure condition is set by a failure and
// cleared only by a success, not by a sync that waited on expectations.
func calculateStatus(rc *corev1.ReplicationController, pods []*corev1.Pod, managed bool, manageErr error, now time.Time) corev1.ReplicationControllerStatus {
	var c labelCounts
	tmpl := templatePairs(rc)
	for _, p := range pods {
		c.count(p, tmpl)
	}
	status, _ := statusFromCounts(rc, pods, c, managed, manageErr, now)
	return status
}

// labelCounts are the counts of a status that do not depend on the time,
// gathered while the pods are classified (the same pass over memory; a
// second walk over 10,000 pods costs as much as the first).
type labelCounts struct {
	fully, ready int32
}

func (c *labelCounts) count(p *corev1.Pod, template labelPairs) {
	if template.matchedBy(p.Labels) {
		c.fully++
	}
	if cond := readyCondition(p); cond != nil && cond.Status == corev1.ConditionTrue {
		c.ready++
	}
}

// templatePairs is the template's labels as an equality selector; no
// template, or one without labels, matches every pod, as
// labels.SelectorFromSet of an empty set does.
func templatePairs(rc *corev1.ReplicationController) labelPairs {
	if rc.Spec.Template == nil {
		return labelPairs{}
	}
	return pairsOf(rc.Spec.Template.Labels)
}

// soonest is the shortest of the durations offered to it, if any.
type soonest struct {
	d     time.Duration
	found bool
}

func (s *soonest) offer(d time.Duration) {
	if !s.found || d < s.d {
		s.d, s.found = d, true
	}
}

func (s soonest) get() (time.Duration, bool) { return s.d, s.found }

// statusFromCounts is calculateStatus given the counts of pods, which it
// returns with how long until the next ready pod becomes available. Only
// with minReadySeconds does it read the pods again: availability then
// depends on now, taken after manageReplicas, which may take a while.
func statusFromCounts(rc *corev1.ReplicationController, pods []*corev1.Pod, c labelCounts, managed bool, manageErr error, now time.Time) (corev1.ReplicationControllerStatus, soonest) {
	status := *rc.Status.DeepCopy()
	available, next := c.ready, soonest{}
	if rc.Spec.MinReadySeconds > 0 {
		available, next = countAvailable(pods, rc.Spec.MinReadySeconds, now)
	}
	status.Replicas = int32(len(pods))
	status.FullyLabeledReplicas = c.fully
	status.ReadyReplicas = c.ready
	status.AvailableReplicas = available
	status.ObservedGeneration = rc.Generation
	if managed {
		i := failureCondition(status.Conditions)
		switch {
		case manageErr != nil && i < 0:
			reason := ReasonFailedCreate
			if len(pods) > int(desiredReplicas(rc)) {
				reason = ReasonFailedDelete
			}
			status.Conditions = append(status.Conditions, corev1.ReplicationControllerCondition{
				Type:               corev1.ReplicationControllerReplicaFailure,
				Status:             corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(now),
				Reason:             reason,
				Message:            manageErr.Error(),
			})
		case manageErr == nil && i >= 0:
			status.Conditions = append(status.Conditions[:i:i], status.Conditions[i+1:]...)
		}
	}
	if len(status.Conditions) == 0 {
		// Empty and absent are the same on the wire; keep them the same
		// here, or the two would compare as a change.
		status.Conditions = nil
	}
	return status, next
}

// countAvailable counts the pods ready for minReadySeconds at now, and
// how long until the next ready one becomes available.
func countAvailable(pods []*corev1.Pod, minReadySeconds int32, now time.Time) (int32, soonest) {
	var available int32
	var next soonest
	for _, p := range pods {
		cond := readyCondition(p)
		if cond == nil || cond.Status != corev1.ConditionTrue {
			continue
		}
		if d := availableIn(cond, minReadySeconds, now); d <= 0 {
			available++
		} else {
			next.offer(d)
		}
	}
	return available, next
}

// failureCondition returns the index of the ReplicaFailure condition, or
// -1.
func failureCondition(conds []corev1.ReplicationControllerCondition) int {
	for i, c := range conds {
		if c.Type == corev1.ReplicationControllerReplicaFailure {
			return i
		}
	}
	return -1
}

func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// availableIn returns how long until a pod whose Ready condition is c
// becomes available, having been ready for minReadySeconds; zero or less
// when it is already.
func availableIn(c *corev1.PodCondition, minReadySeconds int32, now time.Time) time.Duration {
	if minReadySeconds <= 0 {
		return 0
	}
	return c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second).Sub(now)
}

// nextAvailable returns how long until the first ready but not yet
// available pod becomes available, if there is one.
func nextAvailable(pods []*corev1.Pod, minReadySeconds int32, now time.Time) (time.Duration, bool) {
	_, next := countAvailable(pods, minReadySeconds, now)
	return next.get()
}

// updateStatus writes status to rc unless rc has it already. A conflict
// (the cache lags the server) is retried once on a fresh read; an RC gone
// meanwhile needs no status.
func (m *Manager) updateStatus(ctx context.Context, rc *corev1.ReplicationController, status corev1.ReplicationControllerStatus) error {
	if apiequality.Semantic.DeepEqual(rc.Status, status) {
		return nil
	}
	next := rc.DeepCopy()
	next.Status = status
	_, err := m.client.UpdateStatus(ctx, next)
	if apierrors.IsConflict(err) {
		fresh, gerr := m.client.Get(ctx, rc.Namespace, rc.Name)
		switch {
		case apierrors.IsNotFound(gerr):
			return nil
		case gerr != nil:
			return fmt.Errorf("updating status of RC %s: %w", rcKey(rc), gerr)
		case fresh.UID != rc.UID:
			// Replaced: the new RC gets its own sync.
			return nil
		case apiequality.Semantic.DeepEqual(fresh.Status, status):
			return nil
		}
		next = fresh.DeepCopy()
		next.Status = status
		_, err = m.client.UpdateStatus(ctx, next)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating status of RC %s: %w", rcKey(rc), err)
	}
	return nil
}
