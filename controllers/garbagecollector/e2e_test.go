package garbagecollector

// End to end: the collector, on the informers factory and the REST client,
// against listwatch's own API server on 127.0.0.1, on both storage
// backends, with custom resources whose definitions are created through
// the API after the collector started.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/internal/testbackends"
)

var backends = testbackends.All("garbagecollector")

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// The custom resources of the end-to-end tests: gadgets own widgets.
var (
	gadgetsGVR = schema.GroupVersionResource{Group: "gc.example.com", Version: "v1", Resource: "gadgets"}
	widgetsGVR = schema.GroupVersionResource{Group: "gc.example.com", Version: "v1", Resource: "widgets"}
)

// crdOf is the definition of a namespaced custom resource that keeps any
// field.
func crdOf(t *testing.T, gvr schema.GroupVersionResource, kind string) *unstructured.Unstructured {
	js := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"` + gvr.Resource + `.` + gvr.Group + `"},
"spec":{"group":"` + gvr.Group + `","scope":"Namespaced","names":{"kind":"` + kind + `","plural":"` + gvr.Resource + `"},
"versions":[{"name":"` + gvr.Version + `","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(js), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// e2eWait bounds every wait; it is what a hung collector fails on, never
// what the test measures.
const e2eWait = 30 * time.Second

// eventually polls cond until it holds, failing the test at the deadline
// with what cond last said.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(e2eWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
	}
	t.Fatalf("timed out waiting for %s; last: %s", what, last)
}

// TestE2ECustomResources runs the collector, discovering resources every
// 100 ms, against a server on which the custom resource definitions are
// created only once it runs: a widget (custom) owned by a gadget (custom),
// and a ConfigMap owned by a gadget, are collected when the gadget goes; a
// widget owned by a ConfigMap when the ConfigMap goes; a gadget deleted in
// the foreground waits for its blocking widget, held by a finalizer; and a
// definition deleted while the collector runs is no longer watched.
func TestE2ECustomResources(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			srv, err := apiserver.New(apiserver.Config{Storage: b.New(t), DisableAdmissionPlugins: []string{"ServiceAccount"}})
			if err != nil {
				t.Fatal(err)
			}
			runtest.Start(t, srv)
			hs := httptest.NewServer(srv.Handler())
			c, err := client.New(&client.Config{REST: &rest.Config{Host: hs.URL}, QPS: -1})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			factory := informers.NewSharedInformerFactory(c, informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
			discover := ServedResources(c)
			initial, err := discover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gc, err := New(factory, NewClient(c), initial, Options{
				Discover: discover, ResyncPeriod: 100 * time.Millisecond,
				Controller: controller.Options{Logger: quiet},
			})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() {
				if err := gc.Run(runCtx); err != nil {
					t.Errorf("Run: %v", err)
				}
			})
			t.Cleanup(func() {
				cancel()
				wg.Wait()
				factory.Shutdown()
				hs.CloseClientConnections()
				hs.Close()
			})

			watched := func(gvr schema.GroupVersionResource) bool { return slices.Contains(gc.Watched(), gvr) }
			if watched(gadgetsGVR) || watched(widgetsGVR) {
				t.Fatal("custom resources watched before their definitions exist")
			}
			crds := client.NewUnstructured(c, crdGVR, "")
			for _, d := range []*unstructured.Unstructured{crdOf(t, gadgetsGVR, "Gadget"), crdOf(t, widgetsGVR, "Widget")} {
				if _, err := crds.Create(ctx, d, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "the collector to watch the new custom resources", func() (bool, string) {
				return watched(gadgetsGVR) && watched(widgetsGVR), fmt.Sprint(gc.Watched())
			})

			e := &e2e{t: t, c: c}
			cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
			for _, tc := range []struct {
				name string
				run  func(t *testing.T)
			}{{"custom resources owned by a custom resource", func(t *testing.T) {
				g := e.create(gadgetsGVR, "Gadget", "g1")
				w := e.create(widgetsGVR, "Widget", "w1", ref(g, false))
				cm := e.create(cms, "ConfigMap", "cm1", ref(g, false))
				e.delete(gadgetsGVR, "g1", metav1.DeletePropagationBackground)
				e.gone(widgetsGVR, w)
				e.gone(cms, cm)
			}}, {"a custom resource owned by a ConfigMap", func(t *testing.T) {
				cm := e.create(cms, "ConfigMap", "cm2")
				w := e.create(widgetsGVR, "Widget", "w2", ref(cm, true))
				kept := e.create(widgetsGVR, "Widget", "w2-unowned")
				e.delete(cms, "cm2", metav1.DeletePropagationBackground)
				e.gone(widgetsGVR, w)
				if _, err := client.NewUnstructured(c, widgetsGVR, "default").Get(ctx, kept.GetName(), metav1.GetOptions{}); err != nil {
					t.Errorf("a widget without owners: %v", err)
				}
			}}, {"foreground deletion waits for custom dependents", func(t *testing.T) {
				g := e.create(gadgetsGVR, "Gadget", "g3")
				w := e.create(widgetsGVR, "Widget", "w3", ref(g, true))
				e.patch(widgetsGVR, "w3", `{"metadata":{"finalizers":["example.com/hold"]}}`)
				// The owner goes once the collector finds no blocking
				// dependent in its graph: one its informer has not shown
				// yet does not hold it (as in Kubernetes). The test waits
				// until the widget is in the graph.
				eventually(t, "the collector to see the widget", func() (bool, string) {
					v, ok := gc.graph.view(w.GetUID())
					return ok && !v.virtual, "not in the graph"
				})
				e.delete(gadgetsGVR, "g3", metav1.DeletePropagationForeground)
				gadgets := client.NewUnstructured(c, gadgetsGVR, "default")
				eventually(t, "the widget to be deleted, held by its finalizer", func() (bool, string) {
					got, err := client.NewUnstructured(c, widgetsGVR, "default").Get(ctx, "w3", metav1.GetOptions{})
					if err != nil {
						return false, err.Error()
					}
					return got.GetDeletionTimestamp() != nil, "not deleting"
				})
				// The collector deleted the widget, so it has seen the owner
				// go in the foreground; the owner waits for the widget: its
				// foregroundDeletion finalizer stays.
				got, err := gadgets.Get(ctx, "g3", metav1.GetOptions{})
				if err != nil {
					t.Fatalf("the owner went before its blocking dependent: %v", err)
				}
				if !slices.Contains(got.GetFinalizers(), metav1.FinalizerDeleteDependents) {
					t.Errorf("owner finalizers %v", got.GetFinalizers())
				}
				e.patch(widgetsGVR, "w3", `{"metadata":{"finalizers":null}}`)
				e.gone(widgetsGVR, w)
				e.gone(gadgetsGVR, g)
			}}, {"a deleted definition is no longer watched", func(t *testing.T) {
				if err := crds.Delete(ctx, "widgets."+widgetsGVR.Group, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				eventually(t, "the collector to stop watching widgets", func() (bool, string) {
					return !watched(widgetsGVR) && watched(gadgetsGVR), fmt.Sprint(gc.Watched())
				})
				// Gadgets are still collected.
				g := e.create(gadgetsGVR, "Gadget", "g4")
				d := e.create(gadgetsGVR, "Gadget", "g4-dependent", ref(g, false))
				e.delete(gadgetsGVR, "g4", metav1.DeletePropagationBackground)
				e.gone(gadgetsGVR, d)
			}}} {
				e.t = t
				t.Run(tc.name, func(t *testing.T) {
					e.t = t
					tc.run(t)
				})
			}
		})
	}
}

