// Package envtest runs a Kubernetes API server, and if asked the
// controllers of a kube-controller-manager, inside a Go test's process:
// what controller-runtime's envtest does with kube-apiserver and etcd
// binaries, in milliseconds rather than seconds, with no download, no
// fixed port and no process left behind, and with the controllers envtest
// has not (the garbage collector, the namespace, ReplicaSet and Deployment
// controllers, pods that run).
//
//	func TestMyController(t *testing.T) {
//		env := envtest.Start(t, envtest.Options{
//			CRDPaths:    []string{"../config/crd/bases"},
//			Controllers: controllermanager.AllControllers(),
//		})
//		// env.Config is a *rest.Config for client-go and controller-runtime;
//		// env.Kubeconfig a file for kubectl; env.Client listwatch's client.
//	}
//
// The server is listwatch's own (package apiserver), as `listwatch up` runs
// it: HTTPS on 127.0.0.1 with a port of its own, a bearer token for a
// member of system:masters, kube's RBAC authorizer deciding every request
// (so a controller's own service account can be tested through
// impersonation), the in-memory store (or an embedded etcd),
// kube-apiserver's defaulting, validation and admission (ServiceAccount
// admission off unless the serviceaccount controller runs, as envtest
// has it), and what kube-apiserver makes at start: the namespaces
// default, kube-system, kube-public and kube-node-lease, the "kubernetes"
// Service, the bootstrap RBAC policy (package serve and the apiserver's
// own start-up, as `listwatch up` has them). Like `listwatch up`, it
// answers lists and watches with a shardSelector as kube-apiserver v1.37
// with its alpha ShardedListAndWatch gate on, so that sharded informers
// (informers.Shard) can be tested. Every
// Start is a server of its own, isolated from the others, so tests that
// start one each may run in parallel. Everything stops when the test ends
// (t.Cleanup), leaving no goroutine behind.
package envtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/apiserver/serve"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/cronjob"
	"github.com/listwatch/listwatch/controllers/job"
	"github.com/listwatch/listwatch/controllers/namespace"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
	"github.com/listwatch/listwatch/controllers/ttlafterfinished"
	"github.com/listwatch/listwatch/internal/defaults"
	"github.com/listwatch/listwatch/internal/kubeconfig"
	"github.com/listwatch/listwatch/internal/pki"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/etcd"
	"github.com/listwatch/listwatch/storage/memory"
)

// Options configure an Environment. The zero value starts a bare API
// server on the in-memory store, as envtest's default.
type Options struct {
	// Etcd stores the objects in an embedded etcd member, in the test's
	// temporary directory, rather than in memory: for tests of what only
	// etcd does (compaction, durability). It adds about a tenth of a
	// second.
	Etcd bool
	// CRDPaths are files or directories of CustomResourceDefinitions, and
	// of any other objects, in YAML or JSON, created before Start returns;
	// the definitions are served by then.
	CRDPaths []string
	// CRDs are more objects to create, after those of CRDPaths.
	CRDs []*unstructured.Unstructured
	// Controllers names the controllers to run, from
	// controllermanager.AllControllers(); none when empty. Pods of the
	// simulated nodes start and stop at once, unless PodLifecycle says
	// otherwise.
	Controllers []string
	// PodLifecycle tunes the simulated nodes of the pod lifecycle
	// controller (controllermanager.PodLifecycle), for a test that must
	// see pods Pending or Terminating for a while, or failing. Its zero
	// delays are "at once" here, not the controller's one-second default.
	PodLifecycle podlifecycle.Options
	// Job tunes the Job controller (controllermanager.Job): a test of
	// failing Jobs shortens PodFailureBackoff, kube's 10 s before a
	// failed pod is replaced.
	Job job.Options
	// CronJob tunes the CronJob controller (controllermanager.CronJob):
	// a test gives it a clock of its own (Now) to reach a schedule
	// sooner.
	CronJob cronjob.Options
	// TTLAfterFinished tunes the TTL-after-finished controller
	// (controllermanager.TTLAfterFinished).
	TTLAfterFinished ttlafterfinished.Options
	// Namespace tunes the namespace controller: a test that deletes
	// namespaces shortens DeletionGracePeriod, the wait before a deleted
	// namespace's content is removed (zero: kube's 5 s).
	Namespace namespace.Options
	// WrapControllersTransport, when set, wraps the controllers' HTTP
	// transport: a test counts or delays their requests with it.
	WrapControllersTransport func(http.RoundTripper) http.RoundTripper
	// Webhooks installs admission webhook configurations, and CRD
	// conversion webhooks, served by a webhook server the test runs, and
	// makes that server's certificate (Environment.Webhook); none when
	// empty.
	Webhooks WebhookOptions
	// Logger receives the server's and the controllers' logs; nil
	// discards them.
	Logger *slog.Logger
}

