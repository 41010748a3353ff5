package replicaset

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
)

const settleLimit = 10 * time.Minute

func TestScaleUpCreatesExactlyN(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		for _, tc := range []struct {
			name     string
			replicas int32
			burst    int
			workers  int
		}{
			{"zero", 0, 0, 1},
			{"one", 1, 0, 1},
			{"twenty", 20, 0, 3},
			{"burst capped", 25, 4, 2},
		} {
			t.Run(tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := k.newEnv(t, Options{BurstReplicas: tc.burst, Controller: controller.Options{Workers: tc.workers}})
					rc := e.createRC(newRC("web", tc.replicas))
					e.run()
					e.settle(settleLimit, func() bool {
						got := e.rc("web").Status
						return len(e.owned(rc)) == int(tc.replicas) && got.Replicas == tc.replicas && got.ObservedGeneration == 1
					})
					calls, created, _, _, _ := e.api.counts()
					if calls != int(tc.replicas) || created != int(tc.replicas) {
						t.Errorf("create calls %d, created %d; want %d", calls, created, tc.replicas)
					}
					for _, p := range e.owned(rc) {
						ref := metav1.GetControllerOf(p)
						if ref.Kind != k.gvk.Kind || ref.APIVersion != k.gvk.GroupVersion().String() || ref.Name != "web" || !*ref.BlockOwnerDeletion {
							t.Errorf("pod %s: owner reference %+v", p.Name, ref)
						}
						if p.Labels["tier"] != "web" || len(p.Spec.Containers) != 1 {
							t.Errorf("pod %s not made from the template: %+v", p.Name, p)
						}
					}
					st := e.rc("web").Status
					if st.FullyLabeledReplicas != tc.replicas || st.ReadyReplicas != 0 || st.AvailableReplicas != 0 || len(st.Conditions) != 0 {
						t.Errorf("status %+v", st)
					}
				})
			})
		}
	})
}

// TestExpectationsHoldWhileCacheLags: creations the server accepted but the
// informer has not shown yet must not be made again, however many syncs
// run meanwhile, and a sync creates at most burstReplicas pods.
func TestExpectationsHoldWhileCacheLags(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		synctest.Test(t, func(t *testing.T) {
			e := k.newEnv(t, Options{BurstReplicas: 3, Controller: controller.Options{Workers: 2}})
			e.api.set(func(f *fakeAPI) { f.holdCreates = true })
			rc := e.createRC(newRC("web", 10))
			e.run()
			synctest.Wait()
			// Poke the RC many times: every sync finds expectations pending.
			for i := range 5 {
				next := e.rc("web").DeepCopy()
				next.Annotations = map[string]string{"poke": string(rune('a' + i))}
				if _, err := e.rcs.Update(next); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Second)
				synctest.Wait()
			}
			if calls, _, _, _, _ := e.api.counts(); calls != 3 {
				t.Fatalf("create calls while the cache lags = %d, want 3 (one burst)", calls)
			}
			if adds, _, ok := e.m.expectations.GetExpectations("default/web"); !ok || adds != 3 {
				t.Fatalf("expectations adds = %d (%v), want 3", adds, ok)
			}
			e.api.releaseCreates(t)
			e.settle(settleLimit, func() bool { return len(e.owned(rc)) == 10 && e.rc("web").Status.Replicas == 10 })
			if calls, _, _, _, _ := e.api.counts(); calls != 10 {
				t.Errorf("create calls = %d, want 10", calls)
			}
		})
	})
}

// TestExpectationsExpire: creations never observed stop blocking the RC
// after the expectations' TTL.
func TestExpectationsExpire(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		synctest.Test(t, func(t *testing.T) {
			e := k.newEnv(t, Options{ExpectationsTTL: time.Minute})
			e.api.set(func(f *fakeAPI) { f.holdCreates = true })
			e.createRC(newRC("web", 2))
			e.run()
			synctest.Wait()
			if calls, _, _, _, _ := e.api.counts(); calls != 2 {
				t.Fatalf("create calls = %d, want 2", calls)
			}
			time.Sleep(61 * time.Second)
			// Any event now syncs with expired expectations.
			next := e.rc("web").DeepCopy()
			next.Annotations = map[string]string{"poke": "x"}
			if _, err := e.rcs.Update(next); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if calls, _, _, _, _ := e.api.counts(); calls != 4 {
				t.Errorf("create calls after the TTL = %d, want 4", calls)
			}
		})
	})
}

