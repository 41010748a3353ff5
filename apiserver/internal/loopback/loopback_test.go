package loopback

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a handler standing in for the API server: it answers by path,
// and streams a watch until the request's context ends.
type server struct {
	// auth, when set, is the token the handler accepts.
	auth    *Transport
	watches atomic.Int32
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.auth != nil && !s.auth.Authenticates(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Query().Get("watch") == "true":
		s.watches.Add(1)
		defer s.watches.Add(-1)
		w.WriteHeader(http.StatusOK)
		for i := 0; ; i++ {
			fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"ns","resourceVersion":"%d"}}}`+"\n", i, i+1)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/ns/configmaps/one":
		fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"one","namespace":"ns"},"data":{"k":"v"}}`)
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/ns/configmaps":
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"details":{"name":"x","kind":"configmaps"}}`)
	}
}

func newClient(t *testing.T, h http.Handler) (*Transport, kubernetes.Interface) {
	t.Helper()
	tr, err := New(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	c, err := kubernetes.NewForConfig(tr.Config())
	if err != nil {
		t.Fatal(err)
	}
	return tr, c
}

func TestRequests(t *testing.T) {
	srv := &server{}
	tr, c := newClient(t, srv)
	srv.auth = tr
	cms := c.CoreV1().ConfigMaps("ns")
	tests := []struct {
		name string
		do   func(ctx context.Context) (any, error)
		want func(t *testing.T, got any, err error)
	}{
		{"get", func(ctx context.Context) (any, error) { return cms.Get(ctx, "one", metav1.GetOptions{}) },
			func(t *testing.T, got any, err error) {
				if cm, _ := got.(*corev1.ConfigMap); err != nil || cm.Data["k"] != "v" {
					t.Fatalf("got %v, %v", got, err)
				}
			}},
		{"create with a body", func(ctx context.Context) (any, error) {
			return cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "two"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})
		}, func(t *testing.T, got any, err error) {
			if cm, _ := got.(*corev1.ConfigMap); err != nil || cm.Name != "two" || cm.Data["a"] != "b" {
				t.Fatalf("got %v, %v", got, err)
			}
		}},
		{"an error status", func(ctx context.Context) (any, error) { return cms.Get(ctx, "missing", metav1.GetOptions{}) },
			func(t *testing.T, _ any, err error) {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("err = %v, want NotFound", err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.do(t.Context())
			tt.want(t, got, err)
		})
	}
}

func TestAuthentication(t *testing.T) {
	srv := &server{}
	tr, _ := newClient(t, srv)
	srv.auth = tr
	other, err := New(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, tt := range []struct {
		name  string
		token string
		ok    bool
	}{
		{"its own token", tr.Token(), true},
		{"another transport's token", other.Token(), false},
		{"no token", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tr.Authenticates(tt.token); got != tt.ok {
				t.Fatalf("Authenticates = %v, want %v", got, tt.ok)
			}
		})
	}
	if cfg := tr.Config(); cfg.BearerToken != tr.Token() || cfg.TLSClientConfig.CAData != nil || cfg.QPS >= 0 {
		t.Errorf("Config: %+v", cfg)
	}
}

func TestWatchStreamsUntilStopped(t *testing.T) {
	srv := &server{}
	_, c := newClient(t, srv)
	w, err := c.CoreV1().ConfigMaps("ns").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		ev := <-w.ResultChan()
		if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || cm.Name != fmt.Sprintf("cm-%d", i) {
			t.Fatalf("event %d: %v", i, ev)
		}
	}
	w.Stop()
	waitFor(t, func() bool { return srv.watches.Load() == 0 })
}

func TestCloseEndsWatchesAndRefusesRequests(t *testing.T) {
	srv := &server{}
	tr, err := New(srv)
	if err != nil {
		t.Fatal(err)
	}
	// A reader that stops reading must not keep Close waiting.
	req, _ := http.NewRequest(http.MethodGet, "http://x/api/v1/configmaps?watch=true", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { tr.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if n := srv.watches.Load(); n != 0 {
		t.Errorf("%d watches still served", n)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the body of a watch ended by Close read to a clean end")
	}
	resp.Body.Close()
	if _, err := tr.RoundTrip(req); !errors.Is(err, ErrClosed) {
		t.Errorf("request after Close: %v, want ErrClosed", err)
	}
}

func TestIsWatch(t *testing.T) {
	for _, tt := range []struct {
		url  string
		want bool
	}{
		{"/api/v1/pods?watch=true", true},
		{"/api/v1/pods?watch=1", true},
		{"/api/v1/pods?watch=false", false},
		{"/api/v1/watch/pods", true},
		{"/apis/apps/v1/watch/namespaces/ns/deployments", true},
		{"/api/v1/namespaces/ns/configmaps/watch", false},
		{"/apis/apps/v1/namespaces/watch/deployments", false},
		{"/apis/apps/v1/namespaces/ns/deployments/watch", false},
		{"/api/v1/pods", false},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://x"+tt.url, nil)
		if got := isWatch(req); got != tt.want {
			t.Errorf("isWatch(%s) = %v, want %v", tt.url, got, tt.want)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
	}
}
