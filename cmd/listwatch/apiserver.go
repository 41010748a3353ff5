package main

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/internal/pki"
)

func init() {
	register("apiserver", "run the Kubernetes-compatible API server", runAPIServer)
}

// serverConfig is everything startServer needs; the `apiserver` flags fill
// it, and `up` fills it for a local cluster.
type serverConfig struct {
	BindAddress string
	// SecurePort is the HTTPS port; 0 picks a free one.
	SecurePort int
	// FallbackToFreePort picks a free port when SecurePort is taken rather
	// than failing (`up`).
	FallbackToFreePort bool

	Storage storageConfig

	// TokenAuthFile is a static token file; Tokens, when set, is used
	// instead.
	TokenAuthFile string
	Tokens        filters.TokenAuthenticator
	// ClientCAFile is the CA whose client certificates authenticate their
	// subject (common name: user, organizations: groups).
	ClientCAFile string
	// ServiceAccountKeyFile is the PEM private key that signs service
	// account tokens; "" is a key generated (and kept) under CertDir when
	// the serving certificate is generated there too, else one of the
	// process's lifetime.
	ServiceAccountKeyFile string
	// AnonymousAuth serves requests without credentials as system:anonymous
	// (for RBAC to decide on). Without it, and without tokens or a client
	// CA, the server refuses to start.
	AnonymousAuth bool

	// TLSCertFile and TLSKeyFile are the serving certificate; without them
	// a self-signed one is generated (and kept) under CertDir.
	TLSCertFile, TLSKeyFile string
	CertDir                 string

	// CustomResourcesFile is a file or directory of CustomResourceDefinitions
	// (and other objects) applied at start-up; empty: none.
	CustomResourcesFile string

	// ServiceClusterIPRange and ServiceNodePortRange are where services
	// get their cluster IPs and node ports; "" takes the defaults.
	ServiceClusterIPRange string
	ServiceNodePortRange  string

	MaxRequestsInFlight         int
	MaxMutatingRequestsInFlight int
	MaxRequestBodyBytes         int64
	RequestTimeout              time.Duration
	// DisableAdmissionPlugins names admission plugins not to run.
	DisableAdmissionPlugins []string

	// wrapRoutes, when set, wraps the routes inside the filter chain: a
	// test holds requests in their in-flight slots with it.
	wrapRoutes func(http.Handler) http.Handler
}

func (c *serverConfig) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.BindAddress, "bind-address", "127.0.0.1", "IP address to serve HTTPS on (0.0.0.0 for all interfaces)")
	fs.IntVar(&c.SecurePort, "secure-port", 6443, "HTTPS port; 0 picks a free port")
	c.Storage.addFlags(fs)
	fs.StringVar(&c.TokenAuthFile, "token-auth-file", "", "static token file (token,user,uid,\"group1,group2\" per line)")
	fs.StringVar(&c.ClientCAFile, "client-ca-file", "", "CA certificate(s) whose client certificates authenticate their subject: common name the user, organizations the groups")
	fs.StringVar(&c.ServiceAccountKeyFile, "service-account-signing-key-file", "", "PEM private key (ECDSA or RSA) signing service account tokens; default: generated under --cert-dir with the serving certificate")
	fs.BoolVar(&c.AnonymousAuth, "anonymous-auth", false, "serve requests without credentials as system:anonymous in system:unauthenticated, for RBAC to decide on; needed to start with no --token-auth-file or --client-ca-file")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "serving certificate (PEM, chain allowed); default: self-signed under --cert-dir")
	fs.StringVar(&c.TLSKeyFile, "tls-private-key-file", "", "private key of --tls-cert-file")
	fs.StringVar(&c.CertDir, "cert-dir", "./.listwatch/pki", "directory of the generated CA and serving certificate")
	fs.StringVar(&c.CustomResourcesFile, "custom-resources", "", "YAML or JSON file, or directory of them, of CustomResourceDefinitions and other objects applied at start-up (as envtest's CRD paths)")
	serviceRangeFlags(fs, &c.ServiceClusterIPRange, &c.ServiceNodePortRange)
	fs.IntVar(&c.MaxRequestsInFlight, "max-requests-inflight", filters.DefaultMaxRequestsInFlight, "cap on concurrent read-only requests, watches excluded (0: none)")
	fs.IntVar(&c.MaxMutatingRequestsInFlight, "max-mutating-requests-inflight", filters.DefaultMaxMutatingRequestsInFlight, "cap on concurrent writes (0: none)")
	fs.Int64Var(&c.MaxRequestBodyBytes, "max-request-body-bytes", filters.DefaultMaxRequestBodyBytes, "cap on request body size in bytes")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", filters.DefaultRequestTimeout, "bound on every request but watches, the reading of its body included")
	fs.Func("disable-admission-plugins", "comma-separated admission plugins not to run, as kube-apiserver's (ServiceAccount, where no controller-manager makes the default service accounts)", func(v string) error {
		c.DisableAdmissionPlugins = nil
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				c.DisableAdmissionPlugins = append(c.DisableAdmissionPlugins, p)
			}
		}
		return nil
	})
}

