package replicaset

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCandidatePods: a sync reads the RC's own active pods and the active
// orphans of its namespace, whatever their labels (the claim decides), and
// nothing else; the indices follow adoption, release and deletion.
func TestCandidatePods(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		web := newRC("web", 3)
		db := newRC("db", 1)
		lbl := map[string]string{"app": "web"}
		finished := k.newPod("finished", lbl, web)
		finished.Status.Phase = corev1.PodSucceeded
		failed := k.newPod("failed", lbl, web)
		failed.Status.Phase = corev1.PodFailed
		deleting := k.newPod("deleting", lbl, web)
		deleting.DeletionTimestamp = new(metav1.Now())
		deletingOrphan := k.newPod("deleting-orphan", lbl, nil)
		deletingOrphan.DeletionTimestamp = new(metav1.Now())
		elsewhere := k.newPod("elsewhere", lbl, web)
		elsewhere.Namespace = "other"
		orphanElsewhere := k.newPod("orphan-elsewhere", lbl, nil)
		orphanElsewhere.Namespace = "other"
		nonController := k.newPod("non-controller-ref", lbl, web)
		nonController.OwnerReferences[0].Controller = new(false)
		pods := []*corev1.Pod{
			k.newPod("own", lbl, web),
			k.newPod("own-unmatched", map[string]string{"app": "x"}, web),
			k.newPod("orphan", lbl, nil),
			k.newPod("orphan-unmatched", map[string]string{"app": "x"}, nil),
			k.newPod("dbs", map[string]string{"app": "db"}, db),
			finished, failed, deleting, deletingOrphan, elsewhere, orphanElsewhere, nonController,
		}

		m := k.newIdle(t, web, db)
		idx := m.pods.GetIndexer()
		for _, p := range pods {
			if err := idx.Add(p); err != nil {
				t.Fatal(err)
			}
		}
		// A second manager over the same informers shares the indices.
		if err := m.secondManager(); err != nil {
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
		adopted := k.newPod("orphan", lbl, db)
		if err := idx.Update(adopted); err != nil {
			t.Fatal(err)
		}
		check("after adoption", string(web.UID), "own", "own-unmatched", "orphan-unmatched", "non-controller-ref")
		check("after adoption", string(db.UID), "dbs", "orphan", "orphan-unmatched", "non-controller-ref")

		// Released by web: an orphan again.
		if err := idx.Update(k.newPod("own-unmatched", map[string]string{"app": "x"}, nil)); err != nil {
			t.Fatal(err)
		}
		check("after release", string(web.UID), "own", "own-unmatched", "orphan-unmatched", "non-controller-ref")
		check("after release", string(db.UID), "dbs", "orphan", "own-unmatched", "orphan-unmatched", "non-controller-ref")

		if err := idx.Delete(adopted); err != nil {
			t.Fatal(err)
		}
		check("after deletion", string(db.UID), "dbs", "own-unmatched", "orphan-unmatched", "non-controller-ref")
	})
}
