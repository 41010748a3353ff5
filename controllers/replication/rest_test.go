package replication

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/client"
)

// TestREST checks the requests REST sends against a real HTTP server that
// answers like an API server.
func TestREST(t *testing.T) {
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
		rc := &corev1.ReplicationController{TypeMeta: metav1.TypeMeta{Kind: "ReplicationController", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web", UID: "u1", ResourceVersion: "7"}}
		switch r.Method + " " + r.URL.Path {
		case "GET /api/v1/namespaces/ns1/replicationcontrollers/web":
			writeJSON(w, 200, rc)
		case "GET /api/v1/namespaces/ns1/replicationcontrollers/gone":
			writeJSON(w, 404, apierrors.NewNotFound(corev1.Resource("replicationcontrollers"), "gone").Status())
		case "PUT /api/v1/namespaces/ns1/replicationcontrollers/web/status":
			var in corev1.ReplicationController
			_ = json.Unmarshal(body, &in)
			in.ResourceVersion = "8"
			writeJSON(w, 200, &in)
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
	r := NewClient(c)
	ctx := t.Context()

	rc, err := r.Get(ctx, "ns1", "web")
	if err != nil || rc.UID != "u1" {
		t.Fatalf("Get = %+v, %v", rc, err)
	}
	if _, err := r.Get(ctx, "ns1", "gone"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing RC: %v, want NotFound", err)
	}
	rc.Status.Replicas = 3
	up, err := r.UpdateStatus(ctx, rc)
	if err != nil || up.Status.Replicas != 3 || up.ResourceVersion != "8" {
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
		"GET /api/v1/namespaces/ns1/replicationcontrollers/web ",
		"GET /api/v1/namespaces/ns1/replicationcontrollers/gone ",
		"PUT /api/v1/namespaces/ns1/replicationcontrollers/web/status application/json",
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