// serviceRangeFlags adds --service-cluster-ip-range and
// --service-node-port-range to fs.
func serviceRangeFlags(fs *flag.FlagSet, clusterIPRange, nodePortRange *string) {
	fs.StringVar(clusterIPRange, "service-cluster-ip-range", "",
		"CIDR of the services' cluster IPs, or two of different IP families, comma-separated, for dual stack (default "+apiserver.DefaultServiceClusterIPRange+")")
	fs.StringVar(nodePortRange, "service-node-port-range", "",
		"port range of the node ports of NodePort and LoadBalancer services, as 30000-32767 or 30000+2768 (default "+apiserver.DefaultServiceNodePortRange+")")
}

// logLevelFlag adds --log-level to fs.
func logLevelFlag(fs *flag.FlagSet) *slog.Level {
	level := new(slog.Level)
	fs.TextVar(level, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	return level
}

// newLogger returns the process's logger; Kubernetes' own packages, which
// log through klog, log through it too.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	l := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	klog.SetSlogLogger(l)
	return l
}

func runAPIServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("apiserver", flag.ContinueOnError)
	var cfg serverConfig
	cfg.addFlags(fs)
	level := logLevelFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	log := newLogger(os.Stderr, *level)
	srv, err := startServer(ctx, cfg, log)
	if err != nil {
		return err
	}
	log.Info("serving", "url", srv.URL)
	return srv.wait(ctx)
}

// runningServer is a started API server: HTTPS listener, filters, health
// and metrics endpoints, the apiserver routes and the storage under them.
type runningServer struct {
	// URL is the base URL clients use, e.g. https://127.0.0.1:6443.
	URL string
	// CAPEM verifies the serving certificate.
	CAPEM []byte

	log      *slog.Logger
	http     *http.Server
	api      *apiserver.Server
	store    *openedStorage
	health   *health
	serveErr chan error
	// endLongRunning ends the watches at shutdown; stopBackground the
	// server's own goroutines (bootstrap, apiserver caches).
	endLongRunning context.CancelFunc
	stopBackground context.CancelFunc
	background     sync.WaitGroup
	shuttingDown   atomic.Bool
	bootstrapped   atomic.Bool
	// handling counts the requests being handled, which shutdown waits
	// for, as opposed to connections, which it need not.
	handling     atomic.Int64
	shutdownOnce sync.Once
	shutdownErr  error
}

// shutdownTimeout bounds how long a graceful shutdown waits for requests in
// flight before closing their connections.
const shutdownTimeout = 10 * time.Second

