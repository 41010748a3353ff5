package apiserver

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"

	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/internal/webhookserver"
	"github.com/listwatch/listwatch/storage/memory"
)

// readingPlugins are the admission plugins that read other objects
// (apiserver/internal/kube/admission.go).
var readingPlugins = []string{
	"LimitRanger", "ServiceAccount", "PodSecurity", "Priority", "DefaultStorageClass",
	"PersistentVolumeClaimResize", "RuntimeClass", "DefaultIngressClass", "PodTopologyLabels",
	"NodeDeclaredFeatureValidator", "PodResizeValidator", "ResourceQuota",
}

// BenchmarkCreatePodAdmitted is BenchmarkCreatePod, once with kube's
// default admission plugins (the namespace's ServiceAccount "default" in
// place, as kube-controller-manager makes it) and once with only those
// that read nothing but the object: what the plugins that read other
// objects cost a pod create, the larger pod they make included (its token
// volume is validated, stored and decoded by the watch cache).
func BenchmarkCreatePodAdmitted(b *testing.B) {
	for _, bc := range []struct {
		name     string
		disabled []string
	}{
		{"default-plugins", nil},
		{"object-only-plugins", readingPlugins},
	} {
		b.Run(bc.name, func(b *testing.B) {
			st := memory.New()
			srv, err := New(Config{Storage: st, DisableAdmissionPlugins: bc.disabled})
			if err != nil {
				b.Fatal(err)
			}
			stop := runtest.Start(b, srv)
			defer func() {
				stop()
				_ = st.Close()
			}()
			// Start-up writes are not what is measured.
			if err := srv.WaitReady(b.Context()); err != nil {
				b.Fatal(err)
			}
			benchDo(b, srv, http.MethodPost, "/api/v1/namespaces", `{"metadata":{"name":"default"}}`, 0) // made at start too
			benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"default"}}`, http.StatusCreated)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/pods", benchPod(i), http.StatusCreated)
			}
		})
	}
}

// BenchmarkStartup is a server's start until it is ready (its informers
// synced, the system PriorityClasses and the bootstrap RBAC policy
// stored) and its close, on each backend.
func BenchmarkStartup(b *testing.B) {
	for _, be := range backends {
		b.Run(be.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				srv, err := New(Config{Storage: be.New(b)})
				if err != nil {
					b.Fatal(err)
				}
				stop := runtest.Start(b, srv)
				if err := srv.WaitReady(b.Context()); err != nil {
					b.Fatal(err)
				}
				stop()
			}
		})
	}
}

// BenchmarkCreatePodWebhook is BenchmarkCreatePodAdmitted's create with
// one validating webhook that allows every pod (internal/webhookserver,
// on 127.0.0.1 over HTTPS) against none: what calling a webhook costs a
// create, the webhook's own work included.
func BenchmarkCreatePodWebhook(b *testing.B) {
	for _, hooked := range []bool{false, true} {
		b.Run(map[bool]string{false: "no-webhook", true: "one-allowing-webhook"}[hooked], func(b *testing.B) {
			st := memory.New()
			srv, err := New(Config{Storage: st, DisableAdmissionPlugins: []string{"ServiceAccount"}})
			if err != nil {
				b.Fatal(err)
			}
			stop := runtest.Start(b, srv)
			defer func() {
				stop()
				_ = st.Close()
			}()
			if err := srv.WaitReady(b.Context()); err != nil {
				b.Fatal(err)
			}
			benchDo(b, srv, http.MethodPost, "/api/v1/namespaces", `{"metadata":{"name":"default"}}`, 0)
			if hooked {
				hook, err := webhookserver.Start(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer hook.Close()
				cfg := fmt.Sprintf(`{"metadata":{"name":"allow"},"webhooks":[{"name":"allow.bench.example.com","sideEffects":"None",
"admissionReviewVersions":["v1"],"clientConfig":{"url":%q,"caBundle":%q},
"rules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE"],"resources":["pods"]}]}]}`,
					hook.URL+"/allow", base64.StdEncoding.EncodeToString(hook.CABundle))
				benchDo(b, srv, http.MethodPost, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", cfg, http.StatusCreated)
				defer func() {
					if n := len(hook.Requests("/allow")); n < b.N {
						b.Errorf("the webhook was called %d times for %d creates", n, b.N)
					}
				}()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/pods", benchPod(i), http.StatusCreated)
			}
		})
	}
}