// e2e creates, deletes and waits for objects in namespace default.
type e2e struct {
	t *testing.T
	c *client.Client
}

func (e *e2e) create(gvr schema.GroupVersionResource, kind, name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kind)
	u.SetName(name)
	u.SetOwnerReferences(owners)
	out, err := client.NewUnstructured(e.c, gvr, "default").Create(e.t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *e2e) delete(gvr schema.GroupVersionResource, name string, policy metav1.DeletionPropagation) {
	e.t.Helper()
	if err := client.NewUnstructured(e.c, gvr, "default").Delete(e.t.Context(), name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *e2e) patch(gvr schema.GroupVersionResource, name, patch string) {
	e.t.Helper()
	if _, err := client.NewUnstructured(e.c, gvr, "default").Patch(e.t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// gone waits until obj (that incarnation of it) no longer exists.
func (e *e2e) gone(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
	e.t.Helper()
	eventually(e.t, gvr.Resource+"/"+obj.GetName()+" to be collected", func() (bool, string) {
		got, err := client.NewUnstructured(e.c, gvr, "default").Get(e.t.Context(), obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, ""
		case err != nil:
			return false, err.Error()
		}
		return got.GetUID() != obj.GetUID(), fmt.Sprintf("still there: finalizers %v", got.GetFinalizers())
	})
}

func ref(owner *unstructured.Unstructured, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), BlockOwnerDeletion: &block}
}
