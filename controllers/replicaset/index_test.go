package replicaset

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCandidatePods: a sync reads the RC's own active pods and the active
// orphans of its namespace, whatever their labels (the claim decides), and
// nothing else; the indices and the RC's view of its pods follow
// adoption, release and deletion as the events report them.
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

		check := func(step string, rc *corev1.ReplicationController, want ...string) {
			t.Helper()
			got, err := m.candidatePods(rc)
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
				t.Errorf("%s: candidates of %s %v, want %v", step, rc.Name, names, want)
			}
		}
		orphans := []string{"orphan", "orphan-unmatched", "non-controller-ref"}
		check("initial", web, append([]string{"own", "own-unmatched"}, orphans...)...)
		check("initial", db, append([]string{"dbs"}, orphans...)...)

		// Adopted by db: leaves the orphans, joins db's pods.
		// Every write gives the pod a new resourceVersion, which the
		// handlers tell a change from a resync by.
		adopted := k.newPod("orphan", lbl, db)
		adopted.ResourceVersion = "2"
		if err := idx.Update(adopted); err != nil {
			t.Fatal(err)
		}
		m.updatePod(pods[2], adopted)
		check("after adoption", web, "own", "own-unmatched", "orphan-unmatched", "non-controller-ref")
		check("after adoption", db, "dbs", "orphan", "orphan-unmatched", "non-controller-ref")

		// Released by web: an orphan again.
		released := k.newPod("own-unmatched", map[string]string{"app": "x"}, nil)
		released.ResourceVersion = "3"
		if err := idx.Update(released); err != nil {
			t.Fatal(err)
		}
		m.updatePod(pods[1], released)
		check("after release", web, "own", "own-unmatched", "orphan-unmatched", "non-controller-ref")
		check("after release", db, "dbs", "orphan", "own-unmatched", "orphan-unmatched", "non-controller-ref")

		if err := idx.Delete(adopted); err != nil {
			t.Fatal(err)
		}
		m.deletePod(adopted, false)
		check("after deletion", db, "dbs", "own-unmatched", "orphan-unmatched", "non-controller-ref")
	})
}
