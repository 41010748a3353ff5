package envtest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
)

// startToList starts an environment, lists namespaces through its client
// and returns how long that took, and the stop of the environment.
func startToList(b *testing.B, opts Options) (time.Duration, func()) {
	b.Helper()
	begin := time.Now()
	env, stop, err := start(b.TempDir(), opts)
	if err != nil {
		stop()
		b.Fatal(err)
	}
	if _, err := client.For[*corev1.Namespace](env.Client, "").List(context.Background(), metav1.ListOptions{}); err != nil {
		stop()
		b.Fatal(err)
	}
	return time.Since(begin), stop
}

// BenchmarkStartToList is the time from Start to the first successful
// list through the environment's client (ms/start; ns/op adds the
// stop): bare on each store, with 100 CRDs installed as part of the
// start, and with every controller running and synced.
func BenchmarkStartToList(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"memory", Options{}},
		{"etcd", Options{Etcd: true}},
		{"memory+100CRDs", Options{CRDs: benchCRDs(100)}},
		{"memory+controllers", Options{Controllers: controllermanager.AllControllers()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				d, stop := startToList(b, bc.opts)
				total += d
				stop()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/start")
		})
	}
}

// BenchmarkIdleHeap is the live heap of an idle environment on the
// memory store: the heap after a collection with n environments started
// and ready, less the heap before, over n.
func BenchmarkIdleHeap(b *testing.B) {
	const n = 10
	for b.Loop() {
		before := liveHeap()
		var stops []func()
		for range n {
			_, stop := startToList(b, Options{})
			stops = append(stops, stop)
		}
		after := liveHeap()
		for _, stop := range stops {
			stop()
		}
		b.ReportMetric(float64(after-before)/n/(1<<20), "MiB/server")
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkParallelStart starts 20 environments at once, as 20 parallel
// tests do, and reports the wall time until every one has answered its
// first list.
func BenchmarkParallelStart(b *testing.B) {
	const n = 20
	for b.Loop() {
		begin := time.Now()
		stops := make([]func(), n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, stops[i] = startToList(b, Options{})
			})
		}
		wg.Wait()
		b.ReportMetric(float64(time.Since(begin).Milliseconds()), "ms/20-ready")
		for _, stop := range stops {
			stop()
		}
	}
}

// benchCRDs are n CustomResourceDefinitions of one served version each,
// with a schema of a few fields, as a kubebuilder project's.
func benchCRDs(n int) []*unstructured.Unstructured {
	crds := make([]*unstructured.Unstructured, n)
	for i := range crds {
		plural := fmt.Sprintf("widget%ds", i)
		crds[i] = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1",
			"kind":       "CustomResourceDefinition",
			"metadata":   map[string]any{"name": plural + ".bench.example.com"},
			"spec": map[string]any{
				"group": "bench.example.com",
				"scope": "Namespaced",
				"names": map[string]any{"plural": plural, "singular": fmt.Sprintf("widget%d", i), "kind": fmt.Sprintf("Widget%d", i), "listKind": fmt.Sprintf("Widget%dList", i)},
				"versions": []any{map[string]any{
					"name": "v1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{
						"type": "object",
						"properties": map[string]any{
							"spec": map[string]any{"type": "object", "properties": map[string]any{
								"replicas": map[string]any{"type": "integer", "minimum": int64(0)},
								"image":    map[string]any{"type": "string"},
							}},
							"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
						},
					}},
					"subresources": map[string]any{"status": map[string]any{}},
				}},
			},
		}}
	}
	return crds
}
