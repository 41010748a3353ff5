package deployment

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// rollTo sets the template to image's and syncs, with pods available at
// once, until the rollout is complete and the history cleaned.
func (h *harness) rollTo(image string) {
	h.t.Helper()
	h.update(func(d *appsv1.Deployment) { d.Spec.Template = template(image) })
	h.settleRollout()
}

func (h *harness) settleRollout() {
	h.t.Helper()
	for range 100 {
		h.sync()
		h.settle()
		h.sync()
		if h.api.take() == nil && complete(h.deployment(), &h.deployment().Status) {
			return
		}
	}
	h.t.Fatalf("rollout never settled: %s", h.sizes())
}

func TestRecreate(t *testing.T) {
	d := newDeployment(3, "a", intstr.FromInt32(0), intstr.FromInt32(0))
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	h := newHarness(t, d)
	h.sync()
	a, b := rsName("a"), rsName("b")
	if got := h.api.take(); !slices.Contains(got, "create rs "+a+" replicas=3") {
		t.Fatalf("first sync: %q", got)
	}
	h.settle()
	// The ReplicaSet controller's pods of a, running.
	var pods []*corev1.Pod
	for _, name := range []string{"p1", "p2", "p3"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(h.rs(a), appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		pods = append(pods, p)
		_ = h.pods.Add(p)
	}
	h.sync()
	h.api.take()

	h.update(func(d *appsv1.Deployment) { d.Spec.Template = template("b") })
	steps := []struct {
		name   string
		before func()
		want   []string
	}{
		{"old scaled to zero, new not created", nil, []string{"scale rs " + a + " 3->0"}},
		{"old pods still running: wait", func() { h.setStatus(a, 0, 0) }, nil},
		{"one finished, two running: wait", func() {
			p := pods[0].DeepCopy()
			p.Status.Phase = corev1.PodSucceeded
			_ = h.pods.Update(p)
			_ = h.pods.Delete(pods[1], false)
		}, nil},
		{"all gone: new created at full size", func() {
			_ = h.pods.Delete(pods[2], false)
			_ = h.pods.Delete(pods[0], false)
		}, []string{"create rs " + b + " replicas=3"}},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		h.sync()
		var scalings []string
		for _, a := range h.api.take() {
			if strings.HasPrefix(a, "create") || strings.HasPrefix(a, "scale") {
				scalings = append(scalings, a)
			}
		}
		if !slices.Equal(scalings, st.want) {
			t.Errorf("%s: %q, want %q", st.name, scalings, st.want)
		}
	}
	h.settle()
	h.sync()
	if st := h.deployment().Status; !complete(h.deployment(), &st) {
		t.Errorf("recreate not complete: %+v", st)
	}

	// A deleted pod of a Recreate Deployment's ReplicaSet syncs it.
	h.c.deletePod(pods[0], false)
	if n := h.c.Queue().Len(); n != 1 {
		t.Errorf("queue holds %d keys after a pod deletion, want 1", n)
	}
	h.c.Queue().ShutDown()
}

func TestPauseAndResume(t *testing.T) {
	h := newHarness(t, newDeployment(4, "a", intstr.FromString("25%"), intstr.FromString("25%")))
	h.settleRollout()
	a, b := rsName("a"), rsName("b")

	h.update(func(d *appsv1.Deployment) { d.Spec.Paused = true; d.Spec.Template = template("b") })
	h.sync()
	h.sync()
	if got := h.sizes(); got != a+"=4/4" {
		t.Errorf("paused deployment rolled: %s", got)
	}
	c := getCondition(h.deployment().Status, appsv1.DeploymentProgressing)
	if c == nil || c.Status != corev1.ConditionUnknown || c.Reason != ReasonDeploymentPaused || c.Message != "Deployment is paused" {
		t.Errorf("Progressing while paused: %+v", c)
	}

	// Scaling a paused Deployment scales; it does not roll.
	h.update(func(d *appsv1.Deployment) { d.Spec.Replicas = new(int32(8)) })
	h.sync()
	if got := h.api.take(); !slices.Contains(got, "scale rs "+a+" 4->8") || slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "create") }) {
		t.Errorf("scaling while paused: %q", got)
	}

	h.update(func(d *appsv1.Deployment) { d.Spec.Paused = false })
	h.sync()
	if got := h.api.take(); !slices.Contains(got, "create rs "+b+" replicas=2") {
		t.Errorf("resumed deployment did not roll: %q", got)
	}
	// The resume was recorded before the new ReplicaSet was.
	c = getCondition(h.deployment().Status, appsv1.DeploymentProgressing)
	if c == nil || c.Reason != ReasonNewReplicaSetCreated {
		t.Errorf("Progressing after resume: %+v", c)
	}
	h.settleRollout()
	if got := h.sizes(); got != a+"=0/0 "+b+"=8/8" {
		t.Errorf("after resume: %s", got)
	}
}

