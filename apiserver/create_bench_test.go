package apiserver

import (
	"net/http"
	"testing"
)

// BenchmarkCreatePod creates typical pods (benchPod) through the API
// routes in-process on the memory backend: the cost of a create's decoding,
// defaulting, validation, encoding and storage, without the network. Its
// figure before and after Kubernetes' defaulting and validation came in is
// in the note of issue 16.
func BenchmarkCreatePod(b *testing.B) {
	srv, _, _ := benchServer(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/pods", benchPod(i), http.StatusCreated)
	}
}
