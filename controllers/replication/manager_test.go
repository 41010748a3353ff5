package replication

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNewServesRCs: the package wires the ReplicaSet controller to RCs:
// its name, its client's paths, and its refusal of missing parts. What the
// manager does is tested in package replicaset, over both kinds.
func TestNewServesRCs(t *testing.T) {
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.Method + " " + r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ReplicationController","apiVersion":"v1","metadata":{"name":"web","namespace":"ns1"}}`))
	}))
	defer srv.Close()
	c, err := client.New(&client.Config{REST: &rest.Config{Host: srv.URL}, PreferJSON: true})
	if err != nil {
		t.Fatal(err)
	}
	api := NewClient(c)
	if rc, err := api.Get(t.Context(), "ns1", "web"); err != nil || rc.Name != "web" {
		t.Fatalf("Get = %+v, %v", rc, err)
	}
	if path != "GET /api/v1/namespaces/ns1/replicationcontrollers/web" {
		t.Errorf("request %q", path)
	}

	pods, rcs := cachetest.NewInformer[*corev1.Pod](), cachetest.NewInformer(&corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web"}})
	rcs.SetSynced(false)
	m, err := New(pods, rcs, api, &controller.RealPodControl{Client: api}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "replication" {
		t.Errorf("name %q, want replication", m.Name())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := m.Run(ctx); !errors.Is(err, controller.ErrCacheSyncAborted) {
		t.Errorf("Run: %v, want ErrCacheSyncAborted", err)
	}
	if _, err := New(nil, rcs, api, nil, Options{}); err == nil {
		t.Error("New without a pod informer returned nil error")
	}
}