func TestScaleDownDeletesLowestRanked(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		type podSpec struct {
			name    string
			node    string
			phase   corev1.PodPhase
			ready   bool
			readyAt time.Duration // before now
			age     time.Duration
		}
		for _, tc := range []struct {
			name   string
			pods   []podSpec
			target int32
			want   []string // deleted
		}{
			{
				name: "unscheduled, pending, not ready first",
				pods: []podSpec{
					{name: "ready-old", node: "n", phase: corev1.PodRunning, ready: true, readyAt: time.Hour, age: 2 * time.Hour},
					{name: "unscheduled", phase: corev1.PodPending, age: time.Hour},
					{name: "pending", node: "n", phase: corev1.PodPending, age: time.Hour},
					{name: "not-ready", node: "n", phase: corev1.PodRunning, age: time.Hour},
					{name: "ready-new", node: "n", phase: corev1.PodRunning, ready: true, readyAt: time.Minute, age: time.Hour},
				},
				target: 2,
				want:   []string{"not-ready", "pending", "unscheduled"},
			},
			{
				name: "ready for less time first",
				pods: []podSpec{
					{name: "a", node: "n", phase: corev1.PodRunning, ready: true, readyAt: time.Hour, age: 2 * time.Hour},
					{name: "b", node: "n", phase: corev1.PodRunning, ready: true, readyAt: time.Minute, age: 2 * time.Hour},
					{name: "c", node: "n", phase: corev1.PodRunning, ready: true, readyAt: 10 * time.Minute, age: 2 * time.Hour},
				},
				target: 1,
				want:   []string{"b", "c"},
			},
			{
				name: "newer first on a tie",
				pods: []podSpec{
					{name: "old", phase: corev1.PodPending, age: time.Hour},
					{name: "new", phase: corev1.PodPending, age: time.Minute},
				},
				target: 1,
				want:   []string{"new"},
			},
		} {
			t.Run(tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := k.newEnv(t, Options{})
					rc := e.createRC(newRC("web", int32(len(tc.pods))))
					now := time.Now()
					for _, ps := range tc.pods {
						p := k.newPod(ps.name, map[string]string{"app": "web", "tier": "web"}, rc)
						p.CreationTimestamp = metav1.NewTime(now.Add(-ps.age))
						p.Spec.NodeName = ps.node
						p.Status.Phase = ps.phase
						if ps.ready {
							p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
								LastTransitionTime: metav1.NewTime(now.Add(-ps.readyAt))}}
						}
						if _, err := e.pods.Create(p); err != nil {
							t.Fatal(err)
						}
					}
					e.run()
					e.settle(settleLimit, func() bool { return e.rc("web").Status.Replicas == int32(len(tc.pods)) })
					e.scale("web", tc.target)
					e.settle(settleLimit, func() bool {
						return e.rc("web").Status.Replicas == tc.target && e.rc("web").Status.ObservedGeneration == 2
					})
					var gone []string
					for _, ps := range tc.pods {
						if _, ok := e.pods.Get(ns, ps.name); !ok {
							gone = append(gone, ps.name)
						}
					}
					slices.Sort(gone)
					if !slices.Equal(gone, tc.want) {
						t.Errorf("deleted %v, want %v", gone, tc.want)
					}
					if calls, _, dels, _, _ := e.api.counts(); calls != 0 || dels != len(tc.want) {
						t.Errorf("create calls %d, delete calls %d; want 0, %d", calls, dels, len(tc.want))
					}
				})
			})
		}
	})
}

// TestGracefulDeletionObservedOnce: a deletion is observed when the pod
// gets its deletionTimestamp, and its final removal does not count twice.
func TestGracefulDeletionObservedOnce(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		synctest.Test(t, func(t *testing.T) {
			e := k.newEnv(t, Options{})
			e.api.set(func(f *fakeAPI) { f.gracefulDeletes = true })
			rc := e.createRC(newRC("web", 4))
			e.run()
			e.settle(settleLimit, func() bool { return len(e.owned(rc)) == 4 })
			e.scale("web", 1)
			e.settle(settleLimit, func() bool { return e.rc("web").Status.Replicas == 1 })
			if adds, dels, _ := e.m.expectations.GetExpectations("default/web"); adds != 0 || dels != 0 {
				t.Fatalf("expectations adds=%d dels=%d, want 0 0", adds, dels)
			}
			// The terminating pods are still there; finish them.
			for _, p := range e.pods.Items() {
				if p.DeletionTimestamp != nil {
					if _, err := e.pods.Delete(ns, p.Name); err != nil {
						t.Fatal(err)
					}
				}
			}
			e.settle(settleLimit, func() bool { return len(e.pods.Items()) == 1 })
			if calls, _, dels, _, _ := e.api.counts(); calls != 4 || dels != 3 {
				t.Errorf("create calls %d, delete calls %d; want 4, 3", calls, dels)
			}
		})
	})
}

