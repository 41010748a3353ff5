package replication

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/controller"
)

// TestCandidatePods: a sync reads the RC's own active pods and the active
// orphans of its namespace, whatever their labels (the claim decides), and
// nothing else; the indices follow adoption, release and deletion.
func TestCandidatePods(t *testing.T) {
	web := newRC("web", 3)
	db := newRC("db", 1)
	lbl := map[string]string{"app": "web"}
	finished := newPod("finished", lbl, web)
	finished.Status.Phase = corev1.PodSucceeded
	failed := newPod("failed", lbl, web)
	failed.Status.Phase = corev1.PodFailed
	deleting := newPod("deleting", lbl, web)
	deleting.DeletionTimestamp = new(metav1.Now())
	deletingOrphan := newPod("deleting-orphan", lbl, nil)
	deletingOrphan.DeletionTimestamp = new(metav1.Now())
	elsewhere := newPod("elsewhere", lbl, web)
	elsewhere.Namespace = "other"
	orphanElsewhere := newPod("orphan-elsewhere", lbl, nil)
	orphanElsewhere.Namespace = "other"
	nonController := newPod("non-controller-ref", lbl, web)
	nonController.OwnerReferences[0].Controller = new(false)
	pods := []*corev1.Pod{
		newPod("own", lbl, web),
		newPod("own-unmatched", map[string]string{"app": "x"}, web),
		newPod("orphan", lbl, nil),
		newPod("orphan-unmatched", map[string]string{"app": "x"}, nil),
		newPod("dbs", map[string]string{"app": "db"}, db),
		finished, failed, deleting, deletingOrphan, elsewhere, orphanElsewhere, nonController,
	}

	m := newIdleManager(t, web, db)
	idx := m.pods.GetIndexer()
	for _, p := range pods {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	// A second manager over the same informers shares the indices.
	if _, err := NewManager(m.pods, m.rcs, m.client, m.podControl, Options{Logger: quiet}); err != nil {
		t.Fatalf("second manager: %v", err)
	}

	check := func(step, uid string, want ...string) {
		t.Helper()
		got, err := m.candidatePods(ns, uid)
		if err != nil {
			t.Fatal(err)
		}
		names := make([]string, len(got))
		for i, p := range got {
			names[i] = p.Name
		}
		slices.Sort(names)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("%s: candidates of %s %v, want %v", step, uid, names, want)
		}
	}
	orphans := []string{"orphan", "orphan-unmatched", "non-controller-ref"}
	check("initial", string(web.UID), append([]string{"own", "own-unmatched"}, orphans...)...)
	check("initial", string(db.UID), append([]string{"dbs"}, orphans...)...)

	// Adopted by db: leaves the orphans, joins db's pods.
	adopted := newPod("orphan", lbl, db)
	if err := idx.Update(adopted); err != nil {
		t.Fatal(err)
	}
	check("after adoption", string(web.UID), "own", "own-unmatched", "orphan-unmatched", "non-controller-ref")
	check("after adoption", string(db.UID), "dbs", "orphan", "orphan-unmatched", "non-controller-ref")

	// Released by web: an orphan again.
	if err := idx.Update(newPod("own-unmatched", map[string]string{"app": "x"}, nil)); err != nil {
		t.Fatal(err)
	}
	check("after release", string(web.UID), "own", "own-unmatched", "orphan-unmatched", "non-controller-ref")
	check("after release", string(db.UID), "dbs", "orphan", "own-unmatched", "orphan-unmatched", "non-controller-ref")

	if err := idx.Delete(adopted); err != nil {
		t.Fatal(err)
	}
	check("after deletion", string(db.UID), "dbs", "own-unmatched", "orphan-unmatched", "non-controller-ref")
}