// TestRolloutUndo is kubectl rollout undo: the template of the old
// ReplicaSet is put back, the old ReplicaSet becomes the new one again
// (no ReplicaSet is created), and its revision moves to the top with the
// old one kept in its revision history.
func TestRolloutUndo(t *testing.T) {
	h := newHarness(t, newDeployment(2, "a", intstr.FromString("25%"), intstr.FromString("25%")))
	h.settleRollout()
	a, b := rsName("a"), rsName("b")
	h.rollTo("b")
	if got := h.rs(b).Annotations[RevisionAnnotation]; got != "2" {
		t.Fatalf("b's revision %q", got)
	}
	h.rollTo("a")
	if n := len(h.rsList()); n != 2 {
		t.Errorf("%d replica sets after the undo, want 2: %s", n, h.sizes())
	}
	ra := h.rs(a)
	if ra.Annotations[RevisionAnnotation] != "3" || ra.Annotations[RevisionHistoryAnnotation] != "1" {
		t.Errorf("a's annotations after undo: %v", ra.Annotations)
	}
	if got := h.deployment().Annotations[RevisionAnnotation]; got != "3" {
		t.Errorf("deployment revision %q, want 3", got)
	}
	if got := h.sizes(); got != a+"=2/2 "+b+"=0/0" {
		t.Errorf("after undo: %s", got)
	}
	// Once more: b comes back as revision 4 with history 2.
	h.rollTo("b")
	if rb := h.rs(b); rb.Annotations[RevisionAnnotation] != "4" || rb.Annotations[RevisionHistoryAnnotation] != "2" {
		t.Errorf("b's annotations after a second undo: %v", rb.Annotations)
	}
	// And a again: its history grows.
	h.rollTo("a")
	if ra := h.rs(a); ra.Annotations[RevisionAnnotation] != "5" || ra.Annotations[RevisionHistoryAnnotation] != "1,3" {
		t.Errorf("a's annotations after a third undo: %v", ra.Annotations)
	}
}

