package serve

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/internal/testbackends"
)

func TestMain(m *testing.M) { os.Exit(testbackends.Run(m)) }

var backends = testbackends.All("serve")

// run serves s until the test ends.
func run(t *testing.T, s *Server) {
	t.Helper()
	runtest.Start(t, s)
	wait, cancelWait := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancelWait()
	if err := s.WaitReady(wait); err != nil {
		t.Fatal(err)
	}
}

// TestServe starts a server as a test does (admin token, free port) and
// checks what a client of kube-apiserver finds there: the system
// namespaces, the kubernetes Service on the server's port, the health
// endpoints, the manifests served, the heap profile, and a request without
// a token refused.
func TestServe(t *testing.T) {
	crd := &unstructured.Unstructured{}
	if err := crd.UnmarshalJSON([]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
		"metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com","scope":"Namespaced",
		"names":{"plural":"widgets","singular":"widget","kind":"Widget"},
		"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`)); err != nil {
		t.Fatal(err)
	}
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			s, err := New(Config{
				API:       apiserver.Config{Storage: b.New(t)},
				CertDir:   filepath.Join(t.TempDir(), "pki"),
				AdminUser: "admin",
				Manifests: []*unstructured.Unstructured{crd},
				Filters:   filters.Options{MaxRequestsInFlight: 10, MaxMutatingRequestsInFlight: 10},
				Profiling: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			run(t, s)
			c, err := kubernetes.NewForConfig(s.RESTConfig())
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
				if _, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
					t.Errorf("namespace %s: %v", ns, err)
				}
			}
			svc, err := c.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if port := s.URL[strings.LastIndex(s.URL, ":")+1:]; svc.Spec.Ports[0].TargetPort.String() != port {
				t.Errorf("kubernetes service targets %s, want %s", svc.Spec.Ports[0].TargetPort.String(), port)
			}
			if _, err := c.RESTClient().Get().AbsPath("/apis/example.com/v1/namespaces/default/widgets").DoRaw(ctx); err != nil {
				t.Errorf("custom resource not served: %v", err)
			}
			body, err := c.RESTClient().Get().AbsPath("/readyz").Param("verbose", "").DoRaw(ctx)
			if err != nil || !strings.Contains(string(body), "[+]poststarthook/start-system-namespaces-controller ok") || !strings.Contains(string(body), "[+]manifests ok") {
				t.Errorf("readyz: %v %s", err, body)
			}
			// The live heap after a forced collection, as hack/memory.sh reads it.
			body, err = c.RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").Param("debug", "1").DoRaw(ctx)
			if err != nil || !strings.Contains(string(body), "# HeapAlloc = ") {
				t.Errorf("heap profile: %v %.200s", err, body)
			}
			cfg := s.RESTConfig()
			cfg.BearerToken = ""
			anon, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := anon.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
				t.Errorf("list without a token: %v, want Unauthorized", err)
			}
		})
	}
}