// TestSelectorAndSet: the label set handed to the claim matches exactly
// the pods the selector does.
func TestSelectorAndSet(t *testing.T) {
	podLabels := []map[string]string{
		nil,
		{"app": "web"},
		{"app": "web", "tier": "web"},
		{"app": "db", "tier": "web"},
		{"tier": "web"},
	}
	invalid := newRC("bad", 1)
	invalid.Spec.Selector = map[string]string{"app": "not valid!"}
	emptyTemplate := newRC("empty", 1)
	emptyTemplate.Spec.Selector = nil
	emptyTemplate.Spec.Template.Labels = nil
	fromTemplate := newRC("tmpl", 1)
	fromTemplate.Spec.Selector = nil
	for _, rc := range []*corev1.ReplicationController{newRC("web", 1), invalid, emptyTemplate, fromTemplate} {
		sel, set := selectorAndSet(rc)
		for _, l := range podLabels {
			want := sel.Matches(labels.Set(l))
			got := set != nil && pairsOf(set).matchedBy(l)
			if got != want {
				t.Errorf("RC %s, pod labels %v: set says %v, selector %v", rc.Name, l, got, want)
			}
		}
	}
}

// TestClassifyAgreesWithRefManager: the manager's own classifying pass
// splits pods exactly as controller.PodControllerRefManager.Classify does
// with the RC's selector, and counts what calculateStatus counts of the
// owned ones.
func TestClassifyAgreesWithRefManager(t *testing.T) {
	web := newRC("web", 3)
	db := newRC("db", 1)
	full := map[string]string{"app": "web", "tier": "web"}
	partial := map[string]string{"app": "web"}
	ready := func(p *corev1.Pod) *corev1.Pod { return readyPod(p, true) }
	deletingOrphan := newPod("deleting-orphan", full, nil)
	deletingOrphan.DeletionTimestamp = new(metav1.Now())
	orphanElsewhere := newPod("orphan-elsewhere", full, nil)
	orphanElsewhere.Namespace = "other"
	nonController := newPod("non-controller-ref", full, web)
	nonController.OwnerReferences[0].Controller = new(false)
	pods := []*corev1.Pod{
		ready(newPod("own-ready", full, web)),
		newPod("own-unready", full, web),
		ready(newPod("own-partial", partial, web)),
		readyPod(newPod("own-not-ready", full, web), false),
		newPod("own-unmatched", map[string]string{"app": "x"}, web),
		newPod("orphan", full, nil),
		newPod("orphan-unmatched", map[string]string{"app": "x"}, nil),
		ready(newPod("dbs", full, db)),
		deletingOrphan, orphanElsewhere, nonController,
	}
	invalid := newRC("web", 1)
	invalid.Spec.Selector = map[string]string{"app": "not valid!"}
	noLabels := newRC("web", 1)
	noLabels.Spec.Selector = nil
	noLabels.Spec.Template.Labels = nil
	noTemplate := newRC("web", 1)
	noTemplate.Spec.Template = nil
	for _, rc := range []*corev1.ReplicationController{web, db, invalid, noLabels, noTemplate} {
		sel, set := selectorAndSet(rc)
		ref := &controller.PodControllerRefManager{Controller: rc, Selector: sel, Kind: controllerKind}
		wantOwned, wantOrphans, wantRelease := ref.Classify(pods)
		owned, orphans, release, counts := classify(rc, pods, set, templatePairs(rc))
		for _, c := range []struct {
			what      string
			got, want []*corev1.Pod
		}{{"owned", owned, wantOwned}, {"orphans", orphans, wantOrphans}, {"release", release, wantRelease}} {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("RC %s (%v): %s %v, want %v", rc.Name, rc.Spec.Selector, c.what, podNames(c.got), podNames(c.want))
			}
		}
		want := calculateStatus(rc, wantOwned, false, nil, time.Now())
		if counts.fully != want.FullyLabeledReplicas || counts.ready != want.ReadyReplicas {
			t.Errorf("RC %s (%v): counted fully=%d ready=%d, want %d %d", rc.Name, rc.Spec.Selector,
				counts.fully, counts.ready, want.FullyLabeledReplicas, want.ReadyReplicas)
		}
	}
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}
