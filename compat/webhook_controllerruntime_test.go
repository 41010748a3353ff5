package compat_test

// A kubebuilder project's defaulting and validating webhooks, served by
// controller-runtime's webhook server in the test's process and installed
// by listwatch's envtest from config/webhook (Options.Webhooks), as the
// kubebuilder book's webhook suite tests them with controller-runtime's
// envtest (WebhookInstallOptions).

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/listwatch/listwatch/envtest"
)

// configMapWebhook defaults the label defaulted=true and refuses the key
// "forbidden" and the deletion of configmaps labelled keep=true.
type configMapWebhook struct{}

func (configMapWebhook) Default(_ context.Context, cm *corev1.ConfigMap) error {
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels["defaulted"] = "true"
	return nil
}

func (configMapWebhook) ValidateCreate(_ context.Context, cm *corev1.ConfigMap) (admission.Warnings, error) {
	if _, ok := cm.Data["forbidden"]; ok {
		return nil, errors.New("the key forbidden is refused")
	}
	return admission.Warnings{"created through the webhook"}, nil
}

func (w configMapWebhook) ValidateUpdate(ctx context.Context, _, cm *corev1.ConfigMap) (admission.Warnings, error) {
	return w.ValidateCreate(ctx, cm)
}

func (configMapWebhook) ValidateDelete(_ context.Context, cm *corev1.ConfigMap) (admission.Warnings, error) {
	if cm.Labels["keep"] == "true" {
		return nil, errors.New("this configmap is kept")
	}
	return nil, nil
}

// warningLog keeps the Warning headers a client receives.
type warningLog struct{ texts chan string }

func (w warningLog) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.texts <- text
}

func TestControllerRuntimeWebhooksOnEnvtest(t *testing.T) {
	env := envtest.Start(t, envtest.Options{Webhooks: envtest.WebhookOptions{Paths: []string{"testdata/webhook"}}})
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  scheme.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: env.Webhook.Host, Port: env.Webhook.Port, CertDir: env.Webhook.CertDir,
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	hooks := configMapWebhook{}
	if err := ctrl.NewWebhookManagedBy(mgr, &corev1.ConfigMap{}).WithDefaulter(hooks).WithValidator(hooks).Complete(); err != nil {
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
	// As the kubebuilder suite does: wait until the webhook server
	// answers before writing.
	check := mgr.GetWebhookServer().StartedChecker()
	for deadline := time.Now().Add(30 * time.Second); check(nil) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the webhook server did not start: %v", check(nil))
		}
	}

	cfg := rest.CopyConfig(env.Config)
	warned := warningLog{texts: make(chan string, 10)}
	cfg.WarningHandlerWithContext = warned
	cs := kubernetes.NewForConfigOrDie(cfg)
	cms := cs.CoreV1().ConfigMaps("default")
	labels := map[string]string{"envtest": "webhook", "keep": "true"}
	got, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Labels: labels}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["defaulted"] != "true" {
		t.Errorf("labels %v: not defaulted by the webhook", got.Labels)
	}
	select {
	case w := <-warned.texts:
		if w != "created through the webhook" {
			t.Errorf("warning %q", w)
		}
	default:
		t.Error("no warning from the validating webhook")
	}
	tests := []struct {
		name string
		do   func() error
		code int32
		msg  string
	}{
		{"create refused", func() error {
			_, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "refused", Labels: labels}, Data: map[string]string{"forbidden": "x"}}, metav1.CreateOptions{})
			return err
		}, http.StatusForbidden, `admission webhook "vconfigmap.kb.io" denied the request: the key forbidden is refused`},
		{"delete refused", func() error {
			return cms.Delete(t.Context(), "kept", metav1.DeleteOptions{})
		}, http.StatusForbidden, `admission webhook "vconfigmap.kb.io" denied the request: this configmap is kept`},
	}
	for _, tt := range tests {
		err := tt.do()
		var status apierrors.APIStatus
		if !errors.As(err, &status) || status.Status().Code != tt.code || status.Status().Message != tt.msg {
			t.Errorf("%s: %v, want %d %q", tt.name, err, tt.code, tt.msg)
		}
	}
}
