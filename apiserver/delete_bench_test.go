package apiserver

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// BenchmarkDeletePod deletes a bound pod as a controller and then its node
// agent do: a delete with the default grace period, which writes the
// deletionTimestamp and keeps the pod, then one with gracePeriodSeconds=0,
// which removes it. One op is the pair. Memory backend, in-process, as
// BenchmarkUpdatePod; the pods are created with the timer stopped.
func BenchmarkDeletePod(b *testing.B) {
	srv, _, _ := benchServer(b)
	benchSend(b, srv, http.MethodPost, "/api/v1/namespaces/default/serviceaccounts", "application/json", `{"metadata":{"name":"default"}}`, http.StatusCreated)
	b.ReportAllocs()
	var cpu time.Duration
	next, created := 0, 0
	for b.Loop() {
		if next == created {
			b.StopTimer()
			for range benchApplyPods {
				benchSend(b, srv, http.MethodPost, "/api/v1/namespaces/default/pods", "application/json", benchPod(created), http.StatusCreated)
				created++
			}
			b.StartTimer()
		}
		start := processCPU(b)
		path := fmt.Sprintf("/api/v1/namespaces/default/pods/pod-%06d", next)
		benchSend(b, srv, http.MethodDelete, path, "application/json", "", http.StatusOK)
		benchSend(b, srv, http.MethodDelete, path+"?gracePeriodSeconds=0", "application/json", "", http.StatusOK)
		cpu += processCPU(b) - start
		next++
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(next), "cpu-ns/op")
}
