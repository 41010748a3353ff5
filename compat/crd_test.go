package compat_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// widgetCRD is a namespaced definition of group's widgets: spec.replicas
// an integer from 1 to 10, status.ready, the status subresource.
func widgetCRD(group string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "widgets." + group},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList", "shortNames": []any{"wd"}},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{"type": "object", "properties": map[string]any{
							"replicas": map[string]any{"type": "integer", "minimum": int64(1), "maximum": int64(10)},
						}},
						"status": map[string]any{"type": "object", "properties": map[string]any{
							"ready": map[string]any{"type": "boolean"},
						}},
					},
				}},
				"subresources": map[string]any{"status": map[string]any{}},
			}},
		},
	}}
}

func widget(group, name string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"replicas": replicas},
	}}
}

// createCRD creates def through the API with dyn and waits until it is
// Established and its resource is listed.
func createCRD(t *testing.T, dyn dynamic.Interface, def *unstructured.Unstructured, gvr schema.GroupVersionResource) {
	t.Helper()
	ctx := t.Context()
	if _, err := dyn.Resource(crdGVR).Create(ctx, def, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	eventually(t, "CRD established", func() (bool, string) {
		got, err := dyn.Resource(crdGVR).Get(ctx, def.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				_, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
				return err == nil, fmt.Sprint(err)
			}
		}
		return false, fmt.Sprint(conds)
	})
}

