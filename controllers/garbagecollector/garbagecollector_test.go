package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
)

// objects is what a scenario made, by name.
type objects map[string]*unstructured.Unstructured

func TestGarbageCollector(t *testing.T) {
	widget := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w", UID: "uid-widget"}
	ghost := func(kind, name string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: kind, Name: name, UID: "uid-ghost-" + types.UID(name)}
	}
	for _, tc := range []struct {
		name string
		// setup makes the objects before the collector starts.
		setup func(e *env, o objects)
		// act runs once the collector has settled.
		act func(e *env, o objects)
		// want lists the objects left, "resource/name", sorted.
		want []string
		// check looks further at the outcome.
		check func(t *testing.T, e *env, o objects)
	}{{
		name: "background: rc to pods",
		setup: func(e *env, o objects) {
			o["rc"] = e.api.create(e.t, rcs, newObj(rcs, "rc"))
			o["other"] = e.api.create(e.t, rcs, newObj(rcs, "other"))
			e.api.create(e.t, pods, newObj(pods, "p1", ownerRef(o["rc"], true)))
			e.api.create(e.t, pods, newObj(pods, "p2", ownerRef(o["rc"], false)))
			e.api.create(e.t, pods, newObj(pods, "q", ownerRef(o["other"], false)))
		},
		act:  func(e *env, o objects) { e.delete(rcs, "rc", metav1.DeletePropagationBackground) },
		want: []string{"pods/q", "replicationcontrollers/other"},
	}, {
		name: "background: deployment to rc to pods",
		setup: func(e *env, o objects) {
			o["d"] = e.api.create(e.t, deployments, newObj(deployments, "d"))
			o["rc"] = e.api.create(e.t, rcs, newObj(rcs, "rc", ownerRef(o["d"], true)))
			for _, p := range []string{"p1", "p2", "p3"} {
				e.api.create(e.t, pods, newObj(pods, p, ownerRef(o["rc"], true)))
			}
		},
		act:  func(e *env, o objects) { e.delete(deployments, "d", metav1.DeletePropagationBackground) },
		want: nil,
	}, {
		name: "orphan: pods lose the reference and the rc goes",
		setup: func(e *env, o objects) {
			o["rc"] = e.api.create(e.t, rcs, newObj(rcs, "rc"))
			o["other"] = e.api.create(e.t, rcs, newObj(rcs, "other"))
			e.api.create(e.t, pods, newObj(pods, "p1", ownerRef(o["rc"], true)))
			e.api.create(e.t, pods, newObj(pods, "p2", ownerRef(o["rc"], true), ownerRef(o["other"], false)))
		},
		act:  func(e *env, o objects) { e.delete(rcs, "rc", metav1.DeletePropagationOrphan) },
		want: []string{"pods/p1", "pods/p2", "replicationcontrollers/other"},
		check: func(t *testing.T, e *env, o objects) {
			p1, p2 := e.mustGet(pods, "p1"), e.mustGet(pods, "p2")
			if refs := p1.GetOwnerReferences(); len(refs) != 0 {
				t.Errorf("p1 kept references %v", refs)
			}
			if refs := p2.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != o["other"].GetUID() {
				t.Errorf("p2 references %v, want only other", refs)
			}
		},
	}, {
		name: "orphan is the default for replication controllers",
		setup: func(e *env, o objects) {
			o["rc"] = e.api.create(e.t, rcs, newObj(rcs, "rc"))
			e.api.create(e.t, pods, newObj(pods, "p1", ownerRef(o["rc"], true)))
		},
		act:  func(e *env, o objects) { e.delete(rcs, "rc", "") },
		want: []string{"pods/p1"},
	}, {
		name: "foreground: blocking dependents go before the owner",
		setup: func(e *env, o objects) {
			o["d"] = e.api.create(e.t, deployments, newObj(deployments, "d"))
			o["rc"] = e.api.create(e.t, rcs, newObj(rcs, "rc", ownerRef(o["d"], true)))
			e.api.create(e.t, pods, newObj(pods, "p1", ownerRef(o["rc"], true)))
			e.api.create(e.t, pods, newObj(pods, "p2", ownerRef(o["rc"], true)))
			e.api.create(e.t, pods, newObj(pods, "loose", ownerRef(o["d"], false)))
		},
		act:  func(e *env, o objects) { e.delete(deployments, "d", metav1.DeletePropagationForeground) },
		want: nil,
		check: func(t *testing.T, e *env, o objects) {
			order := e.api.removed
			at := func(s string) int { return slices.Index(order, s) }
			if at("replicationcontrollers/rc") > at("deployments/d") || at("pods/p1") > at("replicationcontrollers/rc") ||
				at("pods/p2") > at("replicationcontrollers/rc") {
				t.Errorf("removal order %v: blocking dependents must go before their owners", order)
			}
		},
	}, {
		name: "foreground: the owner waits while a blocking dependent is being deleted",
		setup: func(e *env, o objects) {
			o["rc"] = e.api.create(e.t, rcs, newObj(rcs, "rc"))
			p := newObj(pods, "p1", ownerRef(o["rc"], true))
			p.SetFinalizers([]string{"example.com/hold"})
			e.api.create(e.t, pods, p)
		},
		act: func(e *env, o objects) {
			e.delete(rcs, "rc", metav1.DeletePropagationForeground)
			e.settle()
			// The pod is held by someone else's finalizer, and the rc by it.
			p, ok := e.api.get(pods, "p1")
			if !ok || p.GetDeletionTimestamp() == nil {
				e.t.Fatalf("p1 = %v, want it being deleted", p)
			}
			if rc, ok := e.api.get(rcs, "rc"); !ok || !slices.Contains(rc.GetFinalizers(), metav1.FinalizerDeleteDependents) {
				e.t.Fatalf("rc = %v, want it waiting for p1", rc)
			}
			p = p.DeepCopy()
			p.SetFinalizers(nil)
			if _, err := e.api.sources[pods.GVR].Delete(ns, "p1"); err != nil {
				e.t.Fatal(err)
			}
		},
		want: nil,
	}, {
		name: "foreground through a cycle of blocking references",
		setup: func(e *env, o objects) {
			o["a"] = e.api.create(e.t, rcs, newObj(rcs, "a"))
			o["b"] = e.api.create(e.t, deployments, newObj(deployments, "b", ownerRef(o["a"], true)))
			a := o["a"].DeepCopy()
			a.SetOwnerReferences([]metav1.OwnerReference{ownerRef(o["b"], true)})
			if _, err := e.api.sources[rcs.GVR].Update(a); err != nil {
				e.t.Fatal(err)
			}
		},
		act:  func(e *env, o objects) { e.delete(rcs, "a", metav1.DeletePropagationForeground) },
		want: nil,
	}, {
		name: "two owners: losing one keeps the dependent",
		setup: func(e *env, o objects) {
			o["a"] = e.api.create(e.t, rcs, newObj(rcs, "a"))
			o["b"] = e.api.create(e.t, rcs, newObj(rcs, "b"))
			e.api.create(e.t, pods, newObj(pods, "p", ownerRef(o["a"], true), ownerRef(o["b"], true)))
		},
		act:  func(e *env, o objects) { e.delete(rcs, "a", metav1.DeletePropagationBackground) },
		want: []string{"pods/p", "replicationcontrollers/b"},
		check: func(t *testing.T, e *env, o objects) {
			p := e.mustGet(pods, "p")
			if refs := p.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != o["b"].GetUID() {
				t.Errorf("p references %v, want only b", refs)
			}
		},
	}, {
		name: "dangling owner at start-up",
		setup: func(e *env, o objects) {
			o["rc"] = e.api.create(e.t, rcs, newObj(rcs, "rc"))
			e.api.create(e.t, pods, newObj(pods, "orphan", ghost("ReplicationController", "never")))
			e.api.create(e.t, pods, newObj(pods, "half", ghost("ReplicationController", "never"), ownerRef(o["rc"], false)))
			e.api.create(e.t, pods, newObj(pods, "unknown-kind", widget))
		},
		want: []string{"pods/half", "pods/unknown-kind", "replicationcontrollers/rc"},
		check: func(t *testing.T, e *env, o objects) {
			p := e.mustGet(pods, "half")
			if refs := p.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != o["rc"].GetUID() {
				t.Errorf("half references %v, want only rc", refs)
			}
			p = e.mustGet(pods, "unknown-kind")
			if refs := p.GetOwnerReferences(); len(refs) != 1 {
				t.Errorf("a reference to an unknown kind was removed: %v", refs)
			}
		},
	}, {
		name: "an owner of another UID under the name is absent",
		setup: func(e *env, o objects) {
			o["rc"] = e.api.create(e.t, rcs, newObj(rcs, "rc"))
			stale := ownerRef(o["rc"], true)
			stale.UID = "uid-of-an-earlier-rc"
			e.api.create(e.t, pods, newObj(pods, "stale", stale))
			e.api.create(e.t, pods, newObj(pods, "current", ownerRef(o["rc"], true)))
		},
		want: []string{"pods/current", "replicationcontrollers/rc"},
	}, {
		name: "an owner recreated under its name while the collector runs",
		setup: func(e *env, o objects) {
			o["rc"] = e.api.create(e.t, rcs, newObj(rcs, "rc"))
			e.api.create(e.t, pods, newObj(pods, "p", ownerRef(o["rc"], true)))
		},
		act: func(e *env, o objects) {
			e.delete(rcs, "rc", metav1.DeletePropagationBackground)
			o["rc2"] = e.api.create(e.t, rcs, newObj(rcs, "rc"))
		},
		want: []string{"replicationcontrollers/rc"},
		check: func(t *testing.T, e *env, o objects) {
			if rc := e.mustGet(rcs, "rc"); rc.GetUID() != o["rc2"].GetUID() {
				t.Errorf("the new rc was deleted")
			}
		},
	}, {
		name: "an owner deleted while the informer was not watching (tombstone)",
		setup: func(e *env, o objects) {
			o["rc"] = e.api.create(e.t, rcs, newObj(rcs, "rc"))
			e.api.create(e.t, pods, newObj(pods, "p", ownerRef(o["rc"], true)))
		},
		act: func(e *env, o objects) {
			e.whileNotWatching(rcs, func() {
				if _, err := e.api.sources[rcs.GVR].Delete(ns, "rc"); err != nil {
					e.t.Fatal(err)
				}
			})
		},
		want: nil,
	}, {
		name: "an owner recreated while the informer was not watching",
		setup: func(e *env, o objects) {
			o["rc"] = e.api.create(e.t, rcs, newObj(rcs, "rc"))
			e.api.create(e.t, pods, newObj(pods, "p", ownerRef(o["rc"], true)))
		},
		act: func(e *env, o objects) {
			e.whileNotWatching(rcs, func() {
				if _, err := e.api.sources[rcs.GVR].Delete(ns, "rc"); err != nil {
					e.t.Fatal(err)
				}
				// The relist shows the new rc as an update of the old.
				o["rc2"] = e.api.create(e.t, rcs, newObj(rcs, "rc"))
			})
		},
		want: []string{"replicationcontrollers/rc"},
		check: func(t *testing.T, e *env, o objects) {
			if rc := e.mustGet(rcs, "rc"); rc.GetUID() != o["rc2"].GetUID() {
				t.Errorf("the new rc was deleted")
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, testResources)
				o := objects{}
				tc.setup(e, o)
				e.start()
				if tc.act != nil {
					tc.act(e, o)
					e.settle()
				}
				var got []string
				for _, obj := range e.api.all() {
					got = append(got, resourceOf(obj)+"/"+obj.GetName())
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Errorf("left %v, want %v", got, tc.want)
				}
				if tc.check != nil {
					tc.check(t, e, o)
				}
			})
		})
	}
}

