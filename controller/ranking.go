package controller

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// IsPodActive reports whether pod still counts towards its controller's
// replicas: not finished and not being deleted.
func IsPodActive(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded &&
		pod.Status.Phase != corev1.PodFailed &&
		pod.DeletionTimestamp == nil
}

// FilterActivePods returns the active pods, in order.
func FilterActivePods(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if IsPodActive(p) {
			out = append(out, p)
		}
	}
	return out
}

// IsPodReady reports whether pod's Ready condition is true.
func IsPodReady(pod *corev1.Pod) bool {
	c := podReadyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}

func podReadyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// phaseRank orders phases from the cheapest pod to lose to the dearest.
func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending:
		return 0
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	default:
		return 3
	}
}

func maxRestarts(pod *corev1.Pod) int32 {
	var n int32
	for _, c := range pod.Status.ContainerStatuses {
		n = max(n, c.RestartCount)
	}
	return n
}

// CompareForDeletion orders two pods by how readily they should be deleted
// when a controller has too many: negative when a goes first. The earlier
// a pod is in its life, the less is lost by deleting it:
//
//  1. not yet scheduled before scheduled;
//  2. Pending before Unknown before Running;
//  3. not ready before ready;
//  4. ready for less time before ready for longer;
//  5. more container restarts before fewer;
//  6. created later before created earlier.
//
// Pods that tie on all of these are ordered by namespace and name, so the
// order is total and the same on every run.
func CompareForDeletion(a, b *corev1.Pod) int {
	if c := cmp.Compare(boolRank(a.Spec.NodeName != ""), boolRank(b.Spec.NodeName != "")); c != 0 {
		return c
	}
	if c := cmp.Compare(phaseRank(a.Status.Phase), phaseRank(b.Status.Phase)); c != 0 {
		return c
	}
	ra, rb := IsPodReady(a), IsPodReady(b)
	if c := cmp.Compare(boolRank(ra), boolRank(rb)); c != 0 {
		return c
	}
	if ra && rb {
		// Became ready later: ready for less time, goes first.
		ta, tb := podReadyCondition(a).LastTransitionTime, podReadyCondition(b).LastTransitionTime
		if !ta.Equal(&tb) {
			if tb.Before(&ta) {
				return -1
			}
			return 1
		}
	}
	if c := cmp.Compare(maxRestarts(b), maxRestarts(a)); c != 0 {
		return c
	}
	ca, cb := a.CreationTimestamp, b.CreationTimestamp
	if !ca.Equal(&cb) {
		if cb.Before(&ca) {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SortPodsForDeletion sorts pods so that the ones to delete first come
// first (see CompareForDeletion).
func SortPodsForDeletion(pods []*corev1.Pod) {
	slices.SortStableFunc(pods, CompareForDeletion)
}

// PodsToDelete returns the n pods to delete first, without reordering pods.
func PodsToDelete(pods []*corev1.Pod, n int) []*corev1.Pod {
	if n <= 0 {
		return nil
	}
	sorted := slices.Clone(pods)
	SortPodsForDeletion(sorted)
	return sorted[:min(n, len(sorted))]
}
