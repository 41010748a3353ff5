package envtest_test

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/listwatch/listwatch/envtest"
	"github.com/listwatch/listwatch/internal/webhookserver"
)

// serveWebhooks runs, until the test ends, a webhook server as a
// kubebuilder project's manager runs one: on the host and port of
// env.Webhook with the certificate in its CertDir. It defaults the label
// defaulted=true on configmaps and refuses those holding the key
// "forbidden".
func serveWebhooks(t *testing.T, s *envtest.WebhookServing) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(s.CertDir, envtest.WebhookCertFile), filepath.Join(s.CertDir, envtest.WebhookKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	review := func(w http.ResponseWriter, r *http.Request, decide func(cm *corev1.ConfigMap, resp *admissionv1.AdmissionResponse)) {
		in := &admissionv1.AdmissionReview{}
		cm := &corev1.ConfigMap{}
		if err := json.NewDecoder(r.Body).Decode(in); err != nil || in.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		if err := json.Unmarshal(in.Request.Object.Raw, cm); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: in.Request.UID, Allowed: true}
		decide(cm, resp)
		_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{TypeMeta: in.TypeMeta, Response: resp})
	}
	mux := http.NewServeMux()
	// A CRD conversion webhook, as controller-runtime's at /convert
	// (webhookserver.ConvertObject's versions: spec.color at v1,
	// spec.hue at v2).
	mux.HandleFunc(envtest.ConvertPath, func(w http.ResponseWriter, r *http.Request) {
		in := &apiextensionsv1.ConversionReview{}
		if err := json.NewDecoder(r.Body).Decode(in); err != nil || in.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		resp := &apiextensionsv1.ConversionResponse{UID: in.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		for _, obj := range in.Request.Objects {
			out, err := webhookserver.ConvertObject(obj.Raw, in.Request.DesiredAPIVersion)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
		}
		_ = json.NewEncoder(w).Encode(apiextensionsv1.ConversionReview{TypeMeta: in.TypeMeta, Response: resp})
	})
	mux.HandleFunc("/mutate--v1-configmap", func(w http.ResponseWriter, r *http.Request) {
		review(w, r, func(_ *corev1.ConfigMap, resp *admissionv1.AdmissionResponse) {
			pt := admissionv1.PatchTypeJSONPatch
			resp.PatchType, resp.Patch = &pt, []byte(`[{"op":"add","path":"/metadata/labels/defaulted","value":"true"}]`)
		})
	})
	mux.HandleFunc("/validate--v1-configmap", func(w http.ResponseWriter, r *http.Request) {
		review(w, r, func(cm *corev1.ConfigMap, resp *admissionv1.AdmissionResponse) {
			if _, bad := cm.Data["forbidden"]; bad {
				resp.Allowed, resp.Result = false, &metav1.Status{Message: "forbidden data"}
			}
		})
	})
	srv := &http.Server{Handler: mux}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	})
}

// TestWebhooks installs a kubebuilder project's webhook configurations
// from a path, runs their webhook server in the test's process with the
// certificate envtest made, and writes through them.
func TestWebhooks(t *testing.T) {
	env := envtest.Start(t, envtest.Options{Webhooks: envtest.WebhookOptions{Paths: []string{"testdata/webhook"}}})
	if env.Webhook == nil {
		t.Fatal("no webhook serving")
	}
	serveWebhooks(t, env.Webhook)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	labels := map[string]string{"envtest": "webhook"}
	got, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "defaulted", Labels: labels}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["defaulted"] != "true" {
		t.Errorf("labels %v: the mutating webhook did not default", got.Labels)
	}
	_, err = cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "refused", Labels: labels}, Data: map[string]string{"forbidden": "x"},
	}, metav1.CreateOptions{})
	const want = `admission webhook "vconfigmap.kb.io" denied the request: forbidden data`
	if s, ok := err.(apierrors.APIStatus); !ok || s.Status().Code != http.StatusBadRequest || s.Status().Message != want {
		t.Errorf("create of forbidden data: %v, want 400 %q", err, want)
	}
	// Configmaps the webhooks do not select are not sent to them.
	plain, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create of an unselected configmap: %v", err)
	}
	if plain.Labels["defaulted"] != "" {
		t.Errorf("unselected configmap's labels %v: the webhook was called", plain.Labels)
	}
}

// gizmoCRD is a definition of group's gizmos, v1 (storage, spec.color)
// and v2 (spec.hue), whose conversion is conv.
func gizmoCRD(t *testing.T, group string, conv *apiextensionsv1.CustomResourceConversion) *unstructured.Unstructured {
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
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped, Conversion: conv,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gizmo", Plural: "gizmos", ListKind: "GizmoList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaOf(webhookserver.V1Field)},
				{Name: "v2", Served: true, Schema: schemaOf(webhookserver.V2Field)},
			},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// TestConversionWebhooks has envtest point CRDs' conversion at the test's
// webhook server: one named in Conversions (as controller-runtime's
// envtest does for convertible kinds), one asking for a webhook by a
// Service reference; objects written at v1 read at v2 through it.
func TestConversionWebhooks(t *testing.T) {
	port := int32(443)
	path := envtest.ConvertPath
	byService := &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
				Namespace: "system", Name: "webhook-service", Path: &path, Port: &port,
			}},
		},
	}
	named := gizmoCRD(t, "named.envtest.example.com", nil)
	env := envtest.Start(t, envtest.Options{
		CRDs:     []*unstructured.Unstructured{named, gizmoCRD(t, "service.envtest.example.com", byService)},
		Webhooks: envtest.WebhookOptions{Conversions: []string{named.GetName()}},
	})
	if _, found, _ := unstructured.NestedMap(named.Object, "spec", "conversion"); found {
		t.Error("Start changed the definition it was given")
	}
	serveWebhooks(t, env.Webhook)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, group := range []string{"named.envtest.example.com", "service.envtest.example.com"} {
		t.Run(group, func(t *testing.T) {
			v1 := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gizmos"}).Namespace("default")
			v2 := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v2", Resource: "gizmos"}).Namespace("default")
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": group + "/v1", "kind": "Gizmo",
				"metadata": map[string]any{"name": "a"}, "spec": map[string]any{webhookserver.V1Field: "red"},
			}}
			if _, err := v1.Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := v2.Get(t.Context(), "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if hue, _, _ := unstructured.NestedString(got.Object, "spec", webhookserver.V2Field); hue != "red" || got.GetAPIVersion() != group+"/v2" {
				t.Errorf("read at v2: %v", got.Object)
			}
		})
	}
}