// startServer opens storage, builds the handler chain and starts serving
// HTTPS; it returns once the listener is open. ctx only bounds the start:
// the server runs until wait or shutdown ends it.
func startServer(ctx context.Context, cfg serverConfig, log *slog.Logger) (_ *runningServer, err error) {
	s := &runningServer{log: log, serveErr: make(chan error, 1)}
	var cleanup []func()
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()

	var serving *pki.Serving
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" {
		serving, err = pki.LoadServing(cfg.TLSCertFile, cfg.TLSKeyFile)
	} else {
		var extra []string
		if cfg.BindAddress != "" && !net.ParseIP(cfg.BindAddress).IsUnspecified() {
			extra = append(extra, cfg.BindAddress)
		}
		serving, err = pki.EnsureServing(cfg.CertDir, extra...)
	}
	if err != nil {
		return nil, err
	}
	s.CAPEM = serving.CAPEM

	auth := cfg.Tokens
	if auth == nil && cfg.TokenAuthFile != "" {
		tf, err := filters.LoadTokenFile(cfg.TokenAuthFile)
		if err != nil {
			return nil, err
		}
		auth = tf
	}
	var clientCA *x509.CertPool
	if cfg.ClientCAFile != "" {
		caPEM, err := os.ReadFile(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		if clientCA, err = pki.CertPool(caPEM); err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
	}
	// The key of the service account tokens: given, or kept with the
	// generated certificates so that tokens outlive a restart.
	var saKey crypto.Signer
	switch {
	case cfg.ServiceAccountKeyFile != "":
		saKey, err = pki.LoadSigner(cfg.ServiceAccountKeyFile)
	case cfg.TLSCertFile == "" && cfg.TLSKeyFile == "":
		saKey, err = pki.EnsureServiceAccountKey(cfg.CertDir)
	}
	if err != nil {
		return nil, err
	}
	if err := apiserver.CheckServiceRanges(cfg.ServiceClusterIPRange, cfg.ServiceNodePortRange); err != nil {
		return nil, err
	}
	if auth == nil && clientCA == nil && !cfg.AnonymousAuth {
		return nil, errors.New("no authentication: give --token-auth-file or --client-ca-file, or --anonymous-auth to serve every request as system:anonymous")
	}
	var manifests []*unstructured.Unstructured
	if cfg.CustomResourcesFile != "" {
		if manifests, err = apiserver.LoadManifests(cfg.CustomResourcesFile); err != nil {
			return nil, err
		}
	}

	// The server's own goroutines outlive ctx, which only bounds the start.
	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	s.stopBackground = stopBackground
	cleanup = append(cleanup, stopBackground)

	store, err := openStorage(ctx, bg, cfg.Storage, log)
	if err != nil {
		return nil, err
	}
	s.store = store
	cleanup = append(cleanup, func() { store.close() })

	api, err := apiserver.New(bg, apiserver.Config{
		Storage: store, Logger: log,
		ServiceClusterIPRange: cfg.ServiceClusterIPRange, ServiceNodePortRange: cfg.ServiceNodePortRange,
		DisableAdmissionPlugins:  cfg.DisableAdmissionPlugins,
		ServiceAccountSigningKey: saKey,
	})
	if err != nil {
		return nil, err
	}
	s.api = api
	cleanup = append(cleanup, api.Close)
	if err := api.Apply(ctx, manifests); err != nil {
		return nil, fmt.Errorf("--custom-resources: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := filters.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	storageCheck := healthCheck{name: "etcd", check: func(ctx context.Context) error {
		_, err := store.Revision(ctx)
		return err
	}}
	if cfg.Storage.Backend == backendMemory {
		storageCheck.name = "storage"
	}
	s.health = &health{
		log:  log,
		live: []healthCheck{pingCheck()},
		ready: []healthCheck{pingCheck(), storageCheck,
			{name: "poststarthook/bootstrap-namespaces", check: func(context.Context) error {
				if !s.bootstrapped.Load() {
					return errors.New("default namespaces not created yet")
				}
				return nil
			}},
			{name: "shutdown", check: func(context.Context) error {
				if s.shuttingDown.Load() {
					return errors.New("server is shutting down")
				}
				return nil
			}},
		},
	}
	// kube-apiserver's post-start hooks (informers synced, system
	// PriorityClasses, bootstrap RBAC policy): not ready before them.
	for _, c := range api.ReadyChecks() {
		s.health.ready = append(s.health.ready, healthCheck{name: c.Name, check: c.Check})
	}
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/metrics":
			metricsHandler.ServeHTTP(w, r)
		case isHealthPath(r.URL.Path):
			s.health.ServeHTTP(w, r)
		default:
			api.Handler().ServeHTTP(w, r)
		}
	})
	longRunning, endLongRunning := context.WithCancel(context.Background())
	s.endLongRunning = endLongRunning
	cleanup = append(cleanup, endLongRunning)
	var routes http.Handler = root
	if cfg.wrapRoutes != nil {
		routes = cfg.wrapRoutes(root)
	}
	handler := filters.Chain(routes, filters.Options{
		Authenticator:               filters.Tokens{auth, api.ServiceAccountTokens()},
		ClientCA:                    clientCA,
		Anonymous:                   cfg.AnonymousAuth,
		Authorizer:                  api.Authorizer(),
		MaxRequestBodyBytes:         cfg.MaxRequestBodyBytes,
		RequestTimeout:              cfg.RequestTimeout,
		MaxRequestsInFlight:         cfg.MaxRequestsInFlight,
		MaxMutatingRequestsInFlight: cfg.MaxMutatingRequestsInFlight,
		Metrics:                     metrics,
		Logger:                      log,
		Shutdown:                    longRunning,
	})

	ln, err := listen(cfg.BindAddress, cfg.SecurePort, cfg.FallbackToFreePort)
	if err != nil {
		return nil, err
	}
	host := cfg.BindAddress
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		// Clients of a wildcard bind reach it on loopback, which the
		// generated certificate covers.
		host = "127.0.0.1"
	}
	s.URL = "https://" + net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handling.Add(1)
		defer s.handling.Add(-1)
		handler.ServeHTTP(w, r)
	})
	tlsConfig := serving.TLSConfig()
	if clientCA != nil {
		// Verified by the authentication filter, as kube-apiserver does:
		// a certificate it does not trust is refused there with a 401.
		tlsConfig.ClientAuth = tls.RequestClientCert
	}
	s.http = &http.Server{
		Handler:           counted,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		// TLS handshake errors from port scanners and clients that do not
		// trust the CA yet are not worth an unstructured line each.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() { s.serveErr <- s.http.ServeTLS(ln, "", "") }()

	s.background.Go(func() { s.bootstrap(bg) })
	return s, nil
}

