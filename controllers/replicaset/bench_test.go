package replicaset

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
)

// waitFor polls cond; benchmarks run outside a synctest bubble, where
// nothing else tells when the manager is done.
func waitFor(b *testing.B, cond func() bool) {
	b.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(200 * time.Microsecond) {
		if time.Now().After(deadline) {
			b.Fatal("condition not reached within a minute")
		}
	}
}

// BenchmarkScaleUp measures an RC going from 0 to 1,000 pods, with status
// written, over in-memory informers and API.
func BenchmarkScaleUp(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		e := kinds[0].newEnv(b, Options{Controller: controller.Options{Workers: 5}})
		waitFor(b, func() bool { return informers.For[*corev1.Pod](e.factory).HasSynced() && e.objsSynced() })
		e.start()
		// Run registers the handlers: the clock starts with the workers.
		waitFor(b, e.m.HasSynced)
		b.StartTimer()
		e.createRC(newRC("web", 1000))
		waitFor(b, func() bool { rc, ok := e.rcs.Get(ns, "web"); return ok && rc.Status.Replicas == 1000 })
		b.StopTimer()
		if calls, _, _, _, _ := e.api.counts(); calls != 1000 {
			b.Fatalf("create calls %d, want 1000", calls)
		}
		e.stop()
		b.StartTimer()
	}
}

// BenchmarkSteadySync measures one sync of an RC whose 1,000 pods are all
// there: the cost every event of such an RC pays.
func BenchmarkSteadySync(b *testing.B) {
	e := kinds[0].newEnv(b, Options{})
	defer e.stop()
	rc := e.createRC(newRC("web", 1000))
	for i := range 1000 {
		p := e.newPod("p"+string(rune('a'+i%26))+time.Duration(i).String(), map[string]string{"app": "web", "tier": "web"}, rc)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if _, err := e.pods.Create(p); err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, func() bool {
		return len(e.m.pods.GetIndexer().List()) == 1000 && e.objsSynced()
	})
	// The first sync writes status; the measured ones find nothing to do.
	if _, err := e.m.syncReplicationController(b.Context(), "default/web"); err != nil {
		b.Fatal(err)
	}
	waitFor(b, func() bool { rc, ok := e.cached("web"); return ok && rc.Status.Replicas == 1000 })
	for b.Loop() {
		if _, err := e.m.syncReplicationController(b.Context(), "default/web"); err != nil {
			b.Fatal(err)
		}
	}
	if calls, _, _, _, _ := e.api.counts(); calls != 0 {
		b.Fatalf("create calls %d, want 0", calls)
	}
}

// BenchmarkSyncLargeNamespace measures one steady sync (nothing to create,
// delete or write) in a namespace of 10,000 pods: all the RC's own, or
// 1,000 of them among another RC's 9,000. A sync should cost what the RC's
// own pods (and adoptable orphans) cost, not what the namespace holds.
func BenchmarkSyncLargeNamespace(b *testing.B) {
	for _, bc := range []struct {
		name        string
		own, others int
	}{
		{"own=10000", 10000, 0},
		{"own=1000,others=9000", 1000, 9000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := kinds[0].newEnv(b, Options{})
			defer e.stop()
			rc := e.createRC(newRC("web", int32(bc.own)))
			other := e.createRC(newRC("db", int32(bc.others)))
			ready := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			for i := range bc.own + bc.others {
				owner, lbl := rc, map[string]string{"app": "web", "tier": "web"}
				if i >= bc.own {
					owner, lbl = other, map[string]string{"app": "db", "tier": "web"}
				}
				p := e.newPod(fmt.Sprintf("p-%d", i), lbl, owner)
				p.Status.Phase = corev1.PodRunning
				p.Status.Conditions = ready
				if _, err := e.pods.Create(p); err != nil {
					b.Fatal(err)
				}
			}
			total := bc.own + bc.others
			waitFor(b, func() bool {
				return len(e.m.pods.GetIndexer().List()) == total && e.objsSynced()
			})
			if _, err := e.m.syncReplicationController(b.Context(), "default/web"); err != nil {
				b.Fatal(err)
			}
			waitFor(b, func() bool {
				rc, ok := e.cached("web")
				return ok && rc.Status.ReadyReplicas == int32(bc.own)
			})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.m.syncReplicationController(b.Context(), "default/web"); err != nil {
					b.Fatal(err)
				}
			}
			if calls, _, dels, patches, _ := e.api.counts(); calls+dels+patches != 0 {
				b.Fatalf("steady sync wrote: %d creates, %d deletes, %d patches", calls, dels, patches)
			}
		})
	}
}
