package replicaset

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/controller"
)

// queued drains the queue's ready items, sorted.
func queued(m *sut) []string {
	var out []string
	for m.Queue().Len() > 0 {
		k, _ := m.Queue().Get()
		m.Queue().Done(k)
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func withRV(p *corev1.Pod, rv string) *corev1.Pod {
	p = p.DeepCopy()
	p.ResourceVersion = rv
	return p
}

func readyPod(p *corev1.Pod, ready bool) *corev1.Pod {
	p = p.DeepCopy()
	s := corev1.ConditionFalse
	if ready {
		s = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}
	return p
}

func TestPodHandlers(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		web := newRC("web", 3)
		web.Spec.MinReadySeconds = 10
		api := newRC("api", 1)
		api.Spec.Selector = map[string]string{"tier": "web"} // also selects web's pods
		db := newRC("db", 1)
		lbl := map[string]string{"app": "web", "tier": "web"}
		owned := k.newPod("p", lbl, web)
		orphan := k.newPod("o", lbl, nil)
		stale := k.newPod("s", lbl, web)
		stale.OwnerReferences[0].UID = "old-uid"
		rsOwned := k.newPod("rs", lbl, nil)
		rsOwned.OwnerReferences = []metav1.OwnerReference{*controller.NewControllerRef(web, k.other)}
		deleting := owned.DeepCopy()
		deleting.DeletionTimestamp = new(metav1.Now())

		const webKey = "default/web"
		for _, tc := range []struct {
			name        string
			event       func(m *sut)
			wantQueued  []string
			wantWaiting int
			wantAdds    int // web's expectations after, set to 1 add and 1 delete of "p" before
			wantDels    int
		}{
			{"add owned", func(m *sut) { m.addPod(owned, false) }, []string{webKey}, 0, 0, 1},
			{"add owned in initial list", func(m *sut) { m.addPod(owned, true) }, []string{webKey}, 0, 0, 1},
			{"add owned by a replaced RC", func(m *sut) { m.addPod(stale, false) }, nil, 0, 1, 1},
			{"add owned by another kind", func(m *sut) { m.addPod(rsOwned, false) }, nil, 0, 1, 1},
			{"add orphan", func(m *sut) { m.addPod(orphan, false) }, []string{"default/api", webKey}, 0, 1, 1},
			{"add orphan matching none", func(m *sut) { m.addPod(k.newPod("x", map[string]string{"app": "x"}, nil), false) }, nil, 0, 1, 1},
			{"add already deleting", func(m *sut) { m.addPod(deleting, false) }, []string{webKey}, 0, 1, 0},
			{"resync", func(m *sut) { m.updatePod(withRV(owned, "5"), withRV(owned, "5")) }, nil, 0, 1, 1},
			{"update owned", func(m *sut) { m.updatePod(withRV(owned, "5"), withRV(owned, "6")) }, []string{webKey}, 0, 1, 1},
			{"update to deleting", func(m *sut) { m.updatePod(withRV(owned, "5"), withRV(deleting, "6")) }, []string{webKey}, 0, 1, 0},
			{"update deleting twice counts once", func(m *sut) {
				m.updatePod(withRV(owned, "5"), withRV(deleting, "6"))
				m.updatePod(withRV(deleting, "6"), withRV(deleting, "7"))
				m.deletePod(deleting, false)
			}, []string{webKey}, 0, 1, 0},
			{"becomes ready with minReadySeconds", func(m *sut) {
				m.updatePod(withRV(readyPod(owned, false), "5"), withRV(readyPod(owned, true), "6"))
			}, []string{webKey}, 1, 1, 1},
			{"stays ready", func(m *sut) {
				m.updatePod(withRV(readyPod(owned, true), "5"), withRV(readyPod(owned, true), "6"))
			}, []string{webKey}, 0, 1, 1},
			{"released", func(m *sut) {
				released := orphan.DeepCopy()
				released.Name = "p"
				m.updatePod(withRV(owned, "5"), withRV(released, "6"))
			}, []string{"default/api", webKey}, 0, 1, 1},
			{"orphan relabelled", func(m *sut) {
				before := orphan.DeepCopy()
				before.Labels = map[string]string{"app": "db"}
				m.updatePod(withRV(before, "5"), withRV(orphan, "6"))
			}, []string{"default/api", webKey}, 0, 1, 1},
			{"orphan status change", func(m *sut) {
				m.updatePod(withRV(orphan, "5"), withRV(readyPod(orphan, true), "6"))
			}, nil, 0, 1, 1},
			{"delete owned", func(m *sut) { m.deletePod(owned, false) }, []string{webKey}, 0, 1, 0},
			{"delete owned, tombstone", func(m *sut) { m.deletePod(owned, true) }, []string{webKey}, 0, 1, 0},
			{"delete a pod not expected to go", func(m *sut) {
				other := owned.DeepCopy()
				other.Name = "q"
				m.deletePod(other, true)
			}, []string{webKey}, 0, 1, 1},
			{"delete orphan", func(m *sut) { m.deletePod(orphan, false) }, nil, 0, 1, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				m := k.newIdle(t, web, api, db)
				m.expectations.ExpectDeletions(webKey, []string{"default/p"})
				m.expectations.RaiseExpectations(webKey, 1, 0)
				tc.event(m)
				if got := queued(m); !slices.Equal(got, tc.wantQueued) {
					t.Errorf("queued %v, want %v", got, tc.wantQueued)
				}
				if got := m.Queue().Waiting(); got != tc.wantWaiting {
					t.Errorf("%d keys queued for later, want %d", got, tc.wantWaiting)
				}
				adds, dels, _ := m.expectations.GetExpectations(webKey)
				if adds != tc.wantAdds || dels != tc.wantDels {
					t.Errorf("expectations adds=%d dels=%d, want %d %d", adds, dels, tc.wantAdds, tc.wantDels)
				}
			})
		}
	})
}

