package controllermanager

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/client"
)

func TestResourceOf(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/api/v1/namespaces/ns/pods", "pods"},
		{"/api/v1/namespaces/ns/pods/web-1", "pods"},
		{"/api/v1/namespaces/ns/pods/web-1/binding", "pods/binding"},
		{"/api/v1/pods", "pods"},
		{"/api/v1/namespaces", "namespaces"},
		{"/api/v1/namespaces/kube-system", "namespaces"},
		{"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x", "leases"},
		{"/apis/example.dev/v1/widgets", "widgets"},
		{"/apis/apps/v1/namespaces/ns/deployments/d/scale", "deployments/scale"},
		{"/api/v1", "discovery"},
		{"/apis/apps/v1", "discovery"},
		{"/api", "other"},
		{"/healthz", "other"},
	}
	for _, tt := range tests {
		if got := resourceOf(tt.path); got != tt.want {
			t.Errorf("resourceOf(%s) = %s, want %s", tt.path, got, tt.want)
		}
	}
}

func TestNew(t *testing.T) {
	cc := func() *client.Config { return &client.Config{REST: &rest.Config{Host: "127.0.0.1:1"}} }
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
		want    []string
	}{
		{name: "no client", cfg: Config{}, wantErr: "Client is required"},
		{name: "all by default", cfg: Config{Client: cc()}, want: AllControllers()},
		{name: "chosen, deduplicated", cfg: Config{Client: cc(), Controllers: []string{"endpoints", " replication", "endpoints"}},
			want: []string{"endpoints", "replication"}},
		{name: "unknown", cfg: Config{Client: cc(), Controllers: []string{"replication", "nosuch"}}, wantErr: `unknown controller "nosuch"`},
		{name: "renew deadline beyond the lease", cfg: Config{Client: cc(), LeaderElection: LeaderElection{LeaseDuration: time.Second, RenewDeadline: 2 * time.Second}},
			wantErr: "must be greater than RenewDeadline"},
		{name: "bad durations ignored without election", cfg: Config{Client: cc(), LeaderElection: LeaderElection{Disabled: true, LeaseDuration: time.Second, RenewDeadline: 2 * time.Second}},
			want: AllControllers()},
		{name: "bad bind address", cfg: Config{Client: cc(), BindAddress: "127.0.0.1:notaport"}, wantErr: "listening"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := strings.Join(m.Controllers(), ","); got != strings.Join(tt.want, ",") {
				t.Errorf("controllers %s, want %s", got, strings.Join(tt.want, ","))
			}
			if id := m.Identity(); !strings.Contains(id, "_") || len(id) < 14 {
				t.Errorf("identity %q is not hostname_random", id)
			}
		})
	}
	a, err := New(Config{Client: cc()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Client: cc()})
	if err != nil {
		t.Fatal(err)
	}
	if a.Identity() == b.Identity() {
		t.Errorf("two managers share identity %s", a.Identity())
	}
}

// TestEndpointsWhileWaiting runs a manager against an address where no API
// server answers: it stays healthy but not ready (it never gets the
// Lease), serves its metrics, and stops when its context ends.
func TestEndpointsWhileWaiting(t *testing.T) {
	m, err := New(Config{
		Client:      &client.Config{REST: &rest.Config{Host: "127.0.0.1:1"}},
		BindAddress: "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + m.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// /healthz answers once Run is live.
	for {
		if code, _ := get("/healthz"); code == 200 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	tests := []struct {
		path     string
		wantCode int
		wantBody string
	}{
		{"/readyz", http.StatusServiceUnavailable, "not leading"},
		{"/metrics", 200, `leader_election_master_status{name="listwatch-controller-manager"} 0`},
		{"/metrics", 200, `rest_client_requests_total{code="<error>",resource="leases",verb="GET"}`},
	}
	for _, tt := range tests {
		// The lease GET that fails may not have happened yet.
		var code int
		var body string
		for range 100 {
			if code, body = get(tt.path); code == tt.wantCode && strings.Contains(body, tt.wantBody) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
			t.Errorf("GET %s: %d, want %d with %q:\n%.1500s", tt.path, code, tt.wantCode, tt.wantBody, body)
		}
	}
	if m.IsLeader() || m.Ready() {
		t.Error("leading without a server")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := m.Run(context.Background()); err == nil {
		t.Error("a second Run succeeded")
	}
}
