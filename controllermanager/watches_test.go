package controllermanager_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/envtest"
)

// TestOneWatchPerResource runs every controller against a real API server
// and checks that, once they have synced, each resource is watched by one
// stream: the controllers and the garbage collector share one informer per
// resource (the collector's metadata informers are only for what no
// other controller holds typed), so each event is sent and decoded once.
func TestOneWatchPerResource(t *testing.T) {
	env := envtest.Start(t, envtest.Options{})
	var mu sync.Mutex
	watches := map[string]int{} // by path, which names group, version and resource
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true" {
				mu.Lock()
				watches[req.URL.Path]++
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	}
	m := runManager(t, controllermanager.Config{Client: &client.Config{REST: cfg, QPS: -1}})
	for deadline := time.Now().Add(30 * time.Second); !m.Ready(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the controllers never synced")
		}
	}

	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"/api/v1/pods", "/apis/apps/v1/replicasets", "/apis/apps/v1/deployments", "/api/v1/configmaps", "/apis/batch/v1/jobs"} {
		if watches[want] == 0 {
			t.Errorf("%s is not watched; watches: %v", want, watches)
		}
	}
	for path, n := range watches {
		if n > 1 {
			t.Errorf("%s is watched %d times", path, n)
		}
	}
}
