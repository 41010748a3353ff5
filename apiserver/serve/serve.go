// Package serve assembles a serving Kubernetes API server from an
// apiserver.Server: the listener on 127.0.0.1 or a given address, the
// serving certificate, the filters of kube-apiserver (authentication by
// token, client certificate, service account token or anonymously,
// authorization by the server's RBAC, body and in-flight caps, request
// timeout), /livez, /readyz and /healthz, /metrics when asked, the
// CustomResourceDefinitions and other manifests applied at start, and a
// graceful shutdown. `listwatch apiserver` and `listwatch up`, envtest,
// the benchmarks and the compatibility tests all serve through it, so
// what a test meets is what the binary serves.
//
// What kube-apiserver makes at start (the system namespaces, the
// "kubernetes" Service and its endpoints, the bootstrap RBAC policy, the
// system PriorityClasses) is the apiserver package's own start-up; serve
// tells it the address it advertises.
package serve

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/internal/pki"
)

// Config is what New needs; API.Storage is required, and one of Serving
// or CertDir.
type Config struct {
	// API configures the API server. Its AdvertiseAddress, when zero, is
	// the listener's (127.0.0.1 for a wildcard bind).
	API apiserver.Config
	// BindAddress is the IP to listen on; "" is 127.0.0.1.
	BindAddress string
	// Port is the HTTPS port; 0 picks a free one.
	Port int
	// FallbackToFreePort picks a free port when Port is taken rather than
	// failing.
	FallbackToFreePort bool

	// Serving is the serving certificate; nil: one of a CA of its own,
	// generated and kept under CertDir (pki.EnsureServing), covering
	// localhost, 127.0.0.1 and a specific BindAddress.
	Serving *pki.Serving
	CertDir string

	// Filters are the filters' options. New sets Authorizer (the API
	// server's), Shutdown and Logger, and adds the API server's service
	// account tokens and AdminUser's token to Authenticator; the rest is
	// the caller's (zero caps are no caps: see filters.Options).
	Filters filters.Options
	// AdminUser, when set, is given a random bearer token (Server.Token)
	// in the group system:masters, as a test's or a benchmark's client
	// authenticates.
	AdminUser string
	// Metrics, when set, receives the request metrics and the watch
	// caches' (apiserver.Server.Collector), served with the rest of it on
	// /metrics.
	Metrics *prometheus.Registry
	// Profiling serves Go's profiles on /debug/pprof/, as kube-apiserver
	// does with --profiling, to authorized users: a heap profile with
	// gc=1 is the live heap after a forced collection.
	Profiling bool
	// ReadyChecks are more checks of /readyz (the storage's, named as
	// kube-apiserver names it: "etcd"), beside the API server's own.
	ReadyChecks []apiserver.ReadyCheck

	// Manifests are applied by Run once the API server's start-up is
	// done (apiserver.Server.Apply), and the server is not ready before
	// they are: CustomResourceDefinitions are served by then. A manifest
	// refused ends Run with its error.
	Manifests []*unstructured.Unstructured

	// ShutdownTimeout bounds how long Run's shutdown waits for the
	// requests in flight; 0 closes every connection at once, as a test's
	// server has no client to wait for.
	ShutdownTimeout time.Duration
	// WrapRoutes, when set, wraps the routes inside the filters: a test
	// observes or holds the requests that reach the API with it.
	WrapRoutes func(http.Handler) http.Handler
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// Server is an API server ready to serve, or serving, over HTTPS.
type Server struct {
	// URL is the base URL clients use, https://host:port.
	URL string
	// CAPEM verifies the serving certificate.
	CAPEM []byte
	// API is the API server behind the filters.
	API *apiserver.Server

	log             *slog.Logger
	ln              net.Listener
	http            *http.Server
	health          *health
	token           string
	shutdownTimeout time.Duration
	// endLongRunning ends the watches at shutdown.
	endLongRunning context.CancelFunc
	shuttingDown   atomic.Bool
	// handling counts the requests being handled, which the shutdown
	// waits for, as opposed to idle connections, which it need not.
	handling atomic.Int64
	// served is closed when Run has returned; runErr is its error.
	ran       atomic.Bool
	served    chan struct{}
	runErr    error
	closeOnce sync.Once
	// manifests are what Run applies; applied is closed once it has.
	manifests []*unstructured.Unstructured
	applied   chan struct{}
}

// New builds the server: certificate, listener, API server and filters.
// It starts nothing: Run serves, runs the API server's start-up
// (namespaces, RBAC policy, …) and applies the manifests; WaitReady waits
// for them. Close releases a server whose Run is never called.
func New(cfg Config) (_ *Server, err error) {
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	s := &Server{log: log, served: make(chan struct{}), shutdownTimeout: cfg.ShutdownTimeout, endLongRunning: func() {},
		manifests: cfg.Manifests, applied: make(chan struct{})}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	host := cfg.BindAddress
	if host == "" {
		host = "127.0.0.1"
	}
	serving := cfg.Serving
	if serving == nil {
		if cfg.CertDir == "" {
			return nil, errors.New("serve: neither a serving certificate nor a directory to make one in")
		}
		var extra []string
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			extra = append(extra, host)
		}
		if serving, err = pki.EnsureServing(cfg.CertDir, extra...); err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
	}
	s.CAPEM = serving.CAPEM

	if s.ln, err = listen(host, cfg.Port, cfg.FallbackToFreePort); err != nil {
		return nil, err
	}
	port := s.ln.Addr().(*net.TCPAddr).Port
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		// Clients of a wildcard bind reach it on loopback, which the
		// generated certificate covers.
		host = "127.0.0.1"
	}
	s.URL = "https://" + net.JoinHostPort(host, strconv.Itoa(port))

	apiCfg := cfg.API
	if apiCfg.Logger == nil {
		apiCfg.Logger = log
	}
	if !apiCfg.AdvertiseAddress.IsValid() {
		if addr, err := netip.ParseAddr(host); err == nil {
			apiCfg.AdvertiseAddress = netip.AddrPortFrom(addr, uint16(port))
		}
	}
	if s.API, err = apiserver.New(apiCfg); err != nil {
		return nil, err
	}

	authn := filters.Tokens{s.API.ServiceAccountTokens()}
	if cfg.Filters.Authenticator != nil {
		authn = append(filters.Tokens{cfg.Filters.Authenticator}, authn...)
	}
	if cfg.AdminUser != "" {
		s.token = rand.Text()
		var admin filters.TokenFile
		if err := admin.Add(s.token, filters.User{Name: cfg.AdminUser, UID: cfg.AdminUser, Groups: []string{"system:masters"}}); err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		authn = append(authn, &admin)
	}
	fo := cfg.Filters
	fo.Authenticator = authn
	s.API.SetTokenAuthenticator(authn)
	fo.Authorizer = s.API.Authorizer()
	fo.Logger = log
	longRunning, endLongRunning := context.WithCancel(context.Background())
	s.endLongRunning = endLongRunning
	fo.Shutdown = longRunning

	s.health = &health{log: log, live: []healthCheck{pingCheck()}, ready: []healthCheck{pingCheck()}}
	s.health.ready = append(s.health.ready, cfg.ReadyChecks...)
	// kube-apiserver's post-start hooks: not ready before them.
	s.health.ready = append(s.health.ready, s.API.ReadyChecks()...)
	if len(s.manifests) > 0 {
		s.health.ready = append(s.health.ready, healthCheck{Name: "manifests", Check: func(context.Context) error {
			select {
			case <-s.applied:
				return nil
			default:
				return errors.New("not applied yet")
			}
		}})
	}
	s.health.ready = append(s.health.ready, healthCheck{Name: "shutdown", Check: func(context.Context) error {
		if s.shuttingDown.Load() {
			return errors.New("server is shutting down")
		}
		return nil
	}})

	var metricsHandler http.Handler
	if cfg.Metrics != nil {
		if fo.Metrics, err = filters.NewMetrics(cfg.Metrics); err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		if err := cfg.Metrics.Register(s.API.Collector()); err != nil {
			return nil, fmt.Errorf("serve: watch cache metrics: %w", err)
		}
		metricsHandler = promhttp.HandlerFor(cfg.Metrics, promhttp.HandlerOpts{})
	}
	api := s.API.Handler()
	var profiles http.Handler
	if cfg.Profiling {
		profiles = profilesHandler()
	}
	var routes http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case metricsHandler != nil && r.URL.Path == "/metrics":
			metricsHandler.ServeHTTP(w, r)
		case profiles != nil && (r.URL.Path == "/debug/pprof" || strings.HasPrefix(r.URL.Path, "/debug/pprof/")):
			profiles.ServeHTTP(w, r)
		case isHealthPath(r.URL.Path):
			s.health.ServeHTTP(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
	if cfg.WrapRoutes != nil {
		routes = cfg.WrapRoutes(routes)
	}
	handler := filters.Chain(routes, fo)
	tlsConfig := serving.TLSConfig()
	if fo.ClientCA != nil {
		// Verified by the authentication filter, as kube-apiserver does:
		// a certificate it does not trust is refused there with a 401.
		tlsConfig.ClientAuth = tls.RequestClientCert
	}
	s.http = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.handling.Add(1)
			defer s.handling.Add(-1)
			handler.ServeHTTP(w, r)
		}),
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		// TLS handshake errors from port scanners and clients that do not
		// trust the CA yet are not worth an unstructured line each.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// profilesHandler serves net/http/pprof's pages under /debug/pprof/, as