// TestDynamicClientAndInformerOnCRD creates a CustomResourceDefinition
// through the API and drives its custom resources with client-go's dynamic
// client while a dynamic informer follows them: what the schema refuses is
// refused with kube's 422, the status subresource keeps status out of main
// resource updates, and the informer converges on the server's state.
func TestDynamicClientAndInformerOnCRD(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, serverOptions{})
			ctx := t.Context()
			dyn, err := dynamic.NewForConfig(s.restConfig(mediaJSON))
			if err != nil {
				t.Fatal(err)
			}
			group := "compat.example.com"
			gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
			createCRD(t, dyn, widgetCRD(group), gvr)

			factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "default", nil)
			inf := factory.ForResource(gvr).Informer()
			var mu sync.Mutex
			var events []string
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc: func(obj any) {
					mu.Lock()
					events = append(events, "add "+obj.(*unstructured.Unstructured).GetName())
					mu.Unlock()
				},
				UpdateFunc: func(_, obj any) {
					mu.Lock()
					events = append(events, "update "+obj.(*unstructured.Unstructured).GetName())
					mu.Unlock()
				},
				DeleteFunc: func(obj any) {
					name := "?"
					if u, ok := obj.(*unstructured.Unstructured); ok {
						name = u.GetName()
					} else if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
						name = d.Key
					}
					mu.Lock()
					events = append(events, "delete "+name)
					mu.Unlock()
				},
			}); err != nil {
				t.Fatal(err)
			}
			factory.Start(ctx.Done())
			t.Cleanup(factory.Shutdown)
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("dynamic informer did not sync")
			}
			widgets := dyn.Resource(gvr).Namespace("default")

			tests := []struct {
				name string
				do   func(ctx context.Context) error
				// invalid: the write is refused with 422 Invalid naming
				// this field.
				invalid string
				check   func(t *testing.T)
			}{
				{name: "create", do: func(ctx context.Context) error {
					w := widget(group, "w1", 3)
					w.Object["status"] = map[string]any{"ready": true}
					got, err := widgets.Create(ctx, w, metav1.CreateOptions{})
					if err == nil {
						if _, has := got.Object["status"]; has {
							return fmt.Errorf("status kept on create: %v", got.Object["status"])
						}
						if got.GetGeneration() != 1 || got.GetUID() == "" {
							return fmt.Errorf("generation %d uid %q", got.GetGeneration(), got.GetUID())
						}
					}
					return err
				}},
				{name: "create over the maximum", invalid: "spec.replicas", do: func(ctx context.Context) error {
					_, err := widgets.Create(ctx, widget(group, "w2", 11), metav1.CreateOptions{})
					return err
				}},
				{name: "create a second", do: func(ctx context.Context) error {
					_, err := widgets.Create(ctx, widget(group, "w3", 1), metav1.CreateOptions{})
					return err
				}},
				{name: "update spec", do: func(ctx context.Context) error {
					cur, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if err := unstructured.SetNestedField(cur.Object, int64(5), "spec", "replicas"); err != nil {
						return err
					}
					cur.Object["status"] = map[string]any{"ready": true}
					got, err := widgets.Update(ctx, cur, metav1.UpdateOptions{})
					if err == nil {
						if _, has := got.Object["status"]; has || got.GetGeneration() != 2 {
							return fmt.Errorf("main resource update: status %v generation %d; want no status, generation 2", got.Object["status"], got.GetGeneration())
						}
					}
					return err
				}},
				{name: "update spec below the minimum", invalid: "spec.replicas", do: func(ctx context.Context) error {
					cur, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if err := unstructured.SetNestedField(cur.Object, int64(0), "spec", "replicas"); err != nil {
						return err
					}
					_, err = widgets.Update(ctx, cur, metav1.UpdateOptions{})
					return err
				}},
				{name: "update status", do: func(ctx context.Context) error {
					cur, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
					if err != nil {
						return err
					}
					cur.Object["status"] = map[string]any{"ready": true}
					got, err := widgets.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
					if err == nil {
						if ready, _, _ := unstructured.NestedBool(got.Object, "status", "ready"); !ready || got.GetGeneration() != 2 {
							return fmt.Errorf("status update: ready %v generation %d", ready, got.GetGeneration())
						}
					}
					return err
				}},
				{name: "delete", do: func(ctx context.Context) error {
					return widgets.Delete(ctx, "w3", metav1.DeleteOptions{})
				}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					err := tt.do(ctx)
					switch {
					case tt.invalid != "":
						if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.invalid) {
							t.Fatalf("got %v, want 422 Invalid on %s", err, tt.invalid)
						}
					case err != nil:
						t.Fatal(err)
					}
					// The informer holds what the server holds.
					eventually(t, "informer converges", func() (bool, string) {
						list, err := widgets.List(ctx, metav1.ListOptions{})
						if err != nil {
							return false, err.Error()
						}
						want := versions{}
						for _, u := range list.Items {
							want[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
						}
						got := versions{}
						for _, o := range inf.GetStore().List() {
							u := o.(*unstructured.Unstructured)
							got[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
						}
						return want.String() == got.String(), fmt.Sprintf("server %v, informer %v", want, got)
					})
				})
			}
			mu.Lock()
			got := slices.Clone(events)
			mu.Unlock()
			want := []string{"add w1", "add w3", "update w1", "update w1", "delete w3"}
			if !slices.Equal(got, want) {
				t.Errorf("informer events %v, want %v", got, want)
			}

			// Deleting the definition deletes its custom resources; the
			// informer sees them go.
			if err := dyn.Resource(crdGVR).Delete(ctx, "widgets."+group, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "custom resources deleted with their CRD", func() (bool, string) {
				_, err := dyn.Resource(crdGVR).Get(ctx, "widgets."+group, metav1.GetOptions{})
				return apierrors.IsNotFound(err) && len(inf.GetStore().List()) == 0, fmt.Sprintf("CRD: %v; informer holds %d", err, len(inf.GetStore().List()))
			})
		})
	}
}

