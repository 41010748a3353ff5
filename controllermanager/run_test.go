package controllermanager_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/envtest"
)

// runManager makes a manager of cfg, with leader election off and logs
// discarded, and runs it until t ends, when Run must return nil.
func runManager(t *testing.T, cfg controllermanager.Config) *controllermanager.Manager {
	t.Helper()
	m, stop := startManager(t, cfg)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return m
}

// startManager makes a manager of cfg, with leader election off and logs
// discarded, and runs it until stop, which returns what Run returned.
func startManager(t *testing.T, cfg controllermanager.Config) (m *controllermanager.Manager, stop func() error) {
	t.Helper()
	cfg.LeaderElection = controllermanager.LeaderElection{Disabled: true}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := controllermanager.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	return m, func() error {
		cancel()
		return <-done
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestFailedBuildReleasesControllers: when one controller of a term cannot
// be built (here the garbage collector, whose discovery the server
// refuses), the controllers built before it are released, not leaked. The
// endpointslice-mirroring controller is kube's, whose constructor starts
// its queue's goroutines; every failed term used to leave them running.
func TestFailedBuildReleasesControllers(t *testing.T) {
	env := envtest.Start(t, envtest.Options{})
	before := goleak.IgnoreCurrent()
	var refused atomic.Int32
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Path == "/apis" {
				refused.Add(1)
				return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
					Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
			}
			return rt.RoundTrip(req)
		})
	}
	_, stop := startManager(t, controllermanager.Config{
		Client:      &client.Config{REST: cfg, QPS: -1},
		Controllers: []string{controllermanager.EndpointSliceMirroring, controllermanager.GarbageCollector},
	})
	// Two terms fail: the first at once, the second after the restart
	// backoff.
	for deadline := time.Now().Add(30 * time.Second); refused.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = stop()
			t.Fatalf("discovery was asked %d times, want 2 terms", refused.Load())
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Kept-alive connections of the clients and the server may outlive
	// the manager; the goroutines looked for are the controllers'.
	goleak.VerifyNone(t, before,
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*http2serverConn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*http2serverConn).readFrames"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"))
}