func TestRCHandlers(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		web := newRC("web", 1)
		for _, tc := range []struct {
			name     string
			event    func(m *sut)
			wantKept bool
		}{
			{"add", func(m *sut) { m.addRC(web, false) }, true},
			{"update", func(m *sut) {
				cur := web.DeepCopy()
				cur.Spec.Replicas = new(int32(5))
				m.updateRC(web, cur)
			}, true},
			{"update across a recreation", func(m *sut) {
				cur := web.DeepCopy()
				cur.UID = "new-uid"
				m.updateRC(web, cur)
			}, false},
			{"delete", func(m *sut) { m.deleteRC(web, false) }, false},
			{"delete, tombstone", func(m *sut) { m.deleteRC(web, true) }, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				m := k.newIdle(t)
				m.expectations.ExpectCreations("default/web", 2)
				tc.event(m)
				if got := queued(m); !slices.Equal(got, []string{"default/web"}) {
					t.Errorf("queued %v", got)
				}
				if _, _, ok := m.expectations.GetExpectations("default/web"); ok != tc.wantKept {
					t.Errorf("expectations kept = %v, want %v", ok, tc.wantKept)
				}
			})
		}
	})
}

func TestRCSelector(t *testing.T) {
	for _, tc := range []struct {
		name     string
		selector map[string]string
		template map[string]string
		pod      map[string]string
		want     bool
	}{
		{"selector", map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}, true},
		{"selector mismatch", map[string]string{"a": "1"}, nil, map[string]string{"a": "2"}, false},
		{"defaults to template", nil, map[string]string{"a": "1"}, map[string]string{"a": "1", "c": "3"}, true},
		{"nothing without either", nil, nil, map[string]string{"a": "1"}, false},
		{"nothing without either, unlabelled pod", nil, nil, nil, false},
		{"invalid selector selects nothing", map[string]string{"a": "not valid!"}, nil, map[string]string{"a": "not valid!"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Selector: tc.selector,
				Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tc.template}}}}
			if got := (ReplicationControllers{}).Selector(rc).Matches(labels.Set(tc.pod)); got != tc.want {
				t.Errorf("matches = %v, want %v", got, tc.want)
			}
		})
	}
}