// Environment is a running API server and what reaches it.
type Environment struct {
	// Config reaches the server as a member of system:masters, for
	// client-go and controller-runtime (client.New, manager.New).
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file with the same server and
	// credentials, for kubectl and other processes.
	Kubeconfig string
	// Client is listwatch's client of the server.
	Client *client.Client
	// Server is the API server itself.
	Server *apiserver.Server
	// URL is the server's base URL, https://127.0.0.1:port.
	URL string
	// Webhook is where the test's webhook server listens and the
	// certificate it serves with, when Options.Webhooks installs
	// webhooks; nil otherwise.
	Webhook *WebhookServing

	stop func() // New's
}

// User is the name of the user Environment.Config authenticates as, in
// the group system:masters.
const User = "envtest-admin"

// startTimeout bounds Start's waits: for the server to be ready, the CRDs
// to be served and the controllers to have synced.
const startTimeout = 30 * time.Second

// Start runs an API server for t, and the controllers opts names, and
// returns once the server is ready and the CRDs are served. A failure to
// start fails t. Everything stops when t ends.
func Start(t testing.TB, opts Options) *Environment {
	t.Helper()
	env, stop, err := start(t.TempDir(), opts)
	t.Cleanup(stop)
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	return env
}

// New is Start for test suites that have no testing.TB to hand, such as a
// Ginkgo BeforeSuite (GinkgoT cannot be one): the environment keeps its
// files in a temporary directory and runs until Stop.
func New(opts Options) (*Environment, error) {
	dir, err := os.MkdirTemp("", "envtest-")
	if err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	env, stop, err := start(dir, opts)
	cleanup := func() {
		stop()
		_ = os.RemoveAll(dir)
	}
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("envtest: %w", err)
	}
	env.stop = sync.OnceFunc(cleanup)
	return env, nil
}

// Stop stops an environment made by New, and removes its files; it may be
// called more than once. Environments of Start stop with their test.
func (e *Environment) Stop() {
	if e.stop != nil {
		e.stop()
	}
}

// start runs an environment keeping its files in dir; stop, never nil,
// stops whatever started.
func start(dir string, opts Options) (_ *Environment, stop func(), _ error) {
	log := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	// The server runs until the test's cleanup, not for t.Context(), which
	// ends before it: the cleanup stops the parts in order.
	ctx, cancel := context.WithCancel(context.Background())
	startCtx, cancelStart := context.WithTimeout(ctx, startTimeout)
	defer cancelStart()
	var stops []func()
	stop = func() {
		// Last started, first stopped: the controllers while the server
		// still answers, then the server, then its store.
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		cancel()
	}

	manifests, err := manifests(opts)
	if err != nil {
		return nil, stop, err
	}
	var webhook *WebhookServing
	if opts.Webhooks.enabled() {
		var hooks []*unstructured.Unstructured
		if webhook, hooks, err = opts.Webhooks.prepare(filepath.Join(dir, "webhook"), manifests); err != nil {
			return nil, stop, err
		}
		manifests = append(manifests, hooks...)
	}
	st, closeStore, err := openStore(startCtx, opts.Etcd, dir)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, closeStore)
	serving, err := servingCertificate(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, stop, err
	}
	cfg := serve.Config{
		API:       apiserver.Config{Storage: st},
		Serving:   serving,
		AdminUser: User,
		Manifests: manifests,
		Logger:    log,
		// Writes over the memory budget wait for one another, as
		// kube-apiserver's API Priority and Fairness queues requests.
		Filters: filters.Options{InFlightQueue: filters.PriorityAndFairnessQueue},
	}
	if !slices.Contains(opts.Controllers, controllermanager.ServiceAccount) {
		// Nothing makes the namespaces' default service accounts, which
		// the plugin requires of every pod: off, as envtest has it.
		cfg.API.DisableAdmissionPlugins = []string{"ServiceAccount"}
	}
	srv, err := serve.New(cfg)
	if err != nil {
		return nil, stop, err
	}
	run, endRun := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Run(run); err != nil {
			log.Error("envtest: serving", "err", err)
		}
	}()
	stops = append(stops, func() {
		endRun()
		<-served
	})
	env := &Environment{
		Server:     srv.API,
		URL:        srv.URL,
		Webhook:    webhook,
		Config:     srv.RESTConfig(),
		Kubeconfig: filepath.Join(dir, "kubeconfig"),
	}
	// The kubeconfig is written (and synced, some 10 ms) while the
	// server starts up: what it holds is known already.
	wrote := make(chan error, 1)
	go func() {
		wrote <- kubeconfig.Write(env.Kubeconfig, kubeconfig.Config{Server: env.URL, CAData: srv.CAPEM, Token: srv.Token()})
	}()
	readyErr := srv.WaitReady(startCtx)
	if err := errors.Join(readyErr, <-wrote); err != nil {
		return nil, stop, err
	}
	if env.Client, err = client.New(&client.Config{REST: env.Config, QPS: -1}); err != nil {
		return nil, stop, err
	}
	if len(opts.Controllers) > 0 {
		stopControllers, err := runControllers(ctx, env.Config, opts, log)
		if err != nil {
			return nil, stop, err
		}
		stops = append(stops, stopControllers)
	}
	return env, stop, nil
}

