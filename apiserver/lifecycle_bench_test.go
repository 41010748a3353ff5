package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	lwclient "github.com/listwatch/listwatch/client"
)

// BenchmarkWatchedPodLifecycle is a pod's life as the control plane
// writes it, watched as a controller-manager's informer watches it: one
// op creates a pod, binds it, writes its status Running (a PUT of
// /status, as a kubelet does), deletes it with the default grace period
// and then with 0, and waits until a protobuf watch over HTTP on
// 127.0.0.1 has received the five events. The writes are served
// in-process (benchSend), the watch through listwatch's client; cpu-ns/op
// is the whole process's CPU: write paths, watch cache, watch encoding
// and the client's decoding.
func BenchmarkWatchedPodLifecycle(b *testing.B) {
	srv, _, url := benchServer(b)
	const ns = "/api/v1/namespaces/default"
	benchSend(b, srv, http.MethodPost, ns+"/serviceaccounts", "application/json", `{"metadata":{"name":"default"}}`, http.StatusCreated)
	c, err := lwclient.New(&lwclient.Config{REST: &rest.Config{Host: url}, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	pods := lwclient.NewResource[*corev1.Pod](c, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "default")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	await := func(n int) {
		for range n {
			ev, err := w.Next()
			if err != nil {
				b.Fatal(err)
			}
			if ev.Object == nil {
				b.Fatalf("%s event without an object", ev.Type)
			}
		}
	}

	b.ReportAllocs()
	var cpu time.Duration
	i := 0
	for b.Loop() {
		start := processCPU(b)
		name := fmt.Sprintf("pod-%06d", i)
		path := ns + "/pods/" + name
		benchSend(b, srv, http.MethodPost, ns+"/pods", "application/json", unboundPod(name), http.StatusCreated)
		benchSend(b, srv, http.MethodPost, path+"/binding", "application/json",
			fmt.Sprintf(`{"metadata":{"name":%q},"target":{"kind":"Node","name":"node-%d"}}`, name, i%3), http.StatusCreated)
		got := benchSend(b, srv, http.MethodGet, path, "application/json", "", http.StatusOK)
		running := bytes.Replace(got, []byte(`"status":{`), []byte(`"status":{"phase":"Running","podIP":"10.0.0.1","conditions":[{"type":"Ready","status":"True"}],`), 1)
		benchSend(b, srv, http.MethodPut, path+"/status", "application/json", string(running), http.StatusOK)
		benchSend(b, srv, http.MethodDelete, path, "application/json", "", http.StatusOK)
		benchSend(b, srv, http.MethodDelete, path+"?gracePeriodSeconds=0", "application/json", "", http.StatusOK)
		await(5)
		cpu += processCPU(b) - start
		i++
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(i), "cpu-ns/op")
}

// unboundPod is benchPod's pod without a node, for a scheduler to bind.
func unboundPod(name string) string {
	return fmt.Sprintf(`{"metadata":{"name":%q,"labels":{"app":"bench"},
"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"6f1c1f7e-0000-4000-8000-000000000001","controller":true}]},
"spec":{"containers":[{"name":"main","image":"registry.k8s.io/pause:3.10",
"ports":[{"containerPort":8080,"protocol":"TCP"}],
"resources":{"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"200m","memory":"128Mi"}}}]}}`, name)
}
