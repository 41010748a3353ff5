package replicaset

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

// Reasons of the ReplicaFailure condition.
const (
	ReasonFailedCreate = "FailedCreate"
	ReasonFailedDelete = "FailedDelete"
)

// calculateStatus returns obj's status for the counts of its pods.
// managed tells whether manageReplicas ran in this sync, and manageErr
// what it returned: the ReplicaFailure condition is set by a failure and
// cleared only by a success, not by a sync that waited on expectations.
func calculateStatus[T cache.Object](kind Kind[T], obj T, counts podCounts, managed bool, manageErr error, now time.Time) appsv1.ReplicaSetStatus {
	current := kind.Status(obj)
	status := *current.DeepCopy()
	status.Replicas = counts.replicas
	status.FullyLabeledReplicas = counts.fullyLabeled
	status.ReadyReplicas = counts.ready
	status.AvailableReplicas = counts.available
	status.TerminatingReplicas = nil
	if kind.CountsTerminating() {
		status.TerminatingReplicas = new(counts.terminating)
	}
	status.ObservedGeneration = obj.GetGeneration()

	if managed {
		i := failureCondition(status.Conditions)
		switch {
		case manageErr != nil && i < 0:
			reason := ReasonFailedCreate
			if counts.replicas > kind.Replicas(obj) {
				reason = ReasonFailedDelete
			}
			status.Conditions = append(status.Conditions, appsv1.ReplicaSetCondition{
				Type:               appsv1.ReplicaSetReplicaFailure,
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
	return status
}

// failureCondition returns the index of the ReplicaFailure condition, or
// -1.
func failureCondition(conds []appsv1.ReplicaSetCondition) int {
	for i, c := range conds {
		if c.Type == appsv1.ReplicaSetReplicaFailure {
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

// updateStatus writes status to obj unless obj has it already. A conflict
// (the cache lags the server) is retried once on a fresh read; an object
// gone meanwhile needs no status.
func (m *Manager[T]) updateStatus(ctx context.Context, obj T, status appsv1.ReplicaSetStatus) error {
	if apiequality.Semantic.DeepEqual(m.kind.Status(obj), status) {
		return nil
	}
	written, err := m.client.UpdateStatus(ctx, m.kind.WithStatus(obj, status))
	if err == nil {
		m.writes.Replaced(objectKey(obj), obj, written)
		return nil
	}
	if apierrors.IsConflict(err) {
		fresh, gerr := m.client.Get(ctx, obj.GetNamespace(), obj.GetName())
		switch {
		case apierrors.IsNotFound(gerr):
			return nil
		case gerr != nil:
			return fmt.Errorf("updating status of %s: %w", objectKey(obj), gerr)
		case fresh.GetUID() != obj.GetUID():
			// Replaced: the new object gets its own sync.
			return nil
		case apiequality.Semantic.DeepEqual(m.kind.Status(fresh), status):
			return nil
		}
		// Both the cached copy and the one read are superseded by what
		// the retry writes, whichever the cache shows next.
		m.writes.Replaced(objectKey(obj), obj, fresh)
		if written, err = m.client.UpdateStatus(ctx, m.kind.WithStatus(fresh, status)); err == nil {
			m.writes.Replaced(objectKey(obj), fresh, written)
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating status of %s: %w", objectKey(obj), err)
	}
	return nil
}
