package controller

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type podOpt func(*corev1.Pod)

func rankPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.Time{Time: time.Unix(1000, 0)}},
		Spec:       corev1.PodSpec{NodeName: "node"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func unscheduled(p *corev1.Pod)       { p.Spec.NodeName = "" }
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func created(sec int64) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.Time{Time: time.Unix(sec, 0)} }
}
func restarts(n int32) podOpt {
	return func(p *corev1.Pod) { p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: n}} }
}
func readySince(sec int64) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: time.Unix(sec, 0)}}}
	}
}

func TestCompareForDeletion(t *testing.T) {
	tests := []struct {
		name        string
		first, then *corev1.Pod
	}{
		{"unassigned before assigned", rankPod("a", unscheduled, readySince(1)), rankPod("b")},
		{"pending before unknown", rankPod("a", phase(corev1.PodPending)), rankPod("b", phase(corev1.PodUnknown))},
		{"unknown before running", rankPod("a", phase(corev1.PodUnknown)), rankPod("b")},
		{"not ready before ready", rankPod("a", restarts(0), created(1)), rankPod("b", readySince(5), restarts(9))},
		{"ready for less time first", rankPod("a", readySince(200)), rankPod("b", readySince(100))},
		{"more restarts first", rankPod("a", restarts(5), created(1)), rankPod("b", restarts(1), created(9))},
		{"newer first", rankPod("a", created(2000)), rankPod("b", created(1000))},
		{"tie broken by name", rankPod("a"), rankPod("b")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c := CompareForDeletion(tt.first, tt.then); c >= 0 {
				t.Errorf("Compare(first, then) = %d, want < 0", c)
			}
			if c := CompareForDeletion(tt.then, tt.first); c <= 0 {
				t.Errorf("Compare(then, first) = %d, want > 0", c)
			}
			if c := CompareForDeletion(tt.first, tt.first); c != 0 {
				t.Errorf("Compare(x, x) = %d", c)
			}
		})
	}
}

func TestPodsToDelete(t *testing.T) {
	pods := []*corev1.Pod{
		rankPod("ready-old", readySince(10), created(1)),
		rankPod("running-not-ready"),
		rankPod("pending", phase(corev1.PodPending)),
		rankPod("unscheduled", unscheduled, phase(corev1.PodPending)),
		rankPod("ready-new", readySince(50), created(2)),
	}
	orig := slices.Clone(pods)
	got := names(PodsToDelete(pods, 4))
	want := []string{"unscheduled", "pending", "running-not-ready", "ready-new"}
	if !slices.Equal(got, want) {
		t.Fatalf("PodsToDelete = %v, want %v", got, want)
	}
	if !slices.Equal(pods, orig) {
		t.Fatal("PodsToDelete reordered its input")
	}
	if PodsToDelete(pods, 0) != nil || len(PodsToDelete(pods, 99)) != 5 {
		t.Fatal("PodsToDelete bounds")
	}
}

func TestFilterActivePods(t *testing.T) {
	gone := rankPod("deleting")
	gone.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	pods := []*corev1.Pod{
		rankPod("running"),
		rankPod("succeeded", phase(corev1.PodSucceeded)),
		rankPod("failed", phase(corev1.PodFailed)),
		gone,
		rankPod("pending", phase(corev1.PodPending)),
	}
	if got, want := names(FilterActivePods(pods)), []string{"running", "pending"}; !slices.Equal(got, want) {
		t.Fatalf("FilterActivePods = %v, want %v", got, want)
	}
}
