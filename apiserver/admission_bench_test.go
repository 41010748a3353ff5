package apiserver

import (
	"net/http"
	"testing"
)

// BenchmarkCreatePodAdmitted is BenchmarkCreatePod with the namespace's
// ServiceAccount "default" in place, as kube-controller-manager makes it:
// the cost of a pod create through every admission plugin, those that read
// other objects included.
func BenchmarkCreatePodAdmitted(b *testing.B) {
	srv, _, _ := benchServer(b)
	if srv.self != nil {
		// Start-up writes are not what is measured.
		if err := srv.WaitReady(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"default"}}`, http.StatusCreated)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/pods", benchPod(i), http.StatusCreated)
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
				srv, err := New(b.Context(), Config{Storage: be.New(b)})
				if err != nil {
					b.Fatal(err)
				}
				if srv.self != nil {
					if err := srv.WaitReady(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
				srv.Close()
			}
		})
	}
}
