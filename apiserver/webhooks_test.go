package apiserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/listwatch/listwatch/internal/webhookserver"
	"github.com/listwatch/listwatch/storage/memory"
)

// warnings collects the Warning headers a client-go client receives.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// webhookEnv is a server, a webhook server beside it and a client-go
// client of the server that keeps the warnings it is sent.
type webhookEnv struct {
	srv    *Server
	c      kubernetes.Interface
	warned *warnings
	hook   *webhookserver.Server
	// hostHook is the same webhook on an address of the host, reached
	// through the Service hooks/webhook; nil when the host has none.
	hostHook *webhookserver.Server
}

func startWebhookEnv(t *testing.T) *webhookEnv {
	t.Helper()
	srv, _ := startServer(t, memory.New(), Config{DisableAdmissionPlugins: []string{"ServiceAccount"}})
	hook, err := webhookserver.Start(t.TempDir(), "webhook.hooks.svc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hook.Close)
	cfg := srv.LoopbackConfig()
	w := &warnings{}
	cfg.WarningHandlerWithContext = w
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &webhookEnv{srv: srv, c: c, warned: w, hook: hook}
	if ip, ok := webhookserver.HostAddress(); ok {
		if e.hostHook, err = webhookserver.StartAt(ip+":0", t.TempDir(), "webhook.hooks.svc"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.hostHook.Close)
		e.serviceToHook(t, ip)
	}
	return e
}

// serviceToHook makes the Service hooks/webhook, with a manually managed
// EndpointSlice to the webhook server at ip, an address of the host: how a
// webhook running on the host is reached through a Service reference
// (kube refuses an endpoint on 127.0.0.1).
func (e *webhookEnv) serviceToHook(t *testing.T, ip string) {
	t.Helper()
	ctx := t.Context()
	if _, err := e.c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hooks"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(e.hostHook.Port()))}}},
	}
	if _, err := e.c.CoreV1().Services("hooks").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name, port, ready := "https", int32(e.hostHook.Port()), true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "webhook-host", Labels: map[string]string{discoveryv1.LabelServiceName: "webhook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}
	if _, err := e.c.DiscoveryV1().EndpointSlices("hooks").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// hookOptions shape a webhook of a test.
type hookOptions struct {
	path          string
	url           string // instead of the server's path
	service       bool   // through the Service hooks/webhook, not a URL
	failurePolicy admissionregistrationv1.FailurePolicyType
	sideEffects   admissionregistrationv1.SideEffectClass
	timeout       int32
}

// onlyNamespace selects the objects of namespace ns, so that a test's
// webhooks see none of another's.
func onlyNamespace(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
}

func (e *webhookEnv) clientConfig(o hookOptions) admissionregistrationv1.WebhookClientConfig {
	if o.service {
		port := int32(443)
		return admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Namespace: "hooks", Name: "webhook", Path: &o.path, Port: &port},
			CABundle: e.hostHook.CABundle,
		}
	}
	u := o.url
	if u == "" {
		u = e.hook.URL + o.path
	}
	return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: e.hook.CABundle}
}

var configMapRule = []admissionregistrationv1.RuleWithOperations{{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
}}

// validating installs a validating webhook on the configmaps of ns.
func (e *webhookEnv) validating(t *testing.T, ns, name string, o hookOptions) {
	t.Helper()
	se := cmpOr(o.sideEffects, admissionregistrationv1.SideEffectClassNone)
	fp := cmpOr(o.failurePolicy, admissionregistrationv1.Fail)
	var timeout *int32
	if o.timeout != 0 {
		timeout = &o.timeout
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: name, ClientConfig: e.clientConfig(o), Rules: configMapRule,
			SideEffects: &se, FailurePolicy: &fp, TimeoutSeconds: timeout,
			AdmissionReviewVersions: []string{"v1"}, NamespaceSelector: onlyNamespace(ns),
		}},
	}
	if _, err := e.c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// mutating installs a mutating webhook on the configmaps of ns.