// listen opens the TCP listener, on a free port when port is 0 or, with
// fallback, when port is taken.
func listen(host string, port int, fallback bool) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil && fallback && port != 0 && errors.Is(err, syscall.EADDRINUSE) {
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

// waitReady blocks until the readiness checks pass or ctx ends, checking
// whenever the bootstrap may have progressed.
func (s *runningServer) waitReady(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := s.health.readyErr(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server not ready: %w (%w)", err, ctx.Err())
		case err := <-s.serveErr:
			s.serveErr <- err
			return fmt.Errorf("server stopped before it was ready: %w", err)
		case <-tick.C:
		}
	}
}

// wait serves until ctx ends or the listener fails, then shuts the server
// down; it returns the serving error, if any, or the shutdown's.
func (s *runningServer) wait(ctx context.Context) error {
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-s.serveErr:
		s.serveErr <- serveErr
		serveErr = fmt.Errorf("serve: %w", serveErr)
	}
	return errors.Join(serveErr, s.shutdown())
}

// shutdown stops the server gracefully: readiness fails, the listener
// closes, watches end, requests in flight get shutdownTimeout to finish,
// then the API routes and the storage close. It is idempotent.
func (s *runningServer) shutdown() error {
	s.shutdownOnce.Do(func() {
		s.log.Info("shutting down")
		s.shuttingDown.Store(true)
		s.endLongRunning()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		var errs []error
		if err := s.shutdownHTTP(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			s.http.Close()
		}
		if err := <-s.serveErr; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("serve: %w", err))
		}
		s.stopBackground()
		s.background.Wait()
		s.api.Close()
		if err := s.store.close(); err != nil {
			errs = append(errs, err)
		}
		s.shutdownErr = errors.Join(errs...)
		s.log.Info("stopped")
	})
	return s.shutdownErr
}