// kube-apiserver's profiling routes do (/debug/pprof redirects there).
func profilesHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/debug/pprof", http.RedirectHandler("/debug/pprof/", http.StatusFound))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// listen opens the TCP listener, on a free port when port is 0 or, with
// fallback, when port is taken.
func listen(host string, port int, fallback bool) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil && fallback && port != 0 && errors.Is(err, syscall.EADDRINUSE) {
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	if err != nil {
		return nil, fmt.Errorf("serve: listen: %w", err)
	}
	return ln, nil
}

// Token is AdminUser's bearer token; "" without AdminUser.
func (s *Server) Token() string { return s.token }

// RESTConfig reaches the server as AdminUser, with no client-side rate
// limit: what a kubeconfig of the server gives client-go.
func (s *Server) RESTConfig() *rest.Config {
	return &rest.Config{Host: s.URL, BearerToken: s.token, TLSClientConfig: rest.TLSClientConfig{CAData: s.CAPEM}, QPS: -1}
}

// Run runs the API server, serves, and applies the manifests once the
// API server's start-up is done, until ctx ends, serving fails or a
// manifest is refused; then it shuts down: readiness fails, the listener
// closes, watches end, the requests in flight get ShutdownTimeout to
// finish, and the API server stops (its storage is the caller's). It
// returns the serving or manifest error, if any, or the shutdown's; it may
// be called once.
func (s *Server) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return errors.New("serve: Run called twice")
	}
	// The API server and the manifests' application end with apiCtx,
	// after the HTTP server.
	apiCtx, stopAPI := context.WithCancel(context.Background())
	var api sync.WaitGroup
	api.Go(func() {
		if err := s.API.Run(apiCtx); err != nil {
			s.log.Error("API server", "err", err)
		}
	})
	applied := make(chan error, 1)
	api.Go(func() { applied <- s.applyManifests(apiCtx) })
	applyErr := (<-chan error)(applied)
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.http.ServeTLS(s.ln, "", "") }()
	var errs []error
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case err := <-serveErr:
			serveErr <- err
			errs = append(errs, fmt.Errorf("serve: %w", err))
			running = false
		case err := <-applyErr:
			applyErr = nil // applied (or refused) once
			if err != nil {
				errs = append(errs, err)
				running = false
			}
		}
	}
	s.log.Info("shutting down")
	s.shuttingDown.Store(true)
	s.endLongRunning()
	if err := s.shutdownHTTP(); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	if err := <-serveErr; len(errs) == 0 && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}
	stopAPI()
	api.Wait()
	s.runErr = errors.Join(errs...)
	close(s.served)
	s.log.Info("stopped")
	return s.runErr
}