// TestShutdown ends Run while a watch is open: the watch ends, Run
// returns within the shutdown timeout, and a server never run is
// released by Close.
func TestShutdown(t *testing.T) {
	st := backends[0].New(t)
	s, err := New(Config{API: apiserver.Config{Storage: st}, CertDir: t.TempDir(), AdminUser: "admin", ShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	if err := s.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.CoreV1().Pods("").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	cancel()
	for range w.ResultChan() {
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	if err := s.WaitReady(t.Context()); err == nil {
		t.Error("WaitReady after Run ended: nil")
	}

	idle, err := New(Config{API: apiserver.Config{Storage: backends[0].New(t)}, CertDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	idle.Close()
	idle.Close()
}

// TestManifestRefused: a manifest the API server refuses ends Run with
// its error, and WaitReady reports it rather than waiting.
func TestManifestRefused(t *testing.T) {
	bad := &unstructured.Unstructured{}
	if err := bad.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Not_A_Name","namespace":"default"}}`)); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{API: apiserver.Config{Storage: backends[0].New(t)}, CertDir: t.TempDir(), Manifests: []*unstructured.Unstructured{bad}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	wait, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.WaitReady(wait); err == nil || !strings.Contains(err.Error(), "Not_A_Name") {
		t.Errorf("WaitReady = %v, want the manifest's error", err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "applying manifests") {
		t.Errorf("Run = %v, want the manifest's error", err)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no storage", Config{CertDir: t.TempDir()}, "Storage is nil"},
		{"no certificate", Config{API: apiserver.Config{Storage: backends[0].New(t)}}, "neither a serving certificate"},
		{"bad bind address", Config{API: apiserver.Config{Storage: backends[0].New(t)}, CertDir: t.TempDir(), BindAddress: "256.0.0.1"}, "listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.cfg)
			if err == nil {
				s.Close()
				t.Fatal("New: nil error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestHealth checks the health endpoints' answers for passing, failing and
// excluded checks.
func TestHealth(t *testing.T) {
	fail := healthCheck{Name: "etcd", Check: func(context.Context) error { return io.ErrUnexpectedEOF }}
	h := &health{live: []healthCheck{pingCheck()}, ready: []healthCheck{pingCheck(), fail}, log: slog.New(slog.DiscardHandler)}
	tests := []struct {
		path     string
		wantCode int
		wantBody string
	}{
		{"/livez", 200, "ok"},
		{"/livez?verbose", 200, "[+]ping ok\nlivez check passed\n"},
		{"/readyz", 500, "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed\n"},
		{"/healthz", 500, "[+]ping ok\n[-]etcd failed: reason withheld\nhealthz check failed\n"},
		{"/readyz?exclude=etcd", 200, "ok"},
		{"/readyz/ping", 200, "ok"},
		{"/readyz/etcd", 500, "[-]etcd failed: reason withheld\nreadyz check failed\n"},
		{"/livez/etcd", 404, "404 page not found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req, err := http.NewRequest("GET", tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode || rec.Body.String() != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
		})
	}
	if err := h.readyErr(context.Background()); err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Errorf("readyErr = %v", err)
	}
}

// TestStalledBodies: over the whole path (TLS, the filters, the API
// server), clients that announce a body and never send it are answered at
// the request deadline and their connections closed, with credentials or
// without (a 401 waits for the body in Go's server), while an
// authenticated client's writes are served. 250 rather than the
// filters' test's 1,000: a thousand TLS handshakes take some 13 s under
// the race detector (the test passes with 1,000, in 16 s).
func TestStalledBodies(t *testing.T) {
	const (
		stalled = 250
		timeout = 2 * time.Second
	)
	s, err := New(Config{
		API:       apiserver.Config{Storage: backends[0].New(t)},
		CertDir:   t.TempDir(),
		AdminUser: "admin",
		Filters:   filters.Options{RequestTimeout: timeout},
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.CAPEM)
	tlsConfig := &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}}
	addr := strings.TrimPrefix(s.URL, "https://")

	type answer struct {
		who    string
		code   int
		closed bool
		after  time.Duration
		err    error
	}
	answers := make(chan answer, stalled)
	var wg sync.WaitGroup
	for i := range stalled {
		who, auth, want := "without a token", "", 401
		if i%4 == 3 {
			who, auth, want = "authenticated", "Authorization: Bearer "+s.Token()+"\r\n", 408
		}
		conn, err := tls.Dial("tcp", addr, tlsConfig)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := fmt.Fprintf(conn, "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", auth); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		wg.Go(func() {
			a := answer{who: who}
			defer func() { answers <- a }()
			_ = conn.SetReadDeadline(time.Now().Add(timeout + 30*time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				a.err = err
				return
			}
			a.after = time.Since(sent)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			_, err = br.ReadByte()
			a.code, a.closed = resp.StatusCode, resp.Close && errors.Is(err, io.EOF)
			if a.code != want {
				a.err = fmt.Errorf("answered %d, want %d", a.code, want)
			}
		})
	}

	c, err := kubernetes.NewForConfig(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("beside-%d", i)}}
		if _, err := c.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("write beside %d stalled bodies: %v", stalled, err)
		}
	}

	wg.Wait()
	close(answers)
	var latest time.Duration
	for a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("%s: %v", a.who, a.err)
		case !a.closed:
			t.Errorf("%s: %d, connection left open", a.who, a.code)
		case a.after < timeout-100*time.Millisecond || a.after > timeout+10*time.Second:
			t.Errorf("%s: answered after %v, want at the %v deadline", a.who, a.after, timeout)
		}
		latest = max(latest, a.after)
	}
	t.Logf("%d stalled bodies answered and closed, the last %v after its request (deadline %v)", stalled, latest, timeout)
}
