package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/internal/webhookserver"
)

// conversionCRD is a definition of gizmos in group whose v1 (the storage
// version) has spec.color and v2 spec.hue, converted by the webhook at
// cc (webhookserver's /convert).
func conversionCRD(group string, cc apiextensionsv1.WebhookClientConfig) *apiextensionsv1.CustomResourceDefinition {
	props := func(field string) *apiextensionsv1.CustomResourceValidation {
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {
				Type:       "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{field: {Type: "string"}},
			}},
		}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gizmo", Plural: "gizmos", ListKind: "GizmoList"},
			Conversion: &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook:  &apiextensionsv1.WebhookConversion{ClientConfig: &cc, ConversionReviewVersions: []string{"v1"}},
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: props(webhookserver.V1Field)},
				{Name: "v2", Served: true, Schema: props(webhookserver.V2Field)},
			},
		},
	}
}

func gizmo(group, version, name, field, value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/" + version, "kind": "Gizmo",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{field: value},
	}}
}

// TestConversionWebhook serves a definition converted by a real webhook,
// reached by URL and through a Service, and checks that every path kube
// converts on converts: writes at v2 stored at v1, gets, lists and
// watches at the other version, the watch cache's answers included (a
// stored value that looks like a served one too), each version's cache
// converting an object once, not once per list.
func TestConversionWebhook(t *testing.T) {
	e := startWebhookEnv(t)
	dyn, err := dynamic.NewForConfig(e.srv.LoopbackConfig())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		hook  *webhookserver.Server
		cc    func(path string) apiextensionsv1.WebhookClientConfig
		group string
	}{
		{"url", e.hook, func(path string) apiextensionsv1.WebhookClientConfig {
			u := e.hook.URL + path
			return apiextensionsv1.WebhookClientConfig{URL: &u, CABundle: e.hook.CABundle}
		}, "url.conversion.example.com"},
		{"service", e.hostHook, func(path string) apiextensionsv1.WebhookClientConfig {
			port := int32(443)
			return apiextensionsv1.WebhookClientConfig{
				Service:  &apiextensionsv1.ServiceReference{Namespace: "hooks", Name: "webhook", Path: &path, Port: &port},
				CABundle: e.hostHook.CABundle,
			}
		}, "service.conversion.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.hook == nil {
				t.Skip("the host has no address but loopback for an EndpointSlice")
			}
			ctx := t.Context()
			path := webhookserver.ConvertPath + "/" + tt.name
			crd, err := runtime.DefaultUnstructuredConverter.ToUnstructured(conversionCRD(tt.group, tt.cc(path)))
			if err != nil {
				t.Fatal(err)
			}
			crds := dyn.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
			if _, err := crds.Create(ctx, &unstructured.Unstructured{Object: crd}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			v1 := dyn.Resource(schema.GroupVersionResource{Group: tt.group, Version: "v1", Resource: "gizmos"}).Namespace("default")
			v2 := dyn.Resource(schema.GroupVersionResource{Group: tt.group, Version: "v2", Resource: "gizmos"}).Namespace("default")
			deadline := time.Now().Add(30 * time.Second)
			for _, err := v2.List(ctx, metav1.ListOptions{}); err != nil; _, err = v2.List(ctx, metav1.ListOptions{}) {
				if time.Now().After(deadline) {
					t.Fatalf("v2 not served: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			spec := func(u *unstructured.Unstructured, field string) string {
				t.Helper()
				v, _, _ := unstructured.NestedString(u.Object, "spec", field)
				return v
			}

			if _, err := v1.Create(ctx, gizmo(tt.group, "v1", "a", webhookserver.V1Field, "red"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := v2.Get(ctx, "a", metav1.GetOptions{})
			if err != nil || spec(got, webhookserver.V2Field) != "red" || got.GetAPIVersion() != tt.group+"/v2" {
				t.Fatalf("get a at v2: %v %v", got, err)
			}
			made, err := v2.Create(ctx, gizmo(tt.group, "v2", "b", webhookserver.V2Field, "blue"), metav1.CreateOptions{})
			if err != nil || spec(made, webhookserver.V2Field) != "blue" || made.GetAPIVersion() != tt.group+"/v2" {
				t.Fatalf("create b at v2: %v %v", made, err)
			}
			if got, err := v1.Get(ctx, "b", metav1.GetOptions{}); err != nil || spec(got, webhookserver.V1Field) != "blue" {
				t.Fatalf("get b at v1: %v %v", got, err)
			}
			// Stored at the storage version, as kube keeps it.
			key := registry.StorageKey(tt.group, "gizmos", "default", "b")
			kv, err := e.srv.cfg.Storage.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			var stored map[string]any
			if err := json.Unmarshal(kv.Value, &stored); err != nil {
				t.Fatal(err)
			}
			if stored["apiVersion"] != tt.group+"/v1" || stored["spec"].(map[string]any)[webhookserver.V1Field] != "blue" {
				t.Fatalf("b stored as %s", kv.Value)
			}

			// Both objects are in v2's cache once a consistent list
			// answers; that list and the next call the webhook no more:
			// the cache converted each object once, when it took it in.
			if _, err := v2.List(ctx, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			calls := len(tt.hook.Requests(path))
			list, err := v2.List(ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) != 2 {
				t.Fatalf("list at v2: %v %v", list, err)
			}
			for _, it := range list.Items {
				if it.GetAPIVersion() != tt.group+"/v2" || spec(&it, webhookserver.V2Field) == "" {
					t.Errorf("listed at v2: %v", it.Object)
				}
			}
			if _, err := v2.List(ctx, metav1.ListOptions{ResourceVersion: "0"}); err != nil {
				t.Fatal(err)
			}
			rc := e.c.CoreV1().RESTClient()
			tab, err := rc.Get().AbsPath("/apis/"+tt.group+"/v2/namespaces/default/gizmos").
				SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
			if err != nil || !strings.Contains(string(tab), `"kind":"Table"`) {
				t.Fatalf("table at v2: %s %v", tab, err)
			}
			if n := len(tt.hook.Requests(path)) - calls; n != 0 {
				t.Errorf("lists at v2 (objects, a Table) from the watch cache called the webhook %d times", n)
			}

			w, err := v2.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			next := func(typ watch.EventType, name, hue string) {
				t.Helper()
				select {
				case ev := <-w.ResultChan():
					u, ok := ev.Object.(*unstructured.Unstructured)
					if !ok || ev.Type != typ || u.GetName() != name || u.GetAPIVersion() != tt.group+"/v2" || spec(u, webhookserver.V2Field) != hue {
						t.Fatalf("watch at v2: %s %#v, want %s %s hue %s", ev.Type, ev.Object, typ, name, hue)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("watch at v2: no %s of %s", typ, name)
				}
			}
			a, err := v1.Get(ctx, "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := unstructured.SetNestedField(a.Object, "green", "spec", webhookserver.V1Field); err != nil {
				t.Fatal(err)
			}
			if _, err := v1.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			next(watch.Modified, "a", "green")

			// A value another writer stored at v1 with a resourceVersion
			// in its metadata, laid out as a served object is: the v2
			// cache serves it converted, not as stored.
			foreign := `{"apiVersion":"` + tt.group + `/v1","kind":"Gizmo","metadata":{"name":"c","namespace":"default","resourceVersion":"1","uid":"00000000-0000-0000-0000-00000000000c","creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"color":"black"}}`
			if _, err := e.srv.cfg.Storage.Create(ctx, registry.StorageKey(tt.group, "gizmos", "default", "c"), []byte(foreign)); err != nil {
				t.Fatal(err)
			}
			next(watch.Added, "c", "black")
			list, err = v2.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=c"})
			if err != nil || len(list.Items) != 1 || spec(&list.Items[0], webhookserver.V2Field) != "black" || list.Items[0].GetAPIVersion() != tt.group+"/v2" {
				t.Fatalf("list c at v2: %v %v", list, err)
			}
		})
	}
}

// TestConversionWebhookFailing stores an object at v1 of a definition
// whose webhook refuses every conversion and reads v2 as kube-apiserver
// answers while its watch cache of v2 stays before that object: a
// consistent list reads storage and fails (StorageReadError), a list at
// resourceVersion 0 is the cache's, without it, and a watch from now
// waits for the cache and fails with 504 Too large resource version;
// v1 is unaffected, and v2 is served again once the object is gone.
func TestConversionWebhookFailing(t *testing.T) {
	e := startWebhookEnv(t)
	dyn, err := dynamic.NewForConfig(e.srv.LoopbackConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const group = "failing.conversion.example.com"
	u := e.hook.URL + webhookserver.ConvertFailPath + "/failing"
	crd, err := runtime.DefaultUnstructuredConverter.ToUnstructured(conversionCRD(group, apiextensionsv1.WebhookClientConfig{URL: &u, CABundle: e.hook.CABundle}))
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
	if _, err := crds.Create(ctx, &unstructured.Unstructured{Object: crd}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v1 := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gizmos"}).Namespace("default")
	v2 := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v2", Resource: "gizmos"}).Namespace("default")
	deadline := time.Now().Add(30 * time.Second)
	for _, err := v2.List(ctx, metav1.ListOptions{}); err != nil; _, err = v2.List(ctx, metav1.ListOptions{}) {
		if time.Now().After(deadline) {
			t.Fatalf("v2 not served: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := v1.Create(ctx, gizmo(group, "v1", "a", webhookserver.V1Field, "red"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	// firstEvent is the first event of a watch at version r from now, or
	// none when the watch ends empty.
	firstEvent := func(r dynamic.ResourceInterface) (watch.Event, bool) {
		t.Helper()
		w, err := r.Watch(ctx, metav1.ListOptions{TimeoutSeconds: &one})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ev, ok := <-w.ResultChan()
		return ev, ok
	}

	if _, err := v2.List(ctx, metav1.ListOptions{}); apierrors.ReasonForError(err) != "StorageReadError" {
		t.Errorf("consistent list at v2: %v, want 500 StorageReadError", err)
	}
	if list, err := v2.List(ctx, metav1.ListOptions{ResourceVersion: "0"}); err != nil || len(list.Items) != 0 {
		t.Errorf("list at v2 from resourceVersion 0: %v %v, want the cache's, empty", list, err)
	}
	ev, ok := firstEvent(v2)
	st, isStatus := ev.Object.(*metav1.Status)
	if !ok || ev.Type != watch.Error || !isStatus || st.Code != http.StatusGatewayTimeout || st.Details == nil ||
		len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge {
		t.Errorf("watch at v2 from now: %v %s %#v, want an ERROR 504 Too large resource version", ok, ev.Type, ev.Object)
	}
	if ev, ok := firstEvent(v1); !ok || ev.Type != watch.Added {
		t.Errorf("watch at v1 from now: %v %s %#v, want the object ADDED", ok, ev.Type, ev.Object)
	}

	if err := v1.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if list, err := v2.List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("consistent list at v2 once the object is gone: %v %v", list, err)
	}
	if ev, ok := firstEvent(v2); ok {
		t.Errorf("watch at v2 from now once the object is gone: %s %#v, want none", ev.Type, ev.Object)
	}
}
