package replicaset

import (
	"context"
	"errors"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
)

func TestCalculateStatus(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		pod := func(name string, lbl map[string]string, readyFor time.Duration) *corev1.Pod {
			p := k.newPod(name, lbl, nil)
			if readyFor >= 0 {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
					LastTransitionTime: metav1.NewTime(now.Add(-readyFor))}}
			}
			return p
		}
		full := map[string]string{"app": "web", "tier": "web"}
		partial := map[string]string{"app": "web"}
		failure := corev1.ReplicationControllerCondition{Type: corev1.ReplicationControllerReplicaFailure, Status: corev1.ConditionTrue,
			Reason: ReasonFailedCreate, Message: "earlier", LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
		errBoom := errors.New("boom")

		for _, tc := range []struct {
			name        string
			minReady    int32
			replicas    int32
			conds       []corev1.ReplicationControllerCondition
			pods        []*corev1.Pod
			managed     bool
			err         error
			want        [4]int32 // replicas, fullyLabeled, ready, available
			wantReason  string   // "" for no condition
			wantMessage string
		}{
			{name: "counts", replicas: 4, pods: []*corev1.Pod{
				pod("a", full, -1), pod("b", partial, 0), pod("c", full, time.Hour), pod("d", partial, time.Second),
			}, want: [4]int32{4, 2, 3, 3}},
			{name: "minReadySeconds", minReady: 10, replicas: 4, pods: []*corev1.Pod{
				pod("a", full, -1), pod("b", full, 9*time.Second), pod("c", full, 10*time.Second), pod("d", full, time.Hour),
			}, want: [4]int32{4, 4, 3, 2}},
			{name: "failure sets the condition", replicas: 1, managed: true, err: errBoom,
				wantReason: ReasonFailedCreate, wantMessage: "boom"},
			{name: "failure of deletes", replicas: 0, pods: []*corev1.Pod{pod("a", full, -1)}, managed: true, err: errBoom,
				want: [4]int32{1, 1, 0, 0}, wantReason: ReasonFailedDelete, wantMessage: "boom"},
			{name: "failure keeps an existing condition", replicas: 1, conds: []corev1.ReplicationControllerCondition{failure},
				managed: true, err: errBoom, wantReason: ReasonFailedCreate, wantMessage: "earlier"},
			{name: "success clears it", replicas: 1, conds: []corev1.ReplicationControllerCondition{failure}, managed: true},
			{name: "a sync that waited keeps it", replicas: 1, conds: []corev1.ReplicationControllerCondition{failure},
				wantReason: ReasonFailedCreate, wantMessage: "earlier"},
			{name: "a sync that waited sets nothing", replicas: 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rc := newRC("web", tc.replicas)
				rc.Generation = 4
				rc.Spec.MinReadySeconds = tc.minReady
				rc.Status.Conditions = tc.conds
				before := rc.DeepCopy()
				st := k.calculateStatus(rc, tc.pods, tc.managed, tc.err, now)
				if !apiequality.Semantic.DeepEqual(before, rc) {
					t.Error("calculateStatus modified the cached RC")
				}
				got := [4]int32{st.Replicas, st.FullyLabeledReplicas, st.ReadyReplicas, st.AvailableReplicas}
				if got != tc.want || st.ObservedGeneration != 4 {
					t.Errorf("counts %v gen %d, want %v gen 4", got, st.ObservedGeneration, tc.want)
				}
				switch {
				case tc.wantReason == "" && len(st.Conditions) != 0:
					t.Errorf("conditions %+v, want none", st.Conditions)
				case tc.wantReason != "" && (len(st.Conditions) != 1 || st.Conditions[0].Reason != tc.wantReason ||
					st.Conditions[0].Message != tc.wantMessage || st.Conditions[0].Status != corev1.ConditionTrue):
					t.Errorf("conditions %+v, want one %s: %s", st.Conditions, tc.wantReason, tc.wantMessage)
				}
			})
		}
	})
}

