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

// updateStatus writes status to obj unless obj has it already, with
// obj's resourceVersion as precondition: the API server's status update
// keeps the metadata it is sent (kube's strategy resets only the spec),
// so a write without it would put back labels and annotations another
// writer changed since the cache's copy. A conflict is returned, and the
// sync retried on the newer object. An object gone meanwhile needs no
// status.
func (m *Manager[T]) updateStatus(ctx context.Context, obj T, status appsv1.ReplicaSetStatus) error {
	if apiequality.Semantic.DeepEqual(m.kind.Status(obj), status) {
		return nil
	}
	next := m.kind.WithStatus(obj, status)
	written, err := m.client.UpdateStatus(ctx, next)
	switch {
	case err == nil:
		m.writes.Replaced(objectKey(obj), obj, written)
		return nil
	case apierrors.IsNotFound(err):
		return nil
	}
	return fmt.Errorf("updating status of %s: %w", objectKey(obj), err)
}
