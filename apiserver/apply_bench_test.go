package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchApplyPods is how many pods the update and apply benchmarks write
// in turn.
const benchApplyPods = 200

// benchSend serves one request in-process with a content type of its
// own. code 0 accepts any answer.
func benchSend(b testing.TB, srv *Server, method, path, contentType, body string, code int) []byte {
	b.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", contentType)
	return benchServe(b, srv, req, code)
}

// benchServe serves req through srv's routes in-process and checks the
// answer's code (0 accepts any); it returns the answer's body.
func benchServe(b testing.TB, srv *Server, req *http.Request, code int) []byte {
	b.Helper()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if code != 0 && rec.Code != code {
		b.Fatalf("%s %s: %d %s, want %d", req.Method, req.URL.Path, rec.Code, rec.Body.Bytes(), code)
	}
	return rec.Body.Bytes()
}

// benchPodGen is benchPod(i) with its label gen set to gen, and kind and
// apiVersion, as an apply configuration needs them.
func benchPodGen(i, gen int) string {
	body := strings.Replace(benchPod(i), `"gen":"000000000"`, fmt.Sprintf(`"gen":"%09d"`, gen), 1)
	return `{"apiVersion":"v1","kind":"Pod",` + strings.TrimPrefix(body, "{")
}

// BenchmarkUpdatePod and BenchmarkApplyPod write the same change (a
// label) to typical pods (benchPod), by a PUT of the whole pod and by a
// server-side apply of the same document: the cost of the field
// manager's merge and conflict check over a plain update (both record
// managedFields). Memory backend, in-process, as BenchmarkCreatePod.
func BenchmarkUpdatePod(b *testing.B) {
	srv, _, _ := benchServer(b)
	benchSend(b, srv, http.MethodPost, "/api/v1/namespaces/default/serviceaccounts", "application/json", `{"metadata":{"name":"default"}}`, http.StatusCreated)
	// Each PUT sends the pod as stored (what admission added included),
	// unconditionally, with the label changed.
	stored := make([]string, benchApplyPods)
	for i := range benchApplyPods {
		body := benchSend(b, srv, http.MethodPost, "/api/v1/namespaces/default/pods?fieldManager=bench", "application/json", benchPodGen(i, 0), http.StatusCreated)
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			b.Fatal(err)
		}
		delete(m["metadata"].(map[string]any), "resourceVersion")
		js, err := json.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		stored[i] = string(js)
	}
	b.ReportAllocs()
	start := processCPU(b)
	n := 0
	for b.Loop() {
		i := n % benchApplyPods
		body := strings.Replace(stored[i], `"gen":"000000000"`, fmt.Sprintf(`"gen":"%09d"`, n+1), 1)
		benchSend(b, srv, http.MethodPut, fmt.Sprintf("/api/v1/namespaces/default/pods/pod-%06d?fieldManager=bench", i), "application/json", body, http.StatusOK)
		n++
	}
	b.ReportMetric(float64((processCPU(b)-start).Nanoseconds())/float64(n), "cpu-ns/op")
}

// BenchmarkPatchPod writes BenchmarkUpdatePod's change as a merge patch
// of the label, as controllers and kubectl patch: the patch applied to the
// stored object and the result decoded, besides the update's work.
func BenchmarkPatchPod(b *testing.B) {
	srv, _, _ := benchServer(b)
	benchSend(b, srv, http.MethodPost, "/api/v1/namespaces/default/serviceaccounts", "application/json", `{"metadata":{"name":"default"}}`, http.StatusCreated)
	for i := range benchApplyPods {
		benchSend(b, srv, http.MethodPost, "/api/v1/namespaces/default/pods?fieldManager=bench", "application/json", benchPodGen(i, 0), http.StatusCreated)
	}
	b.ReportAllocs()
	start := processCPU(b)
	n := 0
	for b.Loop() {
		i := n % benchApplyPods
		patch := fmt.Sprintf(`{"metadata":{"labels":{"gen":"%09d"}}}`, n+1)
		benchSend(b, srv, http.MethodPatch, fmt.Sprintf("/api/v1/namespaces/default/pods/pod-%06d?fieldManager=bench", i), "application/merge-patch+json", patch, http.StatusOK)
		n++
	}
	b.ReportMetric(float64((processCPU(b)-start).Nanoseconds())/float64(n), "cpu-ns/op")
}

func BenchmarkApplyPod(b *testing.B) {
	srv, _, _ := benchServer(b)
	benchSend(b, srv, http.MethodPost, "/api/v1/namespaces/default/serviceaccounts", "application/json", `{"metadata":{"name":"default"}}`, http.StatusCreated)
	for i := range benchApplyPods {
		benchSend(b, srv, http.MethodPatch, fmt.Sprintf("/api/v1/namespaces/default/pods/pod-%06d?fieldManager=bench", i), applyType, benchPodGen(i, 0), http.StatusCreated)
	}
	b.ReportAllocs()
	start := processCPU(b)
	n := 0
	for b.Loop() {
		i := n % benchApplyPods
		benchSend(b, srv, http.MethodPatch, fmt.Sprintf("/api/v1/namespaces/default/pods/pod-%06d?fieldManager=bench", i), applyType, benchPodGen(i, n+1), http.StatusOK)
		n++
	}
	b.ReportMetric(float64((processCPU(b)-start).Nanoseconds())/float64(n), "cpu-ns/op")
}