func (e *webhookEnv) mutating(t *testing.T, ns, name string, o hookOptions) {
	t.Helper()
	se := cmpOr(o.sideEffects, admissionregistrationv1.SideEffectClassNone)
	fp := cmpOr(o.failurePolicy, admissionregistrationv1.Fail)
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: name, ClientConfig: e.clientConfig(o), Rules: configMapRule,
			SideEffects: &se, FailurePolicy: &fp,
			AdmissionReviewVersions: []string{"v1"}, NamespaceSelector: onlyNamespace(ns),
		}},
	}
	if _, err := e.c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(t.Context(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

// TestWebhooks calls kube's webhook plugins through a real server against
// a real webhook server, and checks kube's answers.
func TestWebhooks(t *testing.T) {
	e := startWebhookEnv(t)
	unreachable, err := webhookserver.Unreachable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		mutating bool
		hook     hookOptions
		dryRun   bool
		// wantCode is the status of the create (0: created); wantMessage
		// its message, or its start when it ends with "…".
		wantCode     int32
		wantMessage  string
		wantWarnings []string
		wantLabel    string
	}{
		{name: "allow", hook: hookOptions{path: "/allow"}},
		{name: "service-allow", hook: hookOptions{path: "/allow", service: true}},
		{name: "service-deny", hook: hookOptions{path: "/deny", service: true}, wantCode: 400,
			wantMessage: `admission webhook "service-deny.test.example.com" denied the request: ` + webhookserver.DenyMessage},
		{name: "service-patch", mutating: true, hook: hookOptions{path: "/patch", service: true}, wantLabel: webhookserver.PatchValue},
		{name: "deny", hook: hookOptions{path: "/deny"}, wantCode: 400,
			wantMessage: `admission webhook "deny.test.example.com" denied the request: ` + webhookserver.DenyMessage},
		{name: "deny-409", hook: hookOptions{path: "/deny-409"}, wantCode: 409,
			wantMessage: `admission webhook "deny-409.test.example.com" denied the request: ` + webhookserver.DenyMessage},
		{name: "warn", hook: hookOptions{path: "/warn"},
			wantWarnings: []string{webhookserver.Warning1, webhookserver.Warning2}},
		{name: "patch", mutating: true, hook: hookOptions{path: "/patch"}, wantLabel: webhookserver.PatchValue},
		{name: "unreachable-ignore", hook: hookOptions{url: unreachable, failurePolicy: admissionregistrationv1.Ignore}},
		{name: "unreachable-fail", hook: hookOptions{url: unreachable}, wantCode: 500,
			wantMessage: `Internal error occurred: failed calling webhook "unreachable-fail.test.example.com": failed to call webhook: Post "` + unreachable + `?timeout=10s": dial tcp …`},
		{name: "slow-fail", hook: hookOptions{path: "/slow", timeout: 1}, wantCode: 500,
			wantMessage: `Internal error occurred: failed calling webhook "slow-fail.test.example.com": failed to call webhook: Post "` + e.hook.URL + `/slow?timeout=1s": context deadline exceeded`},
		{name: "slow-ignore", hook: hookOptions{path: "/slow", timeout: 1, failurePolicy: admissionregistrationv1.Ignore}},
		{name: "crash", hook: hookOptions{path: "/crash"}, wantCode: 500,
			wantMessage: `Internal error occurred: failed calling webhook "crash.test.example.com": failed to call webhook: Post "` + e.hook.URL + `/crash?timeout=10s": …`},
		{name: "garbage", hook: hookOptions{path: "/garbage"}, wantCode: 500,
			wantMessage: `Internal error occurred: failed calling webhook "garbage.test.example.com": failed to call webhook: …`},
		{name: "wrong-uid", hook: hookOptions{path: "/wrong-uid"}, wantCode: 500,
			wantMessage: `Internal error occurred: failed calling webhook "wrong-uid.test.example.com": received invalid webhook response: expected response.uid=…`},
		{name: "status-500", hook: hookOptions{path: "/status-500"}, wantCode: 500,
			wantMessage: `Internal error occurred: failed calling webhook "status-500.test.example.com": failed to call webhook: an error on the server ("the test webhook failed") has prevented the request from succeeding`},
		{name: "dry-run-side-effects", hook: hookOptions{path: "/allow", sideEffects: admissionregistrationv1.SideEffectClassNoneOnDryRun}, dryRun: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.hook.service && e.hostHook == nil {
				t.Skip("the host has no address but loopback, which an EndpointSlice may not name")
			}
			ns := "hooks-" + tt.name
			if _, err := e.c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			name := tt.name + ".test.example.com"
			if tt.mutating {
				e.mutating(t, ns, name, tt.hook)
			} else {
				e.validating(t, ns, name, tt.hook)
			}
			e.warned.take()
			var opts metav1.CreateOptions
			if tt.dryRun {
				opts.DryRun = []string{metav1.DryRunAll}
			}
			// A webhook that never answers is given up at its timeout:
			// the create is answered by the server long before the
			// test's own deadline.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			got, err := e.c.CoreV1().ConfigMaps(ns).Create(ctx, configMap("cm"), opts)
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("create: %v", err)
				}
			} else {
				status, ok := err.(apierrors.APIStatus)
				if !ok {
					t.Fatalf("create: %v, want a %d", err, tt.wantCode)
				}
				s := status.Status()
				if s.Code != tt.wantCode || !messageMatches(s.Message, tt.wantMessage) {
					t.Fatalf("create: %d %q, want %d %q", s.Code, s.Message, tt.wantCode, tt.wantMessage)
				}
			}
			if w := e.warned.take(); fmt.Sprint(w) != fmt.Sprint(tt.wantWarnings) {
				t.Errorf("warnings %q, want %q", w, tt.wantWarnings)
			}
			if tt.wantLabel != "" && got.Labels[webhookserver.PatchLabel] != tt.wantLabel {
				t.Errorf("labels %v, want %s=%s", got.Labels, webhookserver.PatchLabel, tt.wantLabel)
			}
		})
	}
}