// TestRollbackAnnotation is the rollback of extensions/v1beta1's
// spec.rollbackTo, which apps/v1 carries in an annotation.
func TestRollbackAnnotation(t *testing.T) {
	tests := []struct {
		name      string
		to        string
		wantImage string
		wantEvent string
	}{
		{"previous revision", "0", "a", `Normal DeploymentRollback Rolled back deployment "web" to revision 1`},
		{"revision 1", "1", "a", `Normal DeploymentRollback Rolled back deployment "web" to revision 1`},
		{"current revision", "2", "b", `Warning DeploymentRollbackTemplateUnchanged The rollback revision contains the same template as current deployment "web"`},
		{"missing revision", "9", "b", "Warning DeploymentRollbackRevisionNotFound Unable to find the revision to rollback to."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newDeployment(2, "a", intstr.FromString("25%"), intstr.FromString("25%")))
			h.settleRollout()
			h.rollTo("b")
			h.events.take()
			h.update(func(d *appsv1.Deployment) {
				d.Annotations = map[string]string{appsv1.DeprecatedRollbackTo: tt.to, RevisionAnnotation: "2"}
			})
			h.sync()
			d := h.deployment()
			if _, ok := d.Annotations[appsv1.DeprecatedRollbackTo]; ok {
				t.Error("rollback annotation left in place")
			}
			if got := d.Spec.Template.Spec.Containers[0].Image; got != tt.wantImage {
				t.Errorf("image %s, want %s", got, tt.wantImage)
			}
			if _, ok := d.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
				t.Error("the template kept the pod-template-hash label")
			}
			if got := h.events.take(); !slices.Contains(got, tt.wantEvent) {
				t.Errorf("events %q, want %q", got, tt.wantEvent)
			}
		})
	}
}

func TestRevisionHistoryLimit(t *testing.T) {
	tests := []struct {
		limit int32
		want  []string // images whose ReplicaSets remain, oldest first
	}{
		{0, []string{"d"}},
		{1, []string{"c", "d"}},
		{2, []string{"b", "c", "d"}},
		{10, []string{"a", "b", "c", "d"}},
	}
	for _, tt := range tests {
		t.Run(itoa(tt.limit), func(t *testing.T) {
			d := newDeployment(2, "a", intstr.FromString("25%"), intstr.FromString("25%"))
			d.Spec.RevisionHistoryLimit = &tt.limit
			h := newHarness(t, d)
			h.settleRollout()
			for _, image := range []string{"b", "c", "d"} {
				h.rollTo(image)
			}
			var want []string
			for _, image := range tt.want {
				want = append(want, rsName(image))
			}
			var got []string
			for _, rs := range h.rsList() {
				got = append(got, rs.Name)
			}
			if !slices.Equal(got, want) {
				t.Errorf("replica sets %q, want %q", got, want)
			}
		})
	}

	// A ReplicaSet that still runs pods, or whose scale-down its
	// controller has not observed, is kept.
	limit := int32(0)
	d := newDeployment(2, "a", intstr.FromString("25%"), intstr.FromString("25%"))
	d.Spec.RevisionHistoryLimit = &limit
	h := newHarness(t, d)
	h.settleRollout()
	h.rollTo("b")
	a := rsName("a")
	if _, ok, _ := h.api.rss.GetIndexer().GetByKey(ns + "/" + a); ok {
		t.Fatal("a kept with limit 0")
	}
	h.update(func(d *appsv1.Deployment) { d.Spec.Template = template("c") })
	for range 20 {
		h.sync()
		for _, rs := range h.rsList() {
			if rs.Name == rsName("b") {
				// b's pods linger and its controller lags.
				h.setStatus(rs.Name, 1, 0)
			} else {
				h.setStatus(rs.Name, rsReplicas(rs), rsReplicas(rs))
			}
		}
	}
	if _, ok, _ := h.api.rss.GetIndexer().GetByKey(ns + "/" + rsName("b")); !ok {
		t.Error("b deleted while it still had pods")
	}
}