func TestAdoptionAndRelease(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		synctest.Test(t, func(t *testing.T) {
			e := k.newEnv(t, Options{Controller: controller.Options{Workers: 2}})
			other := newRC("other", 1)
			other.Spec.Selector = map[string]string{"app": "other"}
			for _, p := range []*corev1.Pod{
				k.newPod("orphan", map[string]string{"app": "web", "tier": "web"}, nil),
				k.newPod("orphan-elsewhere", map[string]string{"app": "db"}, nil),
				k.newPod("others", map[string]string{"app": "web"}, other),
			} {
				if _, err := e.pods.Create(p); err != nil {
					t.Fatal(err)
				}
			}
			rc := e.createRC(newRC("web", 2))
			e.run()
			e.settle(settleLimit, func() bool { return len(e.owned(rc)) == 2 && e.rc("web").Status.Replicas == 2 })
			if _, created, _, _, _ := e.api.counts(); created != 1 {
				t.Errorf("created %d, want 1 (the orphan is adopted)", created)
			}
			if p, _ := e.pods.Get(ns, "orphan"); metav1.GetControllerOf(p) == nil || metav1.GetControllerOf(p).UID != rc.UID {
				t.Errorf("orphan not adopted: %+v", p.OwnerReferences)
			}
			if p, _ := e.pods.Get(ns, "orphan-elsewhere"); len(p.OwnerReferences) != 0 {
				t.Errorf("non-matching orphan adopted: %+v", p.OwnerReferences)
			}
			if p, _ := e.pods.Get(ns, "others"); metav1.GetControllerOf(p).Name != "other" {
				t.Errorf("another controller's pod taken: %+v", p.OwnerReferences)
			}
			// Fewer labels than the template: adopted, but not fully labeled.
			if st := e.rc("web").Status; st.FullyLabeledReplicas != 2 {
				t.Errorf("fullyLabeledReplicas %d, want 2", st.FullyLabeledReplicas)
			}

			// The orphan's labels stop matching: it is released and replaced.
			p, _ := e.pods.Get(ns, "orphan")
			next := p.DeepCopy()
			next.Labels = map[string]string{"app": "debug"}
			if _, err := e.pods.Update(next); err != nil {
				t.Fatal(err)
			}
			e.settle(settleLimit, func() bool {
				p, _ := e.pods.Get(ns, "orphan")
				return len(p.OwnerReferences) == 0 && len(e.owned(rc)) == 2
			})
			if _, created, _, _, _ := e.api.counts(); created != 2 {
				t.Errorf("created %d, want 2 (one replacement)", created)
			}
		})
	})
}

// TestNoAdoptionByDeletedRC: an RC the cache still holds but the server
// has deleted (the fresh read says so) adopts nothing and creates nothing.
func TestNoAdoptionByDeletedRC(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		for _, tc := range []struct {
			name  string
			fresh func(rc *corev1.ReplicationController) (*corev1.ReplicationController, error)
		}{
			{"gone", func(rc *corev1.ReplicationController) (*corev1.ReplicationController, error) {
				return nil, apierrors.NewNotFound(corev1.Resource("replicationcontrollers"), rc.Name)
			}},
			{"being deleted", func(rc *corev1.ReplicationController) (*corev1.ReplicationController, error) {
				rc = rc.DeepCopy()
				rc.DeletionTimestamp = new(metav1.Now())
				return rc, nil
			}},
			{"replaced", func(rc *corev1.ReplicationController) (*corev1.ReplicationController, error) {
				rc = rc.DeepCopy()
				rc.UID = "someone-else"
				return rc, nil
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := k.newEnv(t, Options{})
					if _, err := e.pods.Create(k.newPod("orphan", map[string]string{"app": "web"}, nil)); err != nil {
						t.Fatal(err)
					}
					rc := e.createRC(newRC("web", 1))
					e.api.set(func(f *fakeAPI) {
						f.rcGet = func(_, _ string) (*corev1.ReplicationController, error) { return tc.fresh(rc) }
					})
					e.run()
					synctest.Wait()
					time.Sleep(time.Second)
					synctest.Wait()
					if p, _ := e.pods.Get(ns, "orphan"); len(p.OwnerReferences) != 0 {
						t.Errorf("orphan adopted: %+v", p.OwnerReferences)
					}
					if calls, _, _, patches, _ := e.api.counts(); calls != 0 || patches != 0 {
						t.Errorf("create calls %d, patches %d; want 0 0", calls, patches)
					}
				})
			})
		}
	})
}

