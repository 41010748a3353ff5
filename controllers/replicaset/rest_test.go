package replicaset

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
)

// TestREST checks the requests REST sends against a real HTTP server that
// answers like an API server.
func TestREST(t *testing.T) {
	t.Run("replication", func(t *testing.T) {
		testREST(t, ReplicationControllers{}, "/api/v1/namespaces/ns1/replicationcontrollers", &corev1.ReplicationController{
			TypeMeta: metav1.TypeMeta{Kind: "ReplicationController", APIVersion: "v1"}})
	})
	t.Run("replicaset", func(t *testing.T) {
		testREST(t, ReplicaSets{}, "/apis/apps/v1/namespaces/ns1/replicasets", &appsv1.ReplicaSet{
			TypeMeta: metav1.TypeMeta{Kind: "ReplicaSet", APIVersion: "apps/v1"}})
	})
}

// testREST checks the requests REST sends for objects like obj, served
// under path.
func testREST[T cache.Object](t *testing.T, k Kind[T], path string, obj T) {
	var mu sync.Mutex
	var seen []string
	writeJSON := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		mu.Unlock()
		stored := obj.DeepCopyObject().(T)
		stored.SetNamespace("ns1")
		stored.SetName("web")
		stored.SetUID("u1")
		stored.SetResourceVersion("7")
		switch r.Method + " " + r.URL.Path {
		case "GET " + path + "/web":
			writeJSON(w, 200, stored)
		case "GET " + path + "/gone":
			writeJSON(w, 404, apierrors.NewNotFound(k.Resource(), "gone").Status())
		case "PUT " + path + "/web/status":
			in := obj.DeepCopyObject().(T)
			_ = json.Unmarshal(body, in)
			in.SetResourceVersion("8")
			writeJSON(w, 200, in)
		case "POST /api/v1/namespaces/ns1/pods":
			var in corev1.Pod
			_ = json.Unmarshal(body, &in)
			in.Name = in.GenerateName + "abcde"
			writeJSON(w, 201, &in)
		case "DELETE /api/v1/namespaces/ns1/pods/p":
			writeJSON(w, 200, metav1.Status{Status: metav1.StatusSuccess})
		case "PATCH /api/v1/namespaces/ns1/pods/p":
			writeJSON(w, 200, &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "p"}})
		default:
			writeJSON(w, 404, apierrors.NewNotFound(corev1.Resource("unknown"), r.URL.Path).Status())
		}
	}))
	defer srv.Close()
	c, err := client.New(&client.Config{REST: &rest.Config{Host: srv.URL}, PreferJSON: true})
	if err != nil {
		t.Fatal(err)
	}
	r := NewClient[T](c)
	ctx := t.Context()

	got, err := r.Get(ctx, "ns1", "web")
	if err != nil || got.GetUID() != "u1" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := r.Get(ctx, "ns1", "gone"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing object: %v, want NotFound", err)
	}
	up, err := r.UpdateStatus(ctx, k.WithStatus(got, appsv1.ReplicaSetStatus{Replicas: 3}))
	if err != nil || k.Status(up).Replicas != 3 || up.GetResourceVersion() != "8" {
		t.Fatalf("UpdateStatus = %+v, %v", up, err)
	}
	pod, err := r.CreatePod(ctx, "ns1", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-"}}, metav1.CreateOptions{})
	if err != nil || pod.Name != "web-abcde" {
		t.Fatalf("CreatePod = %+v, %v", pod, err)
	}
	if err := r.DeletePod(ctx, "ns1", "p", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("DeletePod: %v", err)
	}
	if _, err := r.PatchPod(ctx, "ns1", "p", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("PatchPod: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"GET " + path + "/web ",
		"GET " + path + "/gone ",
		"PUT " + path + "/web/status application/json",
		"POST /api/v1/namespaces/ns1/pods application/json",
		"DELETE /api/v1/namespaces/ns1/pods/p application/json",
		"PATCH /api/v1/namespaces/ns1/pods/p application/strategic-merge-patch+json",
	}
	if len(seen) != len(want) {
		t.Fatalf("requests %q, want %q", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("request %d: %q, want %q", i, seen[i], want[i])
		}
	}
}