// shutdownHTTP shuts the HTTP server down gracefully, waiting for the
// requests being handled, not for connections that carry none: an HTTP/2
// connection that was being set up as the shutdown began never hears of it
// (net/http tells only the connections it already serves), and would hold
// the shutdown for its whole timeout while its client keeps it open. Once
// no request has been handled for a moment, what is left is closed.
func (s *runningServer) shutdownHTTP(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.http.Shutdown(ctx) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	idle := 0
	for {
		select {
		case err := <-done:
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
			s.http.Close()
			return <-done
		}
	}
}

// bootstrapNamespaces are created at start, as kube-apiserver does
// (default by its bootstrap controller, the others by its system
// namespaces controller).
var bootstrapNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// bootstrap creates the bootstrap namespaces through the API routes (so
// that they get everything a client-made namespace gets), retrying while
// the storage is unreachable, until they exist or ctx ends.
func (s *runningServer) bootstrap(ctx context.Context) {
	for _, ns := range bootstrapNamespaces {
		for attempt := 0; ; attempt++ {
			err := s.createNamespace(ctx, ns)
			if err == nil {
				break
			}
			if attempt == 0 || attempt%20 == 0 {
				s.log.Warn("creating namespace; will retry", "namespace", ns, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	s.bootstrapped.Store(true)
	s.createKubernetesService(ctx)
}

// createKubernetesService creates the "kubernetes" service in the default
// namespace as kube-apiserver's kubernetes service controller does: the
// first IP of the service cluster IP range, port https/443 to the secure
// port, no selector. An existing one is left as it is; one that cannot be
// made (its IP held by another service) is logged. Unlike kube's
// controller this runs once, at start, and makes no Endpoints.
func (s *runningServer) createKubernetesService(ctx context.Context) {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.URL, "https://"))
	if err != nil {
		return
	}
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"kubernetes","labels":{"component":"apiserver","provider":"kubernetes"}},`+
		`"spec":{"type":"ClusterIP","clusterIP":%q,"ipFamilyPolicy":"SingleStack","sessionAffinity":"None","ports":[{"name":"https","protocol":"TCP","port":443,"targetPort":%s}]}}`,
		s.api.KubernetesServiceIP().String(), port)
	// A restart finds it stored: its cluster IP is then taken (by itself),
	// and a create would be refused for that before its name.
	if req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/namespaces/default/services/kubernetes", nil); err == nil {
		var resp responseBuffer
		s.api.Handler().ServeHTTP(&resp, req)
		if resp.code() == http.StatusOK {
			return
		}
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/api/v1/namespaces/default/services", strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		var resp responseBuffer
		s.api.Handler().ServeHTTP(&resp, req)
		switch code := resp.code(); {
		case code == http.StatusCreated || code == http.StatusConflict:
			return
		case code < http.StatusInternalServerError:
			s.log.Warn("cannot create the kubernetes service", "code", code, "body", strings.TrimSpace(resp.body.String()))
			return
		case attempt == 0 || attempt%20 == 0:
			s.log.Warn("creating the kubernetes service; will retry", "code", code, "body", strings.TrimSpace(resp.body.String()))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// createNamespace creates namespace ns by calling the API routes in-process;
// an existing namespace is success.
func (s *runningServer) createNamespace(ctx context.Context, ns string) error {
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, ns)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/api/v1/namespaces", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	var resp responseBuffer
	s.api.Handler().ServeHTTP(&resp, req)
	switch resp.code() {
	case http.StatusCreated, http.StatusOK, http.StatusConflict:
		return nil
	}
	return fmt.Errorf("create namespace %s: %d %s", ns, resp.code(), strings.TrimSpace(resp.body.String()))
}