func TestDeletedRCPodsNotRecreated(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		for _, tc := range []struct {
			name   string
			remove func(e *env)
		}{
			{"being deleted", func(e *env) {
				next := e.rc("web").DeepCopy()
				next.DeletionTimestamp = new(metav1.Now())
				next.Finalizers = []string{"orphan"}
				if _, err := e.rcs.Update(next); err != nil {
					e.tb.Fatal(err)
				}
			}},
			{"gone", func(e *env) {
				if _, err := e.rcs.Delete(ns, "web"); err != nil {
					e.tb.Fatal(err)
				}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := k.newEnv(t, Options{})
					rc := e.createRC(newRC("web", 3))
					e.run()
					e.settle(settleLimit, func() bool { return len(e.owned(rc)) == 3 })
					tc.remove(e)
					synctest.Wait()
					for _, p := range e.owned(rc)[:2] {
						if _, err := e.pods.Delete(ns, p.Name); err != nil {
							t.Fatal(err)
						}
					}
					time.Sleep(time.Minute)
					synctest.Wait()
					if calls, _, _, _, _ := e.api.counts(); calls != 3 {
						t.Errorf("create calls %d, want 3: pods of a deleted RC recreated", calls)
					}
					if len(e.owned(rc)) != 1 {
						t.Errorf("%d owned pods left, want 1", len(e.owned(rc)))
					}
					if _, _, ok := e.m.expectations.GetExpectations("default/web"); ok && tc.name == "gone" {
						t.Error("expectations of a deleted RC kept")
					}
				})
			})
		}
	})
}

// TestSlowStartStopsAtFailingBatch calls manageReplicas directly: the
// batches are 1, 2, 4, …, a failing batch ends the creations, and the
// expectations are lowered by what was not created.
func TestSlowStartStopsAtFailingBatch(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		for _, tc := range []struct {
			name      string
			failCall  int // 0: none
			wantCalls int
			wantPods  int
		}{
			{"no failure", 0, 7, 7},
			{"first batch", 1, 1, 0},
			{"second batch", 2, 3, 2},
			{"third batch", 5, 7, 6},
		} {
			t.Run(tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := k.newEnv(t, Options{})
					e.api.set(func(f *fakeAPI) {
						f.failCreate = func(call int) error {
							if call == tc.failCall {
								return errInjected
							}
							return nil
						}
					})
					e.observe()
					rc := e.createRC(newRC("web", 7))
					synctest.Wait()
					// The server accepts creations, the watch lags.
					e.api.set(func(f *fakeAPI) { f.holdCreates = true })
					err := e.m.manageReplicas(t.Context(), nil, rc)
					if (err != nil) != (tc.failCall != 0) || (err != nil && !errors.Is(err, errInjected)) {
						t.Fatalf("manageReplicas: %v", err)
					}
					if calls, created, _, _, _ := e.api.counts(); calls != tc.wantCalls || created != tc.wantPods {
						t.Errorf("create calls %d, created %d; want %d, %d", calls, created, tc.wantCalls, tc.wantPods)
					}
					adds, _, _ := e.m.expectations.GetExpectations("default/web")
					if adds != tc.wantPods {
						t.Errorf("expected creations %d before the informer caught up, want %d", adds, tc.wantPods)
					}
					e.api.releaseCreates(t)
					synctest.Wait()
					if adds, _, _ := e.m.expectations.GetExpectations("default/web"); adds != 0 {
						t.Errorf("expected creations %d after, want 0", adds)
					}
				})
			})
		}
	})
}