// shutdownHTTP shuts the HTTP server down, gracefully for up to
// ShutdownTimeout, waiting for the requests being handled, not for
// connections that carry none: an HTTP/2 connection that was being set up
// as the shutdown began never hears of it (net/http tells only the
// connections it already serves), and would hold the shutdown for its
// whole timeout while its client keeps it open. Once no request has been
// handled for a moment, what is left is closed.
func (s *Server) shutdownHTTP() error {
	if s.shutdownTimeout <= 0 {
		return s.http.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.http.Shutdown(ctx) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	idle := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				_ = s.http.Close()
			}
			return err
		case <-tick.C:
		}
		if s.handling.Load() > 0 {
			idle = 0
			continue
		}
		// Two ticks in a row without a request: a graceful HTTP/2
		// shutdown (GOAWAY, then the client's close) had its chance.
		if idle++; idle >= 2 {
			_ = s.http.Close()
			return <-done
		}
	}
}

// Close releases a server whose Run was never called (Run releases what
// it ran); it may be called more than once, and after Run.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.ran.Load() {
			return
		}
		s.endLongRunning()
		if s.ln != nil {
			_ = s.ln.Close()
		}
	})
}

// applyManifests applies the manifests once the API server's start-up is
// done, as envtest installs its CRDs after the server is up: they may hold
// objects of the default namespace, or RBAC objects that only escalate
// what the bootstrap policy grants. It returns when ctx ends.
func (s *Server) applyManifests(ctx context.Context) error {
	if len(s.manifests) > 0 {
		if err := s.API.WaitReady(ctx); err != nil {
			return nil // stopped first
		}
		if err := s.API.Apply(ctx, s.manifests); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("serve: applying manifests: %w", err)
		}
	}
	close(s.applied)
	return nil
}

// WaitReady blocks until the readiness checks pass (nil), Run has ended
// or ctx ends, checking whenever the start-up may have progressed.
func (s *Server) WaitReady(ctx context.Context) error {
	if err := s.API.WaitReady(ctx); err != nil {
		return err
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		err := s.health.readyErr(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("serve: not ready: %w (%w)", err, ctx.Err())
		case <-s.served:
			return fmt.Errorf("serve: stopped before it was ready: %w", errors.Join(s.runErr, err))
		case <-tick.C:
		}
	}
}