// TestProportionalScaling scales a Deployment in the middle of a rollout
// (10 replicas, maxSurge 3, maxUnavailable 2; old at 8, new at 3, none of
// the new available): the change is spread by the ReplicaSets' sizes.
func TestProportionalScaling(t *testing.T) {
	tests := []struct {
		name     string
		replicas int32
		want     []string
		sizes    string
	}{
		// 18 allowed, 11 there: a gets round(8*18/13)-8 = 3, b
		// round(3*18/13)-3 = 1, and the 3 left over go to the largest.
		{"up to 15", 15, []string{"scale rs A 8->14", "scale rs B 3->4"}, "A=14 B=4"},
		// 8 allowed, 11 there: a gets round(8*8/13)-8 = -3, all of it.
		{"down to 5", 5, []string{"scale rs A 8->5", "update rs B"}, "A=5 B=3"},
		{"down to 0", 0, []string{"scale rs A 8->0", "scale rs B 3->0"}, "A=0 B=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newDeployment(10, "a", intstr.FromInt32(3), intstr.FromInt32(2)))
			h.settleRollout()
			h.update(func(d *appsv1.Deployment) { d.Spec.Template = template("b") })
			h.sync()
			a, b := rsName("a"), rsName("b")
			h.setStatus(a, 8, 8)
			h.setStatus(b, 3, 0)
			h.api.take()
			h.update(func(d *appsv1.Deployment) { d.Spec.Replicas = &tt.replicas })
			h.sync()
			r := strings.NewReplacer(a, "A", b, "B")
			var got []string
			for _, act := range h.api.take() {
				if strings.Contains(act, " rs ") {
					got = append(got, r.Replace(act))
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
			if sizes := "A=" + itoa(rsReplicas(h.rs(a))) + " B=" + itoa(rsReplicas(h.rs(b))); sizes != tt.sizes {
				t.Errorf("sizes %s, want %s", sizes, tt.sizes)
			}
			for _, rs := range h.rsList() {
				want := itoa(tt.replicas)
				if rs.Annotations[DesiredReplicasAnnotation] != want {
					t.Errorf("%s desired-replicas %q, want %s", rs.Name, rs.Annotations[DesiredReplicasAnnotation], want)
				}
			}
		})
	}
}

func TestStatus(t *testing.T) {
	h := newHarness(t, newDeployment(10, "a", intstr.FromInt32(3), intstr.FromInt32(2)))
	h.settleRollout()
	h.update(func(d *appsv1.Deployment) { d.Spec.Template = template("b") })
	h.sync()
	a, b := rsName("a"), rsName("b")
	h.setStatus(a, 8, 7)
	h.setStatus(b, 3, 1)
	h.sync()
	d := h.deployment()
	st := d.Status
	if st.Replicas != 11 || st.UpdatedReplicas != 3 || st.ReadyReplicas != 8 || st.AvailableReplicas != 8 ||
		st.UnavailableReplicas != 3 || st.ObservedGeneration != d.Generation || st.TerminatingReplicas == nil || *st.TerminatingReplicas != 0 {
		t.Errorf("status %+v", st)
	}
	if c := getCondition(st, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonMinimumReplicasAvailable {
		t.Errorf("Available = %+v", c)
	}
	h.setStatus(a, 8, 5)
	h.setStatus(b, 5, 2)
	h.sync()
	if c := getCondition(h.deployment().Status, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonMinimumReplicasUnavailable {
		t.Errorf("Available with 7 of 10 (floor 8) = %+v", c)
	}

	// A ReplicaSet's ReplicaFailure becomes the Deployment's.
	rs := h.rs(b).DeepCopy()
	rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota"}}
	_ = h.api.rss.Update(rs)
	h.sync()
	if c := getCondition(h.deployment().Status, appsv1.DeploymentReplicaFailure); c == nil || c.Reason != "FailedCreate" || c.Message != "quota" {
		t.Errorf("ReplicaFailure = %+v", c)
	}
}

// TestProgressDeadline runs in a synctest bubble: a rollout whose pods
// never become available times out progressDeadlineSeconds after its
// last progress, the controller asking to look again when that is due;
// once the pods are available it is complete again.
func TestProgressDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDeployment(2, "a", intstr.FromString("25%"), intstr.FromString("25%"))
		pds := int32(10)
		d.Spec.ProgressDeadlineSeconds = &pds
		h := newHarness(t, d)
		a := rsName("a")
		h.sync()
		c := getCondition(h.deployment().Status, appsv1.DeploymentProgressing)
		if c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonNewReplicaSetCreated || c.Message != `Created new replica set "`+a+`"` {
			t.Fatalf("Progressing after creation: %+v", c)
		}
		res := h.sync()
		if res.RequeueAfter != 11*time.Second {
			t.Errorf("RequeueAfter = %v, want 11s (the deadline, and a second)", res.RequeueAfter)
		}
		// One pod up: progress, which moves the deadline.
		time.Sleep(4 * time.Second)
		h.setStatus(a, 2, 1)
		h.sync()
		c = getCondition(h.deployment().Status, appsv1.DeploymentProgressing)
		if c == nil || c.Reason != ReasonReplicaSetUpdated || !c.LastUpdateTime.Time.Equal(time.Now()) {
			t.Errorf("Progressing after progress: %+v", c)
		}
		if res := h.sync(); res.RequeueAfter != 11*time.Second {
			t.Errorf("RequeueAfter after progress = %v, want 11s", res.RequeueAfter)
		}
		time.Sleep(10*time.Second + time.Millisecond)
		h.sync()
		c = getCondition(h.deployment().Status, appsv1.DeploymentProgressing)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonProgressDeadlineExceeded ||
			c.Message != `ReplicaSet "`+a+`" has timed out progressing.` {
			t.Fatalf("Progressing past the deadline: %+v", c)
		}
		if res := h.sync(); res.RequeueAfter != 0 {
			t.Errorf("a timed-out rollout asks to be synced after %v", res.RequeueAfter)
		}
		// Pausing does not hide a timeout.
		h.update(func(d *appsv1.Deployment) { d.Spec.Paused = true })
		h.sync()
		if c := getCondition(h.deployment().Status, appsv1.DeploymentProgressing); c.Reason != ReasonProgressDeadlineExceeded {
			t.Errorf("pause replaced the timeout: %+v", c)
		}
		h.update(func(d *appsv1.Deployment) { d.Spec.Paused = false })
		h.settle()
		h.sync()
		c = getCondition(h.deployment().Status, appsv1.DeploymentProgressing)
		if c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonNewReplicaSetAvailable || c.Message != `ReplicaSet "`+a+`" has successfully progressed.` {
			t.Errorf("Progressing once available: %+v", c)
		}
		if res := h.sync(); res.RequeueAfter != 0 {
			t.Errorf("a complete rollout asks to be synced after %v", res.RequeueAfter)
		}
	})
}

