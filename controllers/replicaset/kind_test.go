package replicaset

import (
	"testing"
	"testing/synctest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestRSSelector(t *testing.T) {
	for _, tc := range []struct {
		name     string
		selector *metav1.LabelSelector
		pod      map[string]string
		want     bool
	}{
		{"matchLabels", &metav1.LabelSelector{MatchLabels: map[string]string{"a": "1"}}, map[string]string{"a": "1", "b": "2"}, true},
		{"matchLabels mismatch", &metav1.LabelSelector{MatchLabels: map[string]string{"a": "1"}}, map[string]string{"a": "2"}, false},
		{"matchExpressions", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}}}}, map[string]string{"tier": "api"}, true},
		{"matchExpressions mismatch", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}}, map[string]string{"tier": "web"}, false},
		{"nil selects nothing", nil, map[string]string{"a": "1"}, false},
		{"empty selects nothing", &metav1.LabelSelector{}, map[string]string{"a": "1"}, false},
		{"invalid selects nothing", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "a", Operator: "Bogus"}}}, map[string]string{"a": "1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Selector: tc.selector}}
			if got := (ReplicaSets{}).Selector(rs).Matches(labels.Set(tc.pod)); got != tc.want {
				t.Errorf("matches = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRCStatusConversion: an RC's status read in a ReplicaSet's form and
// written back is unchanged, and terminatingReplicas, which an RC cannot
// carry, is dropped.
func TestRCStatusConversion(t *testing.T) {
	ts := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, st := range []corev1.ReplicationControllerStatus{
		{},
		{Replicas: 3, FullyLabeledReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, ObservedGeneration: 7},
		{Replicas: 1, Conditions: []corev1.ReplicationControllerCondition{{Type: corev1.ReplicationControllerReplicaFailure,
			Status: corev1.ConditionTrue, LastTransitionTime: ts, Reason: ReasonFailedCreate, Message: "quota"}}},
	} {
		rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Status: st}
		k := ReplicationControllers{}
		rsStatus := k.Status(rc)
		rsStatus.TerminatingReplicas = new(int32(2))
		back := k.WithStatus(rc, rsStatus)
		if !apiequality.Semantic.DeepEqual(back.Status, st) || back == rc {
			t.Errorf("round trip of %+v gave %+v", st, back.Status)
		}
		if len(st.Conditions) > 0 && &back.Status.Conditions[0] == &rc.Status.Conditions[0] {
			t.Error("WithStatus shares the cached RC's conditions")
		}
	}
}

// TestRSTerminatingReplicas: a ReplicaSet's status counts its pods being
// deleted gracefully, and only those it controls and selects.
func TestRSTerminatingReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := kinds[1]
		e := k.newEnv(t, Options{})
		e.api.set(func(f *fakeAPI) { f.gracefulDeletes = true })
		rc := e.createRC(newRC("web", 4))
		other := newRC("other", 0)
		other.UID = "rc-uid-other"
		// Terminating, but another owner's: not counted.
		p := k.newPod("others", map[string]string{"app": "web", "tier": "web"}, other)
		p.DeletionTimestamp = new(metav1.Now())
		p.Finalizers = []string{"example.com/hold"}
		if _, err := e.pods.Create(p); err != nil {
			t.Fatal(err)
		}
		e.run()
		raw := func() appsv1.ReplicaSetStatus {
			rs, _ := e.rcs.(convStore[*appsv1.ReplicaSet]).src.Get(ns, "web")
			return rs.Status
		}
		e.settle(settleLimit, func() bool { return len(e.owned(rc)) == 4 && raw().Replicas == 4 })
		if got := raw().TerminatingReplicas; got == nil || *got != 0 {
			t.Fatalf("terminatingReplicas %v, want 0", got)
		}
		e.scale("web", 1)
		e.settle(settleLimit, func() bool {
			st := raw()
			return st.Replicas == 1 && st.TerminatingReplicas != nil && *st.TerminatingReplicas == 3
		})
		// A terminating pod that has finished is no longer terminating.
		for _, p := range e.pods.Items() {
			if p.DeletionTimestamp != nil && p.Name != "others" {
				next := p.DeepCopy()
				next.Status.Phase = corev1.PodSucceeded
				if _, err := e.pods.Update(next); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		e.settle(settleLimit, func() bool { return *raw().TerminatingReplicas == 2 })
	})
}