// TestReplicaFailureCondition: failing creations set the condition; once
// they succeed it is removed and the RC converges.
func TestReplicaFailureCondition(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		synctest.Test(t, func(t *testing.T) {
			e := k.newEnv(t, Options{})
			e.api.set(func(f *fakeAPI) { f.failCreate = func(int) error { return errInjected } })
			rc := e.createRC(newRC("web", 3))
			e.run()
			e.settle(settleLimit, func() bool { return rcFailureCondition(e.rc("web").Status.Conditions) >= 0 })
			c := e.rc("web").Status.Conditions[0]
			if c.Type != corev1.ReplicationControllerReplicaFailure || c.Status != corev1.ConditionTrue || c.Reason != ReasonFailedCreate || c.Message == "" {
				t.Errorf("condition %+v", c)
			}
			if adds, _, _ := e.m.expectations.GetExpectations("default/web"); adds != 0 {
				t.Errorf("expectations adds %d after failed creates, want 0", adds)
			}
			e.api.set(func(f *fakeAPI) { f.failCreate = nil })
			e.settle(settleLimit, func() bool {
				st := e.rc("web").Status
				return len(e.owned(rc)) == 3 && st.Replicas == 3 && len(st.Conditions) == 0
			})
		})
	})
}

// TestDeleteFailureLowersExpectations: a delete that fails is not waited
// for; one that finds the pod gone counts as done.
func TestDeleteFailureLowersExpectations(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		synctest.Test(t, func(t *testing.T) {
			e := k.newEnv(t, Options{})
			e.observe()
			rc := e.createRC(newRC("web", 3))
			e.settle(settleLimit, e.objsSynced)
			var pods []*corev1.Pod
			for _, name := range []string{"a", "b", "c"} {
				p, err := e.pods.Create(k.newPod(name, map[string]string{"app": "web"}, rc))
				if err != nil {
					t.Fatal(err)
				}
				pods = append(pods, p)
			}
			synctest.Wait()
			// "a" is gone on the server already, and the cache has seen it go
			// before any deletion was expected.
			if _, err := e.pods.Delete(ns, "a"); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			e.api.set(func(f *fakeAPI) { f.holdDeletes = true })
			next := rc.DeepCopy()
			next.Spec.Replicas = new(int32(0))
			if err := e.m.manageReplicas(t.Context(), pods, next); err != nil {
				t.Fatalf("manageReplicas: %v", err)
			}
			synctest.Wait()
			if _, dels, _ := e.m.expectations.GetExpectations("default/web"); dels != 3 {
				t.Fatalf("expected deletions %d while the cache lags, want 3", dels)
			}

			// Now "a" is NotFound, "b" fails, "c" goes: none is waited for.
			e.api.set(func(f *fakeAPI) {
				f.holdDeletes = false
				f.failDelete = func(name string) error {
					if name == "b" {
						return apierrors.NewInternalError(errors.New("etcd hiccup"))
					}
					return nil
				}
			})
			err := e.m.manageReplicas(t.Context(), pods, next)
			if !apierrors.IsInternalError(err) {
				t.Fatalf("manageReplicas: %v, want the InternalError of b only", err)
			}
			synctest.Wait()
			if _, dels, _ := e.m.expectations.GetExpectations("default/web"); dels != 0 {
				t.Errorf("expected deletions %d after NotFound, failure and observed delete, want 0", dels)
			}
			if _, ok := e.pods.Get(ns, "b"); !ok {
				t.Error("b deleted despite the failure")
			}
		})
	})
}

// TestTombstoneDeletePod: a pod deleted while the watch was down is seen
// only as a deletion inferred from the relist, and still fulfils the
// deletion the RC expected.
func TestTombstoneDeletePod(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		synctest.Test(t, func(t *testing.T) {
			var logs logBuffer
			e := k.newEnv(t, Options{Controller: controller.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}})
			rc := e.createRC(newRC("web", 2))
			e.run()
			e.settle(settleLimit, func() bool { return len(e.owned(rc)) == 2 && e.rc("web").Status.Replicas == 2 })
			e.api.set(func(f *fakeAPI) { f.holdDeletes = true })
			e.scale("web", 1)
			e.settle(settleLimit, func() bool {
				_, dels, _ := e.m.expectations.GetExpectations("default/web")
				return dels == 1
			})
			var victim string
			e.api.set(func(f *fakeAPI) { victim = f.heldDeletes[0] })

			// The watch breaks; while the reflector is away the pod goes and
			// history is compacted, so it must relist.
			e.pods.SetDelay(cachetest.OpList, time.Hour)
			e.pods.SetDelay(cachetest.OpWatch, time.Hour)
			e.pods.BreakWatches(nil)
			if _, err := e.pods.Delete(ns, victim); err != nil {
				t.Fatal(err)
			}
			e.pods.Compact(e.pods.Revision())
			e.pods.SetDelay(cachetest.OpList, 0)
			e.pods.SetDelay(cachetest.OpWatch, 0)
			e.settle(3*time.Hour, func() bool {
				_, dels, _ := e.m.expectations.GetExpectations("default/web")
				return dels == 0 && e.rc("web").Status.Replicas == 1
			})
			if calls, _, _, _, _ := e.api.counts(); calls != 2 {
				t.Errorf("create calls %d, want 2", calls)
			}
			if !strings.Contains(logs.String(), "pod deletion inferred from a relist") {
				t.Error("the deletion did not arrive as a tombstone")
			}
		})
	})
}