// resourceOf names the resource of a test object.
func resourceOf(obj *unstructured.Unstructured) string {
	for _, r := range testResources {
		if r.GVK == obj.GroupVersionKind() {
			return r.GVR.Resource
		}
	}
	return "?"
}

func TestNew_Rejects(t *testing.T) {
	api := newFakeAPI(testResources)
	factory := informers.NewSharedInformerFactory(api, informers.Options{})
	defer factory.Shutdown()
	noKind := rcs
	noKind.GVK = schema.GroupVersionKind{}
	sameKind := pods
	sameKind.GVR.Resource = "pods2"
	failing := pods
	failing.Subscribe = func(*informers.SharedInformerFactory, schema.GroupVersionResource, cache.ResourceEventHandler[cache.Object]) (func() bool, func(), error) {
		return nil, nil, errors.New("no informer")
	}
	for _, tc := range []struct {
		name      string
		factory   *informers.SharedInformerFactory
		client    Client
		resources []Resource
	}{
		{"no factory", nil, api, testResources},
		{"no client", factory, nil, testResources},
		{"no kind", factory, api, []Resource{pods, noKind}},
		{"no resource", factory, api, []Resource{{GVK: pods.GVK}}},
		{"resource twice", factory, api, []Resource{pods, rcs, pods}},
		{"kind twice", factory, api, []Resource{pods, sameKind}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if gc, err := New(tc.factory, tc.client, tc.resources, Options{}); err == nil {
				t.Fatalf("New = %v, want an error", gc)
			}
		})
	}
	// A subscription is made by Run, which fails with it, having given up
	// the subscriptions made before it.
	gc, err := New(factory, api, []Resource{rcs, failing}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gc.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "no informer") {
		t.Errorf("Run with a failing subscription = %v", err)
	}
	if w := gc.Watched(); len(w) != 0 {
		t.Errorf("watching %v after Run failed", w)
	}
}

