package client

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/storage/memory"
)

// Widget is a custom resource's Go type as a user writes it, with no code
// generation: TypeMeta and ObjectMeta embedded, the spec and status of the
// CRD's schema, and a DeepCopyObject by hand.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec   `json:"spec"`
	Status            WidgetStatus `json:"status,omitempty"`
}

type WidgetSpec struct {
	Replicas int32  `json:"replicas"`
	Color    string `json:"color,omitempty"`
}

type WidgetStatus struct {
	Ready bool `json:"ready,omitempty"`
}

func (w *Widget) DeepCopyObject() runtime.Object {
	cp := *w
	w.ObjectMeta.DeepCopyInto(&cp.ObjectMeta)
	return &cp
}

var widgetGVR = schema.GroupVersionResource{Group: "typed.example.com", Version: "v1", Resource: "widgets"}

// installWidgets creates the widgets' CRD and waits until they are served.
func installWidgets(t *testing.T, c *Client) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.typed.example.com"},
		"spec": map[string]any{
			"group": "typed.example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": map[string]any{
						"replicas": map[string]any{"type": "integer", "minimum": int64(1)},
						"color":    map[string]any{"type": "string"},
					}},
					"status": map[string]any{"type": "object", "properties": map[string]any{"ready": map[string]any{"type": "boolean"}}},
				}}},
				"subresources": map[string]any{"status": map[string]any{}},
			}},
		},
	}}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := NewUnstructured(c, crdGVR, "").Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "widgets served", func() bool {
		_, err := NewResource[*Widget](c, widgetGVR, "default").List(t.Context(), metav1.ListOptions{})
		return err == nil
	})
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTypedCustomResource reads and writes a custom resource as a Go struct
// of the user's, through the client and through an informer of the
// factory: no unstructured maps, no conversion, no code generation.
func TestTypedCustomResource(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	a := startRealAPI(t, st, apiserver.WatchCacheConfig{})
	c := a.client(t, false, false)
	installWidgets(t, c)

	ctx, cancel := context.WithCancel(t.Context())
	factory := informers.NewSharedInformerFactory(c, informers.Options{})
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	widgets := informers.InformerFor[*Widget](factory, widgetGVR)
	factory.Start(ctx)
	if synced := factory.WaitForCacheSync(ctx); !synced[widgetGVR] {
		t.Fatalf("widgets' informer did not sync: %v", synced)
	}

	res := NewResource[*Widget](c, widgetGVR, "default")
	created, err := res.Create(ctx, &Widget{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Spec: WidgetSpec{Replicas: 3, Color: "blue"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.Kind != "Widget" || created.APIVersion != "typed.example.com/v1" || created.Spec.Replicas != 3 {
		t.Fatalf("created %+v", created)
	}
	// The schema's rules hold for typed writes too.
	if _, err := res.Create(ctx, &Widget{ObjectMeta: metav1.ObjectMeta{Name: "w0"}, Spec: WidgetSpec{Replicas: 0}}, metav1.CreateOptions{}); err == nil {
		t.Fatal("a widget with 0 replicas was created; the schema's minimum is 1")
	}

	waitFor(t, "the informer has w1", func() bool {
		w, err := widgets.Lister().Namespace("default").Get("w1")
		return err == nil && w.Spec.Color == "blue"
	})

	created.Status.Ready = true
	if _, err := res.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the informer has w1 ready", func() bool {
		w, err := widgets.Lister().Namespace("default").Get("w1")
		return err == nil && w.Status.Ready && w.Spec.Replicas == 3
	})
	got, err := res.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil || !got.Status.Ready {
		t.Fatalf("get w1: %+v, %v", got, err)
	}
}
