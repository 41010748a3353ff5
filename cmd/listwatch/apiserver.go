package main

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/component-base/featuregate"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/apiserver/serve"
	"github.com/listwatch/listwatch/internal/kubelog"
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
	// MaxRequestMemory bounds what the writes served at once are
	// estimated to hold (filters.Options.MaxRequestMemory).
	MaxRequestMemory int64
	// PriorityAndFairness queues the requests over the in-flight caps
	// rather than refuse them at once (filters.InFlightQueue).
	PriorityAndFairness bool
	MaxRequestBodyBytes int64
	RequestTimeout      time.Duration
	// DisableAdmissionPlugins names admission plugins not to run.
	DisableAdmissionPlugins []string
	// DisableWatchList turns streaming lists off (--feature-gates=WatchList=false).
	DisableWatchList bool
	// DisableShardedListAndWatch makes the server ignore shardSelector
	// (--feature-gates=ShardedListAndWatch=false).
	DisableShardedListAndWatch bool
	// Profiling serves Go's profiles on /debug/pprof/ (serve.Config.Profiling).
	Profiling bool

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
	fs.BoolVar(&c.PriorityAndFairness, "enable-priority-and-fairness", true, "queue the requests over the in-flight caps for a seat, first come first served, as kube-apiserver's API Priority and Fairness (on by default there) queues them, answering 429 only when the queue is full or the wait too long; false answers 429 at once")
	fs.Int64Var(&c.MaxRequestMemory, "max-request-memory", filters.DefaultMaxRequestMemory, "bytes the writes served at once are estimated to hold together at most (about 2 KiB per value of their bodies); writes over it queue as --enable-priority-and-fairness says (negative: no bound)")
	fs.Int64Var(&c.MaxRequestBodyBytes, "max-request-body-bytes", filters.DefaultMaxRequestBodyBytes, "cap on request body size in bytes")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", filters.DefaultRequestTimeout, "bound on every request but watches, the reading of its body included")
	featureGatesFlag(fs, &c.DisableWatchList, &c.DisableShardedListAndWatch)
	fs.BoolVar(&c.Profiling, "profiling", true, "serve Go's profiles on /debug/pprof/ to authorized users, as kube-apiserver's --profiling (a heap profile with ?gc=1 is the live heap after a forced collection)")
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

// featureGatesFlag adds --feature-gates to fs, which sets
// *disableWatchList and *disableSharded.
func featureGatesFlag(fs *flag.FlagSet, disableWatchList, disableSharded *bool) {
	fs.Func("feature-gates", "comma-separated feature=true|false pairs, as kube-apiserver's; those known are WatchList (streaming lists, on by default) and ShardedListAndWatch (shardSelector on lists and watches, KEP-5866: on by default here, though alpha and off by default in kube-apiserver)", func(v string) error {
		g, err := featureGates(v)
		if err != nil {
			return err
		}
		*disableWatchList = !g.Enabled(watchListGate)
		*disableSharded = !g.Enabled(shardedListAndWatchGate)
		return nil
	})
}

// featureGates are the kube-apiserver feature gates --feature-gates
// takes, parsed by Kubernetes' own featuregate package so that the flag
// reads and fails as kube-apiserver's does.
func featureGates(v string) (featuregate.FeatureGate, error) {
	g := featuregate.NewFeatureGate()
	if err := g.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		watchListGate: {Default: true, PreRelease: featuregate.Beta},
		// Alpha in kube-apiserver v1.37, and off there by default; on
		// here, so that sharded controllers work against `up` and
		// envtest with no flag.
		shardedListAndWatchGate: {Default: true, PreRelease: featuregate.Alpha},
	}); err != nil {
		return nil, err
	}
	if err := g.Set(v); err != nil {
		return nil, err
	}
	return g, nil
}

// The feature gates --feature-gates knows.
const (
	// watchListGate turns streaming lists on and off
	// (apiserver.Config.DisableWatchList).
	watchListGate featuregate.Feature = "WatchList"
	// shardedListAndWatchGate turns shardSelector on and off
	// (apiserver.Config.DisableShardedListAndWatch).
	shardedListAndWatchGate featuregate.Feature = "ShardedListAndWatch"
)

// serviceRangeFlags adds --service-cluster-ip-range and
// --service-node-port-range to fs.
func serviceRangeFlags(fs *flag.FlagSet, clusterIPRange, nodePortRange *string) {
	fs.StringVar(clusterIPRange, "service-cluster-ip-range", "",
		"CIDR of the services' cluster IPs, or two of different IP families, comma-separated, for dual stack (default "+apiserver.DefaultServiceClusterIPRange+")")
	fs.StringVar(nodePortRange, "service-node-port-range", "",
		"port range of the node ports of NodePort and LoadBalancer services, as 30000-32767 or 30000+2768 (default "+apiserver.DefaultServiceNodePortRange+")")
}

// parseFlags adds --log-level to fs and parses args, which may hold no
// positional arguments; it returns the logger, on standard error, that
// --log-level asks for.
func parseFlags(fs *flag.FlagSet, args []string) (*slog.Logger, error) {
	level := new(slog.Level)
	fs.TextVar(level, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return newLogger(os.Stderr, *level), nil
}

// newLogger returns the process's logger; Kubernetes' own packages, which
// log through klog, log through it too, marked logger=kube, their
// informational records at DEBUG (kubeLevels).
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	h := slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})
	kubelog.Route(h)
	return slog.New(h)
}

func runAPIServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("apiserver", flag.ContinueOnError)
	var cfg serverConfig
	cfg.addFlags(fs)
	log, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	srv, err := startServer(ctx, cfg, log)
	if err != nil {
		return err
	}
	log.Info("serving", "url", srv.URL)
	return srv.wait(ctx)
}

// runningServer is a started API server (package serve) over the
// storage the flags chose, which it closes at shutdown.
type runningServer struct {
	// URL is the base URL clients use, e.g. https://127.0.0.1:6443.
	URL string
	// CAPEM verifies the serving certificate.
	CAPEM []byte

	srv   *serve.Server
	api   *apiserver.Server
	store *openedStorage
	// stopRun ends the serving; served is closed when it has ended, with
	// runErr.
	stopRun      context.CancelFunc
	served       chan struct{}
	runErr       error
	shutdownOnce sync.Once
	shutdownErr  error
}

// shutdownTimeout bounds how long a graceful shutdown waits for requests in
// flight before closing their connections.
const shutdownTimeout = 10 * time.Second

// startServer opens storage, builds the server from the flags' files and
// starts serving HTTPS; it returns once the listener is open. ctx only
// bounds the start: the server runs until wait or shutdown ends it.
func startServer(ctx context.Context, cfg serverConfig, log *slog.Logger) (_ *runningServer, err error) {
	// The serving certificate first: a generated one comes with the CA
	// that `up` names as --client-ca-file.
	generated := cfg.TLSCertFile == "" && cfg.TLSKeyFile == ""
	var serving *pki.Serving
	if generated {
		var extra []string
		if ip := net.ParseIP(cfg.BindAddress); cfg.BindAddress != "" && (ip == nil || !ip.IsUnspecified()) {
			extra = append(extra, cfg.BindAddress)
		}
		serving, err = pki.EnsureServing(cfg.CertDir, extra...)
	} else {
		serving, err = pki.LoadServing(cfg.TLSCertFile, cfg.TLSKeyFile)
	}
	if err != nil {
		return nil, err
	}
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
	case generated:
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
	bg, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	store, err := openStorage(ctx, bg, cfg.Storage, log)
	if err != nil {
		stopRun()
		return nil, err
	}
	storageCheck := apiserver.ReadyCheck{Name: "etcd", Check: func(ctx context.Context) error {
		_, err := store.Revision(ctx)
		return err
	}}
	if cfg.Storage.Backend == backendMemory {
		storageCheck.Name = "storage"
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := serve.New(serve.Config{
		API: apiserver.Config{
			Storage:               store,
			ServiceClusterIPRange: cfg.ServiceClusterIPRange, ServiceNodePortRange: cfg.ServiceNodePortRange,
			DisableAdmissionPlugins:    cfg.DisableAdmissionPlugins,
			DisableWatchList:           cfg.DisableWatchList,
			DisableShardedListAndWatch: cfg.DisableShardedListAndWatch,
			ServiceAccountSigningKey:   saKey,
		},
		BindAddress:        cfg.BindAddress,
		Port:               cfg.SecurePort,
		FallbackToFreePort: cfg.FallbackToFreePort,
		Serving:            serving,
		Filters: filters.Options{
			Authenticator:               auth,
			ClientCA:                    clientCA,
			Anonymous:                   cfg.AnonymousAuth,
			MaxRequestBodyBytes:         cfg.MaxRequestBodyBytes,
			RequestTimeout:              cfg.RequestTimeout,
			MaxRequestsInFlight:         cfg.MaxRequestsInFlight,
			MaxMutatingRequestsInFlight: cfg.MaxMutatingRequestsInFlight,
			MaxRequestMemory:            cfg.MaxRequestMemory,
			InFlightQueue:               inFlightQueue(cfg.PriorityAndFairness),
		},
		Metrics:         reg,
		Profiling:       cfg.Profiling,
		ReadyChecks:     []apiserver.ReadyCheck{storageCheck},
		Manifests:       manifests,
		ShutdownTimeout: shutdownTimeout,
		WrapRoutes:      cfg.wrapRoutes,
		Logger:          log,
	})
	if err != nil {
		stopRun()
		if cerr := store.close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	s := &runningServer{URL: srv.URL, CAPEM: srv.CAPEM, srv: srv, api: srv.API, store: store, stopRun: stopRun, served: make(chan struct{})}
	go func() {
		defer close(s.served)
		s.runErr = srv.Run(bg)
	}()
	return s, nil
}

// waitReady blocks until the readiness checks pass or ctx ends.
func (s *runningServer) waitReady(ctx context.Context) error {
	return s.srv.WaitReady(ctx)
}

// wait serves until ctx ends or the listener fails, then shuts the server
// down; it returns the serving error, if any, or the shutdown's.
func (s *runningServer) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-s.served:
	}
	return s.shutdown()
}

// shutdown stops the server gracefully (serve.Server.Run's shutdown),
// then closes the storage. It is idempotent.
func (s *runningServer) shutdown() error {
	s.shutdownOnce.Do(func() {
		s.stopRun()
		<-s.served
		s.shutdownErr = errors.Join(s.runErr, s.store.close())
	})
	return s.shutdownErr
}

// inFlightQueue is the queue of the requests over the in-flight caps:
// kube-apiserver's defaults when on, none when off.
func inFlightQueue(on bool) filters.InFlightQueue {
	if !on {
		return filters.InFlightQueue{}
	}
	return filters.PriorityAndFairnessQueue
}
