package replicaset

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// TestPodViewProperty: over random histories of pod writes (owner,
// labels, phase, deletion and readiness changing at random), with the
// informer's handlers running late and syncs reading the view at any
// point in between, and with the object changing its selector, template
// labels and minReadySeconds or being replaced, a sync's counts equal a
// recount of the pod cache from the rules of status once the handlers
// have caught up.
func TestPodViewProperty(t *testing.T) {
	forEachKind(t, func(t *testing.T, k kindCase) {
		seeds := 40
		if testing.Short() {
			seeds = 10
		}
		checked := 0
		for seed := range seeds {
			checked += runViewProperty(t, k, uint64(seed))
		}
		// A history too short to check anything proves nothing.
		if checked < 500 {
			t.Fatalf("only %d caught-up states checked", checked)
		}
		t.Logf("%d caught-up states checked", checked)
	})
}

func runViewProperty(t *testing.T, k kindCase, seed uint64) (checked int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x71e3))
	web, db := newRC("web", 3), newRC("db", 1)
	m := k.newIdle(t, web, db)
	idx := m.pods.GetIndexer()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// A replaced web: same name, another UID.
	oldWeb := web.DeepCopy()
	oldWeb.UID = "uid-web-before"
	owners := []*corev1.ReplicationController{web, oldWeb, db, nil}
	labelSets := []map[string]string{
		{"app": "web", "tier": "web"}, {"app": "web"}, {"app": "db"}, {"tier": "web"}, nil,
	}
	phases := []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}
	rv := 0
	// The handler calls the informer has yet to make, in order.
	var late []func()
	flush := func(n int) {
		for _, f := range late[:n] {
			f()
		}
		late = late[n:]
	}

	for range 300 {
		switch op := rng.IntN(10); {
		case op < 5: // write a pod
			name := fmt.Sprint("p", rng.IntN(12))
			p := k.newPod(name, labelSets[rng.IntN(len(labelSets))], owners[rng.IntN(len(owners))])
			rv++
			p.ResourceVersion = fmt.Sprint(rv)
			p.Status.Phase = phases[rng.IntN(len(phases))]
			if rng.IntN(4) == 0 {
				p.DeletionTimestamp = new(metav1.NewTime(now))
			}
			if rng.IntN(3) > 0 {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
					LastTransitionTime: metav1.NewTime(now.Add(-time.Duration(rng.IntN(20)) * time.Second))}}
			}
			old, exists, err := idx.GetByKey(ns + "/" + name)
			if err != nil {
				t.Fatal(err)
			}
			if exists {
				if err := idx.Update(p); err != nil {
					t.Fatal(err)
				}
				late = append(late, func() { m.updatePod(old, p) })
			} else {
				if err := idx.Add(p); err != nil {
					t.Fatal(err)
				}
				late = append(late, func() { m.addPod(p, false) })
			}
		case op < 6: // delete a pod
			name := fmt.Sprint("p", rng.IntN(12))
			old, exists, err := idx.GetByKey(ns + "/" + name)
			if err != nil || !exists {
				continue
			}
			if err := idx.Delete(old); err != nil {
				t.Fatal(err)
			}
			unknown := rng.IntN(2) == 0
			late = append(late, func() { m.deletePod(old, unknown) })
		case op < 7: // web changes its shape, or is replaced
			switch rng.IntN(4) {
			case 0:
				web.Spec.MinReadySeconds = int32(rng.IntN(2) * 10)
			case 1:
				web.Spec.Template.Labels = maps.Clone(labelSets[rng.IntN(2)])
			case 2:
				web.Spec.Selector = maps.Clone(labelSets[rng.IntN(4)])
			case 3:
				web.UID, oldWeb.UID = oldWeb.UID, web.UID
			}
		case op < 8:
			now = now.Add(time.Duration(rng.IntN(8)) * time.Second)
		default: // the informer catches up on some handlers, then web syncs
			flush(rng.IntN(len(late) + 1))
			if _, _, _, err := m.tally(web, now); err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(8) == 0 {
			flush(len(late))
			got, next, waiting, err := m.tally(web, now)
			if err != nil {
				t.Fatal(err)
			}
			want, wantNext, wantWaiting := recount(t, idx.List(), web, now)
			if got != want || next != wantNext || waiting != wantWaiting {
				t.Fatalf("seed %d: view counts %+v next %v %v, recount %+v next %v %v", seed, got, next, waiting, want, wantNext, wantWaiting)
			}
			checked++
		}
	}
	return checked
}

// recount counts rc's pods among pods at now straight from the rules:
// controlled by rc; active (not finished, not being deleted) and matched
// by its selector for replicas, with the template's labels for
// fullyLabeled, Ready, and Ready for minReadySeconds for available;
// being deleted and not finished, and matched, for terminating; active
// and not matched for unselected.
func recount(t *testing.T, pods []*corev1.Pod, rc *corev1.ReplicationController, now time.Time) (c podCounts, next time.Duration, waiting bool) {
	t.Helper()
	sel := labels.SelectorFromSet(rc.Spec.Selector)
	if len(rc.Spec.Selector) == 0 {
		sel = labels.SelectorFromSet(rc.Spec.Template.Labels)
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.UID != types.UID(rc.UID) {
			continue
		}
		matched := sel.Matches(labels.Set(p.Labels))
		finished := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		active := !finished && p.DeletionTimestamp == nil
		switch {
		case active && matched:
			c.replicas++
			full := true
			for k, v := range rc.Spec.Template.Labels {
				if p.Labels[k] != v {
					full = false
				}
			}
			if full {
				c.fullyLabeled++
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type != corev1.PodReady || cond.Status != corev1.ConditionTrue {
					continue
				}
				c.ready++
				wait := cond.LastTransitionTime.Add(time.Duration(rc.Spec.MinReadySeconds) * time.Second).Sub(now)
				if wait <= 0 {
					c.available++
				} else if !waiting || wait < next {
					next, waiting = wait, true
				}
			}
		case active:
			c.unselected++
		case !finished && matched:
			c.terminating++
		}
	}
	return c, next, waiting
}
