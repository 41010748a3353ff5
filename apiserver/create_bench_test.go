package apiserver

import (
	"net/http"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCreatePod creates typical pods (benchPod) through the API
// routes in-process on the memory backend: the cost of a create's decoding,
// defaulting, validation, encoding and storage, without the network. Its
// figure before and after Kubernetes' defaulting and validation came in is
// in the note of issue 16. Besides ns/op it reports cpu-ns/op, the
// process's CPU time per create (the watch cache's decoding and the
// garbage collector included), which other load on the machine disturbs
// far less than the elapsed time.
func BenchmarkCreatePod(b *testing.B) {
	srv, _, _ := benchServer(b)
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
}

// processCPU is the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
