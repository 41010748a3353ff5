package garbagecollector

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/client"
)

// TestNewClient drives the REST adapter against a real HTTP server and
// checks the requests the collector's calls become.
func TestNewClient(t *testing.T) {
	type request struct {
		method, path, contentType string
		body                      []byte
	}
	var mu sync.Mutex
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, request{r.Method, r.URL.Path, r.Header.Get("Content-Type"), body})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/namespaces/default/pods/p":
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default","uid":"u1","resourceVersion":"7"}}`)
		case "/apis/example.com/v1/namespaces/default/widgets/w":
			_, _ = io.WriteString(w, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default","uid":"u2"}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404,"message":"not found"}`)
		}
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	rc, err := client.New(&client.Config{REST: &rest.Config{Host: srv.URL}, QPS: -1, PreferJSON: true})
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(rc)
	podsGVR := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	ctx := t.Context()

	for _, tc := range []struct {
		name    string
		gvr     schema.GroupVersionResource
		objName string
		uid     types.UID
	}{
		{"built-in", podsGVR, "p", "u1"},
		{"custom resource", widgets, "w", "u2"},
	} {
		t.Run("get "+tc.name, func(t *testing.T) {
			obj, err := c.Get(ctx, tc.gvr, "default", tc.objName)
			if err != nil || obj.GetUID() != tc.uid {
				t.Fatalf("Get = %v, %v; want uid %s", obj, err, tc.uid)
			}
		})
	}
	if _, err := c.Get(ctx, podsGVR, "default", "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing pod = %v, want NotFound", err)
	}

	uid := types.UID("u1")
	policy := metav1.DeletePropagationForeground
	if err := c.Delete(ctx, podsGVR, "default", "p", metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &policy,
	}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"finalizers":null,"resourceVersion":"7","uid":"u1"}}`)
	if err := c.Patch(ctx, podsGVR, "default", "p", types.MergePatchType, patch); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, podsGVR, "default", "missing", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Delete of a missing pod = %v, want NotFound", err)
	}

	mu.Lock()
	defer mu.Unlock()
	var del, pat *request
	for i := range got {
		switch r := &got[i]; {
		case r.method == http.MethodDelete && r.path == "/api/v1/namespaces/default/pods/p":
			del = r
		case r.method == http.MethodPatch:
			pat = r
		}
	}
	if del == nil || pat == nil {
		t.Fatalf("requests %+v: want a DELETE and a PATCH of the pod", got)
	}
	var opts metav1.DeleteOptions
	if err := json.Unmarshal(del.body, &opts); err != nil {
		t.Fatalf("delete body %s: %v", del.body, err)
	}
	if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != uid ||
		opts.PropagationPolicy == nil || *opts.PropagationPolicy != policy {
		t.Errorf("delete options %s: want uid precondition and foreground propagation", del.body)
	}
	if pat.path != "/api/v1/namespaces/default/pods/p" || pat.contentType != string(types.MergePatchType) || string(pat.body) != string(patch) {
		t.Errorf("patch %s %s %s", pat.path, pat.contentType, pat.body)
	}
}
