package apiserver

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/storage"
)

// BenchmarkCreatePod creates typical pods (benchPod) through the API
// routes in-process, on the memory backend and on an embedded etcd (whose
// work is in the process's CPU too): the cost of a create's decoding,
// defaulting, validation, encoding and storage, without the network. Its
// figure before and after Kubernetes' defaulting and validation came in is
// in the note of issue 16. Besides ns/op it reports cpu-ns/op, the
// process's CPU time per create (the watch cache's decoding and the
// garbage collector included), which other load on the machine disturbs
// far less than the elapsed time.
func BenchmarkCreatePod(b *testing.B) {
	for _, backend := range backends {
		b.Run(backend.Name, func(b *testing.B) {
			srv := benchServerOn(b, backend.New(b))
			benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"default"}}`, 0)
			b.ReportAllocs()
			b.ResetTimer()
			start := processCPU(b)
			n := 0
			for i := 0; b.Loop(); i++ {
				benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/pods", benchPod(i), http.StatusCreated)
				n++
			}
			b.ReportMetric(float64((processCPU(b)-start).Nanoseconds())/float64(n), "cpu-ns/op")
		})
	}
}

// benchServerOn is a server on st, ready, with its namespace default, for
// benchmarks that call its routes in-process (benchDo).
func benchServerOn(b *testing.B, st storage.Interface) *Server {
	b.Helper()
	srv, err := New(Config{Storage: st})
	if err != nil {
		b.Fatal(err)
	}
	runtest.Start(b, srv)
	if err := srv.WaitReady(b.Context()); err != nil {
		b.Fatal(err)
	}
	benchDo(b, srv, http.MethodPost, "/api/v1/namespaces", `{"metadata":{"name":"default"}}`, 0)
	return srv
}

// processCPU is the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