func TestNoProgressDeadline(t *testing.T) {
	d := newDeployment(2, "a", intstr.FromString("25%"), intstr.FromString("25%"))
	d.Spec.ProgressDeadlineSeconds = nil
	h := newHarness(t, d)
	h.sync()
	h.sync()
	if c := getCondition(h.deployment().Status, appsv1.DeploymentProgressing); c != nil {
		t.Errorf("Progressing without a deadline: %+v", c)
	}
	if res := h.sync(); res.RequeueAfter != 0 {
		t.Errorf("RequeueAfter %v without a deadline", res.RequeueAfter)
	}
}

func TestHashCollision(t *testing.T) {
	taken := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rsName("a"), UID: "someone-else", Labels: map[string]string{"app": "other"}},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: template("other")},
	}
	h := newHarness(t, newDeployment(2, "a", intstr.FromString("25%"), intstr.FromString("25%")), taken)
	if _, err := h.c.sync(context.Background(), ns+"/web"); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("sync into a collision: %v", err)
	}
	if cc := h.deployment().Status.CollisionCount; cc == nil || *cc != 1 {
		t.Fatalf("collisionCount %v, want 1", cc)
	}
	h.sync()
	one := int32(1)
	tmpl := template("a")
	want := replicaSetName("web", PodTemplateHash(&tmpl, &one))
	if want == taken.Name {
		t.Fatal("collisionCount did not change the hash")
	}
	rs := h.rs(want)
	if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != PodTemplateHash(&tmpl, &one) ||
		rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] != PodTemplateHash(&tmpl, &one) {
		t.Errorf("new replica set's labels %v, selector %v", rs.Labels, rs.Spec.Selector)
	}
	if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != "uid-web" || ref.Kind != "Deployment" {
		t.Errorf("owner %+v", ref)
	}
}

