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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/listwatch/listwatch/envtest"
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
