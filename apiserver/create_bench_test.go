package apiserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/memory"
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

// BenchmarkCreatePodProtobuf is BenchmarkCreatePod on the memory backend
// with the pods sent in protobuf, as client-go's typed clients send
// them, beside the same pods in JSON: what a protobuf body costs to
// decode against a JSON one.
func BenchmarkCreatePodProtobuf(b *testing.B) {
	for _, enc := range []string{"json", "protobuf"} {
		b.Run(enc, func(b *testing.B) {
			srv := benchServerOn(b, memory.New())
			benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"default"}}`, 0)
			b.ReportAllocs()
			b.ResetTimer()
			start := processCPU(b)
			n := 0
			for i := 0; b.Loop(); i++ {
				body, contentType := []byte(benchPod(i)), "application/json"
				if enc == "protobuf" {
					b.StopTimer()
					pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
					if err := json.Unmarshal(body, pod); err != nil {
						b.Fatal(err)
					}
					var err error
					if body, err = runtime.Encode(registry.Protobuf, pod); err != nil {
						b.Fatal(err)
					}
					contentType = respond.MediaProtobuf
					b.StartTimer()
				}
				req := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/pods", bytes.NewReader(body))
				req.Header.Set("Content-Type", contentType)
				benchServe(b, srv, req, http.StatusCreated)
				n++
			}
			b.ReportMetric(float64((processCPU(b)-start).Nanoseconds())/float64(n), "cpu-ns/op")
		})
	}
}
