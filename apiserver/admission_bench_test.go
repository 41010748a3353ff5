package apiserver

import (
	"net/http"
	"testing"

	"github.com/listwatch/listwatch/internal/runtest"
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