// messageMatches reports whether got is want, or starts with want's text
// before a final "…".
func messageMatches(got, want string) bool {
	if prefix, ok := strings.CutSuffix(want, "…"); ok {
		return strings.HasPrefix(got, prefix)
	}
	return got == want
}

// TestWebhookConfigurationChanges changes a webhook configuration back and
// forth between a denying and an allowing webhook, and deletes it: each
// write after a change is admitted by the configuration as changed, never
// by the one before (the webhook plugins have taken the change before
// the write's admission runs).
func TestWebhookConfigurationChanges(t *testing.T) {
	e := startWebhookEnv(t)
	ctx := t.Context()
	const ns = "changes"
	if _, err := e.c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.validating(t, ns, "change.test.example.com", hookOptions{path: "/allow"})
	configs := e.c.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	name := ns + "-change.test.example.com"
	for i := range 21 {
		deny := i%2 == 0
		cfg, err := configs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u := e.hook.URL + "/allow"
		if deny {
			u = e.hook.URL + "/deny"
		}
		cfg.Webhooks[0].ClientConfig.URL = &u
		if _, err := configs.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = e.c.CoreV1().ConfigMaps(ns).Create(ctx, configMap(fmt.Sprintf("cm-%d", i)), metav1.CreateOptions{})
		if denied := apierrors.IsBadRequest(err); denied != deny || (err != nil && !denied) {
			t.Fatalf("write %d after the webhook became %s: %v", i, u, err)
		}
	}
	if err := configs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The last change made the webhook deny; once deleted, nothing does.
	if _, err := e.c.CoreV1().ConfigMaps(ns).Create(ctx, configMap("after-delete"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("write after the configuration was deleted: %v", err)
	}
}
