package replicaset

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/listwatch/listwatch/controller"
)

// TestPropertyConverges drives the manager with random sequences of RC
// scale changes, pod deletions and orphan pods by someone else, readiness
// flips and injected create failures. Throughout, no RC ever holds more
// pods than it ever asked for (plus the orphans it may have adopted); after
// quiescence every RC has exactly spec.replicas active pods and a status
// that says so.
func TestPropertyConverges(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		seeds := 12
		if testing.Short() {
			seeds = 4
		}
		for seed := range seeds {
			t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { runProperty(t, k, uint64(seed)) })
			})
		}
	})
}

func runProperty(t *testing.T, k kindCase, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	burst, workers := 1+rng.IntN(5), 1+rng.IntN(3)
	e := k.newEnv(t, Options{BurstReplicas: burst, Controller: controller.Options{Workers: workers}})
	faults := rand.New(rand.NewPCG(seed, 0xfa17)) // used under fakeAPI.mu
	names := []string{"a", "b", "c"}
	maxDesired := map[string]int{}
	adopted := map[string]int{}
	rcs := map[string]*corev1.ReplicationController{}
	for _, n := range names {
		r := int32(rng.IntN(8))
		rcs[n] = e.createRC(newRC(n, r))
		maxDesired[n] = int(r)
	}
	e.run()

	check := func(step int) {
		t.Helper()
		for _, n := range names {
			if got := len(e.owned(rcs[n])); got > maxDesired[n]+adopted[n] {
				t.Fatalf("step %d: RC %s has %d pods, never asked for more than %d (+%d orphans)", step, n, got, maxDesired[n], adopted[n])
			}
		}
	}
	for step := range 60 {
		n := names[rng.IntN(len(names))]
		switch op := rng.IntN(10); {
		case op < 3:
			r := int32(rng.IntN(11))
			e.scale(n, r)
			maxDesired[n] = max(maxDesired[n], int(r))
		case op < 5:
			if pods := e.owned(rcs[n]); len(pods) > 0 {
				p := pods[rng.IntN(len(pods))]
				_, _ = e.pods.Delete(ns, p.Name) // may race with the manager's own delete
			}
		case op < 7:
			if pods := e.owned(rcs[n]); len(pods) > 0 {
				e.setReady(pods[rng.IntN(len(pods))], rng.IntN(2) == 0)
			}
		case op < 8:
			name := fmt.Sprintf("orphan-%d", step)
			if _, err := e.pods.Create(k.newPod(name, map[string]string{"app": n}, nil)); err != nil {
				t.Fatal(err)
			}
			adopted[n]++
		default:
			rate := rng.Float64() * 0.6
			e.api.set(func(f *fakeAPI) {
				f.failCreate = func(int) error {
					if faults.Float64() < rate {
						return errInjected
					}
					return nil
				}
			})
		}
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		synctest.Wait()
		check(step)
	}

	e.api.set(func(f *fakeAPI) { f.failCreate = nil })
	e.settle(time.Hour, func() bool {
		for _, n := range names {
			rc := e.rc(n)
			pods := e.owned(rc)
			ready := 0
			for _, p := range pods {
				if controller.IsPodReady(p) {
					ready++
				}
			}
			st := rc.Status
			if len(pods) != int(*rc.Spec.Replicas) || st.Replicas != *rc.Spec.Replicas || int(st.ReadyReplicas) != ready ||
				st.AvailableReplicas != st.ReadyReplicas || st.ObservedGeneration != rc.Generation || len(st.Conditions) != 0 {
				return false
			}
		}
		return true
	})
	// Every orphan left matches exactly one RC and must have been adopted.
	for _, p := range e.pods.Items() {
		if len(p.OwnerReferences) == 0 {
			t.Errorf("orphan %s never adopted", p.Name)
		}
	}
	for _, n := range names {
		if adds, dels, _ := e.m.expectations.GetExpectations("default/" + n); adds != 0 || dels != 0 {
			t.Errorf("RC %s: expectations adds=%d dels=%d after quiescence", n, adds, dels)
		}
	}
}