func TestNextAvailable(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		ready := func(ago time.Duration) *corev1.Pod {
			p := k.newPod("p", nil, nil)
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
			return p
		}
		for _, tc := range []struct {
			name     string
			minReady int32
			pods     []*corev1.Pod
			want     time.Duration
			ok       bool
		}{
			{"no minReadySeconds", 0, []*corev1.Pod{ready(0)}, 0, false},
			{"none ready", 10, []*corev1.Pod{k.newPod("p", nil, nil)}, 0, false},
			{"all available", 10, []*corev1.Pod{ready(10 * time.Second), ready(time.Hour)}, 0, false},
			{"earliest wins", 10, []*corev1.Pod{ready(2 * time.Second), ready(7 * time.Second), ready(time.Hour)}, 3 * time.Second, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rc := newRC("web", 1)
				rc.Spec.MinReadySeconds = tc.minReady
				got, ok := k.nextAvailable(rc, tc.pods, now)
				if got != tc.want || ok != tc.ok {
					t.Errorf("nextAvailable = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
				}
			})
		}
	})
}

// TestUpdateStatusPreconditions: a status computed on a stale cached RC
// is refused with a conflict, so that another writer's change to its
// metadata is not written over (the API server's status update keeps the
// metadata it is sent); on the current RC it is written in one call; an
// unchanged status is not written; one replaced under the same name
// refuses it; an RC gone meanwhile needs none.
func TestUpdateStatusPreconditions(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		synctest.Test(t, func(t *testing.T) {
			e := k.newEnv(t, Options{})
			stale := e.createRC(newRC("web", 1))
			next := stale.DeepCopy()
			next.Labels = map[string]string{"changed": "yes"}
			if _, err := e.rcs.Update(next); err != nil {
				t.Fatal(err)
			}
			want := corev1.ReplicationControllerStatus{Replicas: 3, ObservedGeneration: 1}
			if err := e.m.updateStatus(t.Context(), stale, want); !apierrors.IsConflict(err) {
				t.Fatalf("status on a stale RC: %v, want a conflict", err)
			}
			if got := e.rc("web"); got.Status.Replicas == 3 || got.Labels["changed"] != "yes" {
				t.Errorf("stored RC after a stale status %+v", got)
			}
			_, _, _, _, before := e.api.counts()
			if err := e.m.updateStatus(t.Context(), e.rc("web"), want); err != nil {
				t.Fatal(err)
			}
			if got := e.rc("web"); got.Status.Replicas != 3 || got.Labels["changed"] != "yes" {
				t.Errorf("stored RC %+v", got)
			}
			if _, _, _, _, calls := e.api.counts(); calls != before+1 {
				t.Errorf("status calls %d, want %d", calls, before+1)
			}
			// Unchanged status: no write at all.
			if err := e.m.updateStatus(t.Context(), e.rc("web"), want); err != nil {
				t.Fatal(err)
			}
			if _, _, _, _, calls := e.api.counts(); calls != before+1 {
				t.Errorf("status calls %d after a no-op, want %d", calls, before+1)
			}
			// Replaced: the new RC keeps its own status.
			if _, err := e.rcs.Delete(ns, "web"); err != nil {
				t.Fatal(err)
			}
			replacement := newRC("web", 1)
			replacement.UID = "uid-web-2"
			e.createRC(replacement)
			_ = e.m.updateStatus(t.Context(), stale, corev1.ReplicationControllerStatus{Replicas: 9})
			if got := e.rc("web").Status.Replicas; got == 9 {
				t.Error("the replaced RC's status was written onto its replacement")
			}
			// Gone meanwhile: nothing to write, no error.
			if _, err := e.rcs.Delete(ns, "web"); err != nil {
				t.Fatal(err)
			}
			if err := e.m.updateStatus(t.Context(), stale, corev1.ReplicationControllerStatus{Replicas: 9}); err != nil {
				t.Errorf("status of a deleted RC: %v", err)
			}
		})
	})
}

type recordedEvent struct{ obj, typ, reason string }

type fakeRecorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (r *fakeRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := ""
	if o, ok := obj.(metav1.Object); ok {
		name = o.GetName()
	}
	r.events = append(r.events, recordedEvent{name, typ, reason + ": " + fmt.Sprintf(format, args...)})
}

func (r *fakeRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// TestTemplateNotSelected: a template whose pods the selector would not
// match creates nothing (it would create without end), and says why.
func TestTemplateNotSelected(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		synctest.Test(t, func(t *testing.T) {
			rec := &fakeRecorder{}
			e := k.newEnv(t, Options{Recorder: rec})
			rc := newRC("web", 2)
			rc.Spec.Template.Labels = map[string]string{"app": "other"}
			e.createRC(rc)
			e.run()
			e.settle(settleLimit, func() bool { return rcFailureCondition(e.rc("web").Status.Conditions) >= 0 })
			if calls, _, _, _, _ := e.api.counts(); calls != 0 {
				t.Errorf("create calls %d, want 0", calls)
			}
			if rec.count() == 0 || rec.events[0].obj != "web" || rec.events[0].typ != corev1.EventTypeWarning {
				t.Errorf("events %+v", rec.events)
			}
		})
	})
}

func TestRunLifecycle(t *testing.T) {
	t.Run("replication", func(t *testing.T) { testRunLifecycle(t, ReplicationControllers{}) })
	t.Run("replicaset", func(t *testing.T) { testRunLifecycle(t, ReplicaSets{}) })
}

func testRunLifecycle[T cache.Object](t *testing.T, k Kind[T]) {
	// Informers that never sync: Run gives up when ctx ends.
	pods, objs := cachetest.NewInformer[*corev1.Pod](), cachetest.NewInformer[T]()
	pods.SetSynced(false)
	objs.SetSynced(false)
	api := &fakeAPI{}
	m, err := New(k, pods, objs, fakeStatus[T]{f: api, k: k}, &controller.RealPodControl{Client: api}, Options{Controller: controller.Options{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != k.ControllerName() {
		t.Errorf("controller name %q, want %q", m.Name(), k.ControllerName())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := m.Run(ctx); !errors.Is(err, controller.ErrCacheSyncAborted) {
		t.Errorf("Run before the caches synced: %v, want ErrCacheSyncAborted", err)
	}
	if err := m.Run(t.Context()); !errors.Is(err, controller.ErrAlreadyRun) {
		t.Errorf("second Run: %v, want ErrAlreadyRun", err)
	}
	if _, err := New(k, nil, nil, nil, nil, Options{}); err == nil {
		t.Error("New without informers returned nil error")
	}
}

// TestStatusOnOwnUnseenWrite: a sync that runs before the informer shows
// the controller's last status write builds on that write, so its own
// write meets no conflict (and costs no read).
func TestStatusOnOwnUnseenWrite(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		synctest.Test(t, func(t *testing.T) {
			e := k.newEnv(t, Options{})
			cached := e.createRC(newRC("web", 1))
			if err := e.m.updateStatus(t.Context(), cached, corev1.ReplicationControllerStatus{Replicas: 1, ObservedGeneration: 1}); err != nil {
				t.Fatal(err)
			}
			// The cache still shows cached: the next sync's base is the write.
			base := e.m.latest(cached)
			if base.ResourceVersion == cached.ResourceVersion {
				t.Fatalf("base of the next sync is the cached copy, resourceVersion %s", base.ResourceVersion)
			}
			if err := e.m.updateStatus(t.Context(), base, corev1.ReplicationControllerStatus{Replicas: 2, ObservedGeneration: 1}); err != nil {
				t.Fatal(err)
			}
			if _, _, _, _, calls := e.api.counts(); calls != 2 {
				t.Errorf("status calls %d, want 2 (no conflict, no retry)", calls)
			}
			if got := e.rc("web").Status.Replicas; got != 2 {
				t.Errorf("stored status.replicas %d, want 2", got)
			}
		})
	})
}
