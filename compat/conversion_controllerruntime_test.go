package compat_test

// A kubebuilder project's second API version with a conversion webhook:
// v1 the hub (conversion.Hub), v2 a spoke (conversion.Convertible), the
// conversion served by controller-runtime's webhook server in the test's
// process (its builder registers /convert for a convertible kind) and
// installed by listwatch's envtest (WebhookOptions.Conversions), as
// controller-runtime's envtest does for the convertible kinds of its
// scheme; read and written through controller-runtime's client and cache
// at both versions.

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/listwatch/listwatch/envtest"
)

const gadgetGroup = "conversion.compat.example.com"

// GadgetV1 is the hub version: a gadget's color.
type GadgetV1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GadgetV1Spec `json:"spec"`
}

type GadgetV1Spec struct {
	Color string `json:"color,omitempty"`
}

func (*GadgetV1) Hub() {}

func (g *GadgetV1) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// GadgetV2 is the spoke: the same color, called hue.
type GadgetV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GadgetV2Spec `json:"spec"`
}

type GadgetV2Spec struct {
	Hue string `json:"hue,omitempty"`
}

func (g *GadgetV2) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

func (g *GadgetV2) ConvertTo(dst conversion.Hub) error {
	hub := dst.(*GadgetV1)
	hub.ObjectMeta = g.ObjectMeta
	hub.Spec.Color = g.Spec.Hue
	return nil
}

func (g *GadgetV2) ConvertFrom(src conversion.Hub) error {
	hub := src.(*GadgetV1)
	g.ObjectMeta = hub.ObjectMeta
	g.Spec.Hue = hub.Spec.Color
	return nil
}

// gadgetList is the list of either version.
type gadgetList[T any] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []T `json:"items"`
}

func (l *gadgetList[T]) DeepCopyObject() runtime.Object {
	out := *l
	out.Items = append([]T(nil), l.Items...)
	return &out
}

type (
	GadgetV1List = gadgetList[GadgetV1]
	GadgetV2List = gadgetList[GadgetV2]
)

// gadgetScheme holds client-go's types and both versions of gadgets.
func gadgetScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	v1, v2 := schema.GroupVersion{Group: gadgetGroup, Version: "v1"}, schema.GroupVersion{Group: gadgetGroup, Version: "v2"}
	s.AddKnownTypeWithName(v1.WithKind("Gadget"), &GadgetV1{})
	s.AddKnownTypeWithName(v1.WithKind("GadgetList"), &GadgetV1List{})
	s.AddKnownTypeWithName(v2.WithKind("Gadget"), &GadgetV2{})
	s.AddKnownTypeWithName(v2.WithKind("GadgetList"), &GadgetV2List{})
	metav1.AddToGroupVersion(s, v1)
	metav1.AddToGroupVersion(s, v2)
	return s
}

// gadgetCRD is the definition controller-gen makes of the two versions.
func gadgetCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	schemaOf := func(field string) *apiextensionsv1.CustomResourceValidation {
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {
				Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{field: {Type: "string"}},
			}},
		}}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + gadgetGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gadgetGroup, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gadget", ListKind: "GadgetList", Plural: "gadgets", Singular: "gadget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaOf("color")},
				{Name: "v2", Served: true, Schema: schemaOf("hue")},
			},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestControllerRuntimeConversionWebhook(t *testing.T) {
	crd := gadgetCRD(t)
	env := envtest.Start(t, envtest.Options{
		CRDs:     []*unstructured.Unstructured{crd},
		Webhooks: envtest.WebhookOptions{Conversions: []string{crd.GetName()}},
	})
	scheme := gadgetScheme(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: env.Webhook.Host, Port: env.Webhook.Port, CertDir: env.Webhook.CertDir,
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &GadgetV2{}).Complete(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	check := mgr.GetWebhookServer().StartedChecker()
	for deadline := time.Now().Add(30 * time.Second); check(nil) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the webhook server did not start: %v", check(nil))
		}
	}

	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), &GadgetV1{ObjectMeta: metav1.ObjectMeta{Name: "made-at-v1", Namespace: "default"}, Spec: GadgetV1Spec{Color: "red"}}); err != nil {
		t.Fatal(err)
	}
	made := &GadgetV2{ObjectMeta: metav1.ObjectMeta{Name: "made-at-v2", Namespace: "default"}, Spec: GadgetV2Spec{Hue: "blue"}}
	if err := c.Create(t.Context(), made); err != nil {
		t.Fatal(err)
	}
	if made.Spec.Hue != "blue" || made.ResourceVersion == "" {
		t.Errorf("created at v2: %+v", made)
	}
	var v2 GadgetV2
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "made-at-v1"}, &v2); err != nil || v2.Spec.Hue != "red" {
		t.Errorf("made at v1, read at v2: %+v %v", v2.Spec, err)
	}
	var v1 GadgetV1
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "made-at-v2"}, &v1); err != nil || v1.Spec.Color != "blue" {
		t.Errorf("made at v2, read at v1: %+v %v", v1.Spec, err)
	}
	var list GadgetV2List
	if err := c.List(t.Context(), &list, client.InNamespace("default")); err != nil || len(list.Items) != 2 {
		t.Fatalf("list at v2: %+v %v", list.Items, err)
	}
	for _, g := range list.Items {
		if want := map[string]string{"made-at-v1": "red", "made-at-v2": "blue"}[g.Name]; g.Spec.Hue != want {
			t.Errorf("listed at v2: %s hue %q, want %q", g.Name, g.Spec.Hue, want)
		}
	}

	// The manager's cache (an informer of v2: list, then watch) sees a
	// write at v1 converted.
	v1.Spec.Color = "green"
	if err := c.Update(t.Context(), &v1); err != nil {
		t.Fatal(err)
	}
	cached := mgr.GetCache()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var g GadgetV2
		err := cached.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "made-at-v2"}, &g)
		if err == nil && g.Spec.Hue == "green" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache of v2 holds %+v (%v), want hue green", g.Spec, err)
		}
	}
}