// TestAggregatedDiscoveryClient has client-go's discovery client read the
// server's resources: it asks for aggregated discovery and, served it,
// needs no request per group version; a CRD created and deleted through
// the API shows in it and goes.
func TestAggregatedDiscoveryClient(t *testing.T) {
	s := startServer(t, backends[0], serverOptions{})
	ctx := t.Context()
	cfg := s.restConfig(mediaJSON)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	group := "disco.example.com"
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}

	// find returns the resource of gv named name in what the discovery
	// client reports.
	find := func(t *testing.T, gv, name string) (metav1.APIResource, bool) {
		t.Helper()
		_, lists, err := dc.ServerGroupsAndResources()
		if err != nil {
			t.Fatalf("ServerGroupsAndResources: %v", err)
		}
		for _, l := range lists {
			if l.GroupVersion != gv {
				continue
			}
			for _, r := range l.APIResources {
				if r.Name == name {
					return r, true
				}
			}
		}
		return metav1.APIResource{}, false
	}
	tests := []struct {
		name   string
		setup  func(t *testing.T)
		gv     string
		res    string
		listed bool
		want   metav1.APIResource
	}{
		{name: "core pods", gv: "v1", res: "pods", listed: true,
			want: metav1.APIResource{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", ShortNames: []string{"po"}, Categories: []string{"all"}}},
		{name: "pod status", gv: "v1", res: "pods/status", listed: true,
			want: metav1.APIResource{Name: "pods/status", SingularName: "pod", Namespaced: true, Kind: "Pod"}},
		{name: "deployment scale", gv: "apps/v1", res: "deployments/scale", listed: true,
			want: metav1.APIResource{Name: "deployments/scale", SingularName: "deployment", Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale"}},
		{name: "CRD before creation", gv: group + "/v1", res: "widgets"},
		{name: "CRD created", gv: group + "/v1", res: "widgets", listed: true,
			setup: func(t *testing.T) { createCRD(t, dyn, widgetCRD(group), gvr) },
			want:  metav1.APIResource{Name: "widgets", SingularName: "widget", Namespaced: true, Group: group, Version: "v1", Kind: "Widget", ShortNames: []string{"wd"}}},
		{name: "CRD deleted", gv: group + "/v1", res: "widgets",
			setup: func(t *testing.T) {
				if err := dyn.Resource(crdGVR).Delete(ctx, "widgets."+group, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				eventually(t, "CRD gone", func() (bool, string) {
					_, err := dyn.Resource(crdGVR).Get(ctx, "widgets."+group, metav1.GetOptions{})
					return apierrors.IsNotFound(err), fmt.Sprint(err)
				})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup(t)
			}
			got, ok := find(t, tt.gv, tt.res)
			if ok != tt.listed {
				t.Fatalf("%s %s listed: %v, want %v", tt.gv, tt.res, ok, tt.listed)
			}
			if !ok {
				return
			}
			if got.Name != tt.want.Name || got.SingularName != tt.want.SingularName || got.Namespaced != tt.want.Namespaced ||
				got.Kind != tt.want.Kind || got.Group != tt.want.Group || got.Version != tt.want.Version ||
				!slices.Equal(got.ShortNames, tt.want.ShortNames) || !slices.Equal(got.Categories, tt.want.Categories) || len(got.Verbs) == 0 {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}

	// Every discovery request was for /api or /apis, asked for aggregated
	// discovery and was answered with it.
	reqs := s.log.matching(func(r *loggedRequest) bool {
		return r.Agent != truthAgent && (r.Path == "/api" || r.Path == "/apis" || strings.HasPrefix(r.Path, "/api/") && !strings.Contains(r.Path[5:], "/") || strings.HasPrefix(r.Path, "/apis/") && strings.Count(r.Path, "/") <= 3)
	})
	if len(reqs) == 0 {
		t.Fatal("no discovery request logged")
	}
	for _, r := range reqs {
		if r.Method != http.MethodGet || (r.Path != "/api" && r.Path != "/apis") {
			t.Errorf("%s %s: a request per group version, aggregated discovery not used", r.Method, r.Path)
			continue
		}
		if r.Status != http.StatusOK || r.ResponseType != discovery.AcceptV2 || !strings.Contains(r.Accept, "g=apidiscovery.k8s.io;v=v2") {
			t.Errorf("%s: Accept %q answered %d %q", r.Path, r.Accept, r.Status, r.ResponseType)
		}
	}
}