func TestAdoptAndRelease(t *testing.T) {
	tmpl := template("a")
	hash := PodTemplateHash(&tmpl, nil)
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	orphan := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-orphan", UID: "uid-orphan", Labels: tmpl.Labels},
		Spec:       appsv1.ReplicaSetSpec{Replicas: new(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl},
	}
	strayTmpl := template("x")
	strayTmpl.Labels = map[string]string{"app": "gone"}
	stray := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-stray", UID: "uid-stray", Labels: strayTmpl.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-web", Controller: new(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: strayTmpl.Labels}, Template: strayTmpl},
	}
	h := newHarness(t, newDeployment(2, "a", intstr.FromString("25%"), intstr.FromString("25%")), orphan, stray)
	h.sync()
	got := h.api.take()
	for _, want := range []string{"adopt rs web-orphan", "release rs web-stray"} {
		if !slices.Contains(got, want) {
			t.Errorf("writes %q lack %q", got, want)
		}
	}
	if slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "create") }) {
		t.Errorf("created a replica set beside the adopted one: %q", got)
	}
	if keys := h.c.keysForReplicaSet(h.rs("web-stray")); len(keys) != 0 {
		t.Errorf("a released replica set maps to %q", keys)
	}
	if keys := h.c.keysForReplicaSet(h.rs("web-orphan")); !slices.Equal(keys, []string{ns + "/web"}) {
		t.Errorf("an adopted replica set maps to %q", keys)
	}
}

func TestSelectingAll(t *testing.T) {
	d := newDeployment(2, "a", intstr.FromString("25%"), intstr.FromString("25%"))
	d.Spec.Selector = &metav1.LabelSelector{}
	d.Generation = 3
	h := newHarness(t, d)
	h.sync()
	if got := h.events.take(); !slices.Equal(got, []string{"Warning SelectingAll This deployment is selecting all pods. A non-empty selector is required."}) {
		t.Errorf("events %q", got)
	}
	if got := h.api.take(); !slices.Equal(got, []string{"status deployment web"}) {
		t.Errorf("writes %q", got)
	}
	if g := h.deployment().Status.ObservedGeneration; g != 3 {
		t.Errorf("observedGeneration %d", g)
	}
}

func TestCreateFailure(t *testing.T) {
	h := newHarness(t, newDeployment(2, "a", intstr.FromString("25%"), intstr.FromString("25%")))
	h.api.failCreate = apierrors.NewForbidden(appsv1.Resource("replicasets"), "", errForbidden)
	if _, err := h.c.sync(context.Background(), ns+"/web"); !apierrors.IsForbidden(err) {
		t.Fatalf("sync: %v", err)
	}
	c := getCondition(h.deployment().Status, appsv1.DeploymentProgressing)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonReplicaSetCreateError || !strings.HasPrefix(c.Message, "Failed to create new replica set") {
		t.Errorf("Progressing %+v", c)
	}
	if got := h.events.take(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning ReplicaSetCreateError Failed to create new replica set") {
		t.Errorf("events %q", got)
	}
}

var errForbidden = apierrors.NewBadRequest("quota exceeded")

func TestDeletedDeploymentIsNoError(t *testing.T) {
	h := newHarness(t, newDeployment(2, "a", intstr.FromString("25%"), intstr.FromString("25%")))
	if res, err := h.c.sync(context.Background(), ns+"/nosuch"); err != nil || res.RequeueAfter != 0 {
		t.Errorf("sync of a missing deployment: %v, %v", res, err)
	}
	if _, err := h.c.sync(context.Background(), "a/b/c"); err == nil {
		t.Error("a malformed key synced")
	}
}