// logBuffer collects log output from several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestStatusAvailableAfterMinReadySeconds(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		synctest.Test(t, func(t *testing.T) {
			e := k.newEnv(t, Options{})
			rc := newRC("web", 3)
			rc.Spec.MinReadySeconds = 30
			rc.Generation = 7
			rc = e.createRC(rc)
			e.run()
			e.settle(settleLimit, func() bool { return len(e.owned(rc)) == 3 })
			for _, p := range e.owned(rc) {
				e.setReady(p, true)
			}
			// Not yet available: a status on its way, written at the pace.
			time.Sleep(DefaultStatusInterval)
			synctest.Wait()
			st := e.rc("web").Status
			if st.Replicas != 3 || st.ReadyReplicas != 3 || st.AvailableReplicas != 0 || st.ObservedGeneration != 7 {
				t.Fatalf("status right after ready %+v", st)
			}
			time.Sleep(29 * time.Second)
			synctest.Wait()
			if st := e.rc("web").Status; st.AvailableReplicas != 0 {
				t.Fatalf("available %d before minReadySeconds", st.AvailableReplicas)
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
			if st := e.rc("web").Status; st.AvailableReplicas != 3 || st.ReadyReplicas != 3 {
				t.Fatalf("status after minReadySeconds %+v", st)
			}
			// A pod that stops being ready stops being available at once.
			e.setReady(e.owned(rc)[0], false)
			synctest.Wait()
			if st := e.rc("web").Status; st.AvailableReplicas != 2 || st.ReadyReplicas != 2 {
				t.Fatalf("status after a pod went unready %+v", st)
			}
			// Status is written when it changes, not on every sync.
			_, _, _, _, before := e.api.counts()
			next := e.rc("web").DeepCopy()
			next.Annotations = map[string]string{"poke": "1"}
			if _, err := e.rcs.Update(next); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if _, _, _, _, after := e.api.counts(); after != before {
				t.Errorf("%d status writes for a sync that changed nothing", after-before)
			}
		})
	})
}

// TestStatusPace: a status on its way up waits for StatusInterval after
// the last such write; one others wait on (fewer ready pods, all of them
// ready and available) is written at once.
func TestStatusPace(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		synctest.Test(t, func(t *testing.T) {
			e := k.newEnv(t, Options{StatusInterval: time.Second})
			rc := e.createRC(newRC("web", 4))
			e.run()
			e.settle(settleLimit, func() bool { return len(e.owned(rc)) == 4 })
			pods := e.owned(rc)
			for _, p := range pods {
				e.setReady(p, true)
			}
			synctest.Wait()
			ready := func() int32 { return e.rc("web").Status.ReadyReplicas }
			if got := ready(); got != 4 {
				t.Fatalf("all ready: status says %d ready at once, want 4", got)
			}
			for _, p := range pods[:3] {
				e.setReady(p, false)
				synctest.Wait()
			}
			if got := ready(); got != 1 {
				t.Fatalf("three unready: status says %d ready at once, want 1", got)
			}
			time.Sleep(2 * time.Second)
			e.setReady(pods[0], true)
			synctest.Wait()
			if got := ready(); got != 2 {
				t.Fatalf("first write after a quiet interval: %d ready, want 2 at once", got)
			}
			e.setReady(pods[1], true)
			synctest.Wait()
			if got := ready(); got != 2 {
				t.Fatalf("second write within the interval: %d ready at once, want 2 until the interval ends", got)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			if got := ready(); got != 3 {
				t.Fatalf("after the interval: %d ready, want 3", got)
			}
			e.setReady(pods[2], true)
			synctest.Wait()
			if got := ready(); got != 4 {
				t.Fatalf("all ready again: %d ready at once, want 4", got)
			}
		})
	})
}
