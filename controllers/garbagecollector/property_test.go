package garbagecollector

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestProperty runs the collector over random forests of deployments, RCs
// and pods (some referencing owners that never existed), deletes random
// objects with random propagation policies while it works, with 10% of its
// API calls failing and 10% of its patches meeting a conflict, and checks
// once it is quiet that:
//   - no object refers to an absent owner;
//   - no object is left half-deleted: every orphan and foreground
//     finalizer was handled, and every object the test deleted is gone;
//   - every object with a chain of owners up to a root the test left alone
//     survived;
//
// and, at every write the collector made (gcClient), that it deleted only
// objects whose owners were all gone or deleting in the foreground, removed
// only references to owners gone or being deleted, and removed a
// finalizer only once nothing it waited for was left.
func TestProperty(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runProperty(t, uint64(seed)) })
		})
	}
}

// planned is an object of the random forest.
type planned struct {
	res     Resource
	name    string
	owners  []string // planned owners' names
	ghosts  int      // references to owners that never existed
	deleted bool     // by the test
	uid     types.UID
}

func runProperty(t *testing.T, seed uint64) {
	rng := newRNG(seed)
	e := newEnv(t, testResources)
	e.client.fail = func() bool { return rng.chance(0.1) }
	e.client.bump = func() bool { return rng.chance(0.1) }

	// Levels: deployments, then RCs owned by deployments, then pods owned
	// by RCs or deployments.
	var plan []*planned
	byName := map[string]*planned{}
	add := func(r Resource, prefix string, n int, candidates []*planned) []*planned {
		var level []*planned
		for i := range n {
			p := &planned{res: r, name: fmt.Sprintf("%s%d", prefix, i)}
			if len(candidates) > 0 && !rng.chance(0.15) {
				for range 1 + rng.intN(2) {
					o := candidates[rng.intN(len(candidates))]
					if !contains(p.owners, o.name) {
						p.owners = append(p.owners, o.name)
					}
				}
			}
			if rng.chance(0.1) {
				p.ghosts = 1
			}
			level = append(level, p)
			byName[p.name] = p
		}
		plan = append(plan, level...)
		return level
	}
	ds := add(deployments, "d", 2+rng.intN(4), nil)
	rs := add(rcs, "rc", 3+rng.intN(6), ds)
	add(pods, "pod", 5+rng.intN(16), append(rs, ds...))

	create := func(p *planned) {
		var refs []metav1.OwnerReference
		for _, o := range p.owners {
			owner := byName[o]
			refs = append(refs, metav1.OwnerReference{APIVersion: owner.res.GVK.GroupVersion().String(), Kind: owner.res.GVK.Kind,
				Name: owner.name, UID: owner.uid, BlockOwnerDeletion: ptrTo(rng.chance(0.5))})
		}
		for i := range p.ghosts {
			refs = append(refs, metav1.OwnerReference{APIVersion: "v1", Kind: "ReplicationController",
				Name: fmt.Sprintf("ghost%d", i), UID: types.UID("ghost-" + p.name)})
		}
		p.uid = e.api.create(t, p.res, newObj(p.res, p.name, refs...)).GetUID()
	}
	// Owners come first, so that references carry real UIDs; some objects
	// arrive before the collector starts and the rest while it runs.
	split := rng.intN(len(plan) + 1)
	for _, p := range plan[:split] {
		create(p)
	}
	e.start()
	for _, p := range plan[split:] {
		create(p)
	}
	e.settle()

	policies := []metav1.DeletionPropagation{"", metav1.DeletePropagationBackground, metav1.DeletePropagationOrphan, metav1.DeletePropagationForeground}
	for range 1 + rng.intN(len(plan)/2) {
		// Mostly owners: deleting leaves exercises little.
		p := plan[rng.intN(len(plan))]
		if rng.chance(0.7) {
			p = plan[rng.intN(len(ds)+len(rs))]
		}
		policy := policies[rng.intN(len(policies))]
		opts := metav1.DeleteOptions{}
		if policy != "" {
			opts.PropagationPolicy = &policy
		}
		uid := p.uid
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
		if err := e.api.Delete(context.Background(), p.res.GVR, ns, p.name, opts); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		p.deleted = true
		if rng.chance(0.5) {
			synctest.Wait()
		}
	}
	e.settle()

	t.Logf("objects=%d gcDeletes=%d removed=%d left=%d calls=%v", len(plan), e.client.deletes, len(e.api.removed), len(e.api.all()), e.client.calls)
	live := map[types.UID]*unstructured.Unstructured{}
	for _, o := range e.api.all() {
		live[o.GetUID()] = o
	}
	for _, o := range live {
		if o.GetDeletionTimestamp() != nil {
			t.Errorf("%s is still being deleted: finalizers %v", o.GetName(), o.GetFinalizers())
		}
		for _, r := range o.GetOwnerReferences() {
			if live[r.UID] == nil {
				t.Errorf("%s refers to absent owner %s (%s)", o.GetName(), r.Name, r.UID)
			}
		}
	}
	anchored := map[string]bool{}
	// Plan order puts owners before dependents.
	for _, p := range plan {
		a := !p.deleted && p.ghosts == 0 && len(p.owners) == 0
		for _, o := range p.owners {
			a = a || (!p.deleted && anchored[o])
		}
		anchored[p.name] = a
		switch _, alive := live[p.uid]; {
		case a && !alive:
			t.Errorf("%s was deleted although it has owners up to a root left alone (owners %v)", p.name, p.owners)
		case p.deleted && alive:
			t.Errorf("%s was deleted by the test but is still there", p.name)
		}
	}
	if t.Failed() {
		for _, p := range plan {
			t.Logf("plan: %s owners=%v ghosts=%d deleted=%v", p.name, p.owners, p.ghosts, p.deleted)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func ptrTo[T any](v T) *T { return &v }