// serving is the serving certificate of the process's environments,
// made by the first of them; servingMu guards it.
var (
	servingMu sync.Mutex
	serving   *pki.Serving
)

// servingCertificate is the serving certificate (and its CA) of every
// environment of the process, made in dir by the first. Every server
// listens on 127.0.0.1, which it covers, and each is told apart by its
// port and token, not its certificate: making a CA and a certificate,
// and writing and syncing four files, was a tenth of a start's CPU.
func servingCertificate(dir string) (*pki.Serving, error) {
	servingMu.Lock()
	defer servingMu.Unlock()
	if serving == nil {
		s, err := pki.EnsureServing(dir)
		if err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		serving = s
	}
	return serving, nil
}

// The embedded etcd member's raft timing: a tenth of etcd's defaults.
const (
	etcdHeartbeat       = 10 * time.Millisecond
	etcdElectionTimeout = 100 * time.Millisecond
)

// openStore opens the in-memory store, or an embedded etcd member in dir.
func openStore(ctx context.Context, useEtcd bool, dir string) (storage.Interface, func(), error) {
	if !useEtcd {
		st := memory.New()
		return st, func() { _ = st.Close() }, nil
	}
	// A member alone, in a test: nobody to lose the leadership to, and
	// a first election after a tenth of etcd's timeout rather than the
	// whole second, which was most of a start (650 ms, now about 90).
	member, err := etcd.StartEmbedded(ctx, etcd.EmbeddedConfig{
		Dir:               filepath.Join(dir, "etcd"),
		UnsafeNoFsync:     true,
		HeartbeatInterval: etcdHeartbeat,
		ElectionTimeout:   etcdElectionTimeout,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("embedded etcd: %w", err)
	}
	st, err := etcd.New(ctx, member.ClientConfig())
	if err != nil {
		_ = member.Close()
		return nil, nil, fmt.Errorf("embedded etcd: %w", err)
	}
	return st, func() { _ = st.Close(); _ = member.Close() }, nil
}

// manifests are the objects of opts.CRDPaths, then opts.CRDs.
func manifests(opts Options) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, p := range opts.CRDPaths {
		o, err := apiserver.LoadManifests(p)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return append(objs, opts.CRDs...), nil
}

// runControllers runs the named controllers against the server until the
// returned stop is called, and waits for their caches to sync.
func runControllers(ctx context.Context, cfg *rest.Config, opts Options, log *slog.Logger) (stop func(), err error) {
	lifecycle := opts.PodLifecycle
	// podlifecycle takes a zero delay for its one-second default; a
	// nanosecond is "at once".
	defaults.Positive(&lifecycle.StartDelay, time.Nanosecond)
	defaults.Positive(&lifecycle.TerminationDelay, time.Nanosecond)
	defaults.Positive(&lifecycle.RunDuration, time.Nanosecond)
	if opts.WrapControllersTransport != nil {
		cfg = rest.CopyConfig(cfg)
		cfg.WrapTransport = opts.WrapControllersTransport
	}
	m, err := controllermanager.New(controllermanager.Config{
		Client:           &client.Config{REST: cfg, QPS: -1},
		Controllers:      opts.Controllers,
		LeaderElection:   controllermanager.LeaderElection{Disabled: true},
		PodLifecycle:     lifecycle,
		Job:              opts.Job,
		CronJob:          opts.CronJob,
		TTLAfterFinished: opts.TTLAfterFinished,
		Namespace:        opts.Namespace,
		Logger:           log,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			log.Error("envtest: controllers", "err", err)
		}
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	wait, cancelWait := context.WithTimeout(ctx, startTimeout)
	defer cancelWait()
	for !m.Ready() {
		select {
		case err := <-done:
			cancel()
			return nil, fmt.Errorf("controllers: %w", errOrStopped(err))
		case <-wait.Done():
			stop()
			return nil, errors.New("controllers did not sync in time")
		case <-tick.C:
		}
	}
	return stop, nil
}

func errOrStopped(err error) error {
	if err == nil {
		return errors.New("stopped")
	}
	return err
}