func TestRun(t *testing.T) {
	t.Run("caches never sync", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, testResources)
			e.api.sources[pods.GVR].FailNext(cachetest.OpList, 1<<30, nil)
			e.api.sources[pods.GVR].FailNext(cachetest.OpWatch, 1<<30, nil)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err := e.gc.Run(ctx)
			if !errors.Is(err, controller.ErrCacheSyncAborted) {
				t.Errorf("Run = %v, want ErrCacheSyncAborted", err)
			}
			if err := e.gc.Run(ctx); err == nil {
				t.Errorf("a second Run succeeded")
			}
			e.factory.Shutdown()
		})
	})
	t.Run("shares an informer through InformerOf", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			shared := pods
			shared.Subscribe = InformerOf[*unstructured.Unstructured]()
			e := newEnv(t, []Resource{rcs, shared})
			// Another controller's hold on the same informer.
			hold, release := informers.Acquire[*unstructured.Unstructured](e.factory, pods.GVR)
			defer release()
			rc := e.api.create(t, rcs, newObj(rcs, "rc"))
			e.api.create(t, pods, newObj(pods, "p", ownerRef(rc, true)))
			e.start()
			e.delete(rcs, "rc", metav1.DeletePropagationBackground)
			e.settle()
			if left := e.api.all(); len(left) != 0 {
				t.Errorf("left %d objects, want none", len(left))
			}
			if n := e.api.informers[pods.GVR]; n != 1 {
				t.Errorf("%d pod informers, want the one shared", n)
			}
			if !hold.HasSynced() {
				t.Errorf("the shared informer is not running")
			}
		})
	})
}

func TestUIDSet(t *testing.T) {
	s := uidSet{max: 4}
	for i := range 10 {
		s.add(types.UID(fmt.Sprint(i)))
	}
	for i, want := range []bool{false, false, false, false, false, false, true, true, true, true} {
		if got := s.has(types.UID(fmt.Sprint(i))); got != want {
			t.Errorf("has(%d) = %v, want %v", i, got, want)
		}
	}
	if n := len(s.cur) + len(s.prev); n > s.max {
		t.Errorf("%d entries kept, want at most %d", n, s.max)
	}
}
