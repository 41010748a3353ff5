// Package controllermanager runs listwatch's controllers against an API
// server, as kube-controller-manager does: every controller on one shared
// informer factory, events written through the API, leader election on a
// Lease so that only one replica acts, and an HTTP endpoint with /metrics,
// /healthz and /readyz.
//
// The controllers, their informers and their queues live only while this
// replica leads: a replica that loses its Lease stops them and campaigns
// again with fresh ones, so nothing it cached while leading is trusted
// after a gap.
package controllermanager

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/controllers/admissionpolicystatus"
	"github.com/listwatch/listwatch/controllers/clusterroleaggregation"
	"github.com/listwatch/listwatch/controllers/cronjob"
	"github.com/listwatch/listwatch/controllers/daemonset"
	"github.com/listwatch/listwatch/controllers/deployment"
	"github.com/listwatch/listwatch/controllers/disruption"
	"github.com/listwatch/listwatch/controllers/endpoints"
	"github.com/listwatch/listwatch/controllers/endpointslice"
	"github.com/listwatch/listwatch/controllers/endpointslicemirroring"
	"github.com/listwatch/listwatch/controllers/garbagecollector"
	"github.com/listwatch/listwatch/controllers/job"
	"github.com/listwatch/listwatch/controllers/namespace"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
	"github.com/listwatch/listwatch/controllers/replicaset"
	"github.com/listwatch/listwatch/controllers/replication"
	"github.com/listwatch/listwatch/controllers/resourcequota"
	"github.com/listwatch/listwatch/controllers/serviceaccount"
	"github.com/listwatch/listwatch/controllers/statefulset"
	"github.com/listwatch/listwatch/controllers/ttlafterfinished"
	"github.com/listwatch/listwatch/controllers/volumeprotection"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/leaderelection"
	"github.com/listwatch/listwatch/record"
	"github.com/listwatch/listwatch/workqueue"
)

// Names of the controllers Config.Controllers chooses from.
const (
	Replication      = "replication"
	ReplicaSet       = "replicaset"
	PodLifecycle     = "podlifecycle"
	Endpoints        = "endpoints"
	GarbageCollector = "garbagecollector"
	Namespace        = "namespace"
	ServiceAccount   = "serviceaccount"
	RootCACert       = "rootcacert"
	Deployment       = "deployment"
	// ClusterRoleAggregation is kube's clusterrole-aggregation controller.
	ClusterRoleAggregation = "clusterroleaggregation"
	// Job is kube's job controller.
	Job = "job"
	// CronJob is kube's cronjob controller.
	CronJob = "cronjob"
	// TTLAfterFinished is kube's ttl-after-finished controller.
	TTLAfterFinished = "ttl-after-finished"
	// StatefulSet is kube's statefulset controller.
	StatefulSet = "statefulset"
	// AdmissionPolicyStatus is kube's validatingadmissionpolicy-status
	// controller.
	AdmissionPolicyStatus = "validatingadmissionpolicystatus"
	// ResourceQuota is kube's resourcequota controller.
	ResourceQuota = "resourcequota"
	// DaemonSet is kube's daemonset controller.
	DaemonSet = "daemonset"
	// PVCProtection and PVProtection are kube's
	// persistentvolumeclaim-protection and persistentvolume-protection
	// controllers.
	PVCProtection = "pvc-protection"
	PVProtection  = "pv-protection"
	// EndpointSlice is kube's endpointslice controller.
	EndpointSlice = "endpointslice"
	// EndpointSliceMirroring is kube's endpointslice-mirroring controller.
	EndpointSliceMirroring = "endpointslice-mirroring"
	// Disruption is kube's disruption controller (PodDisruptionBudget
	// status).
	Disruption = "disruption"
)

// AllControllers lists every controller, in the order they start.
func AllControllers() []string {
	names := make([]string, len(controllers))
	for i, c := range controllers {
		names[i] = c.name
	}
	return names
}

// Defaults of the Lease the replicas compete for.
const (
	DefaultLeaseNamespace = "kube-system"
	DefaultLeaseName      = "listwatch-controller-manager"
)

// LeaderElection configures the election; the zero value elects on the
// default Lease with leaderelection's default durations.
type LeaderElection struct {
	// Disabled runs the controllers at once, with no Lease: for a single
	// replica that is sure to be alone.
	Disabled bool
	// Namespace and Name of the Lease; DefaultLeaseNamespace and
	// DefaultLeaseName when empty.
	Namespace, Name string
	// Identity of this replica; hostname plus a random suffix when empty.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod; leaderelection's
	// defaults when zero.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Config configures a Manager. Client is required.
type Config struct {
	// Client says how to reach the API server.
	Client *client.Config
	// Controllers to run, by name; every one of AllControllers when empty.
	Controllers []string
	// LeaderElection is on unless Disabled.
	LeaderElection LeaderElection
	// BindAddress is host:port of the HTTP endpoint serving /metrics,
	// /healthz and /readyz; empty: no endpoint. Port 0 picks a free one
	// (see Manager.Addr).
	BindAddress string

	// Replication tunes the ReplicationManager (workers, burstReplicas).
	Replication replication.Options
	// ReplicaSet tunes the ReplicaSet controller (workers, burstReplicas).
	ReplicaSet replicaset.Options
	// Deployment tunes the Deployment controller (workers).
	Deployment deployment.Options
	// Job tunes the Job controller (workers, the backoff of failed pods).
	Job job.Options
	// CronJob tunes the CronJob controller (workers, its clock).
	CronJob cronjob.Options
	// TTLAfterFinished tunes the TTL-after-finished controller (workers,
	// its clock).
	TTLAfterFinished ttlafterfinished.Options
	// ResourceQuota tunes the resource quota controller (workers, the
	// period of its full recalculations).
	ResourceQuota resourcequota.Options
	// StatefulSet tunes the StatefulSet controller (workers).
	StatefulSet statefulset.Options
	// DaemonSet tunes the DaemonSet controller (workers, burstReplicas).
	DaemonSet daemonset.Options
	// VolumeProtection tunes the pvc-protection and pv-protection
	// controllers.
	VolumeProtection volumeprotection.Options
	// EndpointSlice tunes the EndpointSlice controller (workers,
	// endpoints per slice, the batch period of pod changes).
	EndpointSlice endpointslice.Options
	// EndpointSliceMirroring tunes the EndpointSlice mirroring controller
	// (workers, endpoints per subset, the batch period).
	EndpointSliceMirroring endpointslicemirroring.Options
	// Disruption tunes the disruption controller (workers, clock).
	Disruption disruption.Options
	// PodLifecycle tunes the simulated nodes.
	PodLifecycle podlifecycle.Options
	// Namespace tunes the namespace controller.
	Namespace namespace.Options
	// GarbageCollector tunes the garbage collector: its Discover is the
	// server's discovery (garbagecollector.ServedResources) unless set,
	// its ResyncPeriod garbagecollector.DefaultResyncPeriod unless set.
	// Whatever the period, the collector re-syncs as soon as a
	// CustomResourceDefinition is created, written (established) or
	// deleted.
	GarbageCollector garbagecollector.Options
	// Events tunes the event broadcaster.
	Events record.Options
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// ServiceAccountCredentials runs each controller as its own user,
	// system:serviceaccount:kube-system:<controller's account>, as
	// kube-controller-manager --use-service-account-credentials does, so
	// that kube's bootstrap controller roles bound to those users decide
	// what each may do. The informers and the Lease keep Client's
	// credentials, which must be allowed to impersonate.
	ServiceAccountCredentials bool
	// Shards, when above zero, splits the work of the shardable
	// controllers (Shardable) over the replicas: each runs them once for
	// every shard it holds, on informers that see only the objects of the
	// namespaces that hash into that shard (ShardSelector), and the
	// replicas share the shards out through Leases named after
	// LeaderElection's (leaderelection.Sharder). The other controllers run
	// whole, on the replica that holds LeaderElection's Lease. Every
	// replica must be given the same Shards; leader election must be on.
	Shards int
	// StaleReadTimeout is stale-read protection's bound for every
	// controller whose own Options leave it zero (controller.Options): zero
	// is the controller package's default, 10s, and a negative value turns
	// the protection off.
	StaleReadTimeout time.Duration
}

// Manager runs the controllers. Make one with New and Run it once.
type Manager struct {
	cfg         Config
	controllers []string
	client      *client.Client
	// restConfig is client's configuration, for the controllers that use
	// client-go's discovery (admissionpolicystatus).
	restConfig *rest.Config
	// userAgent is client's user agent.
	userAgent string
	// clients are the controllers' own, by controller name, with
	// Config.ServiceAccountCredentials.
	clients  map[string]*client.Client
	log      *slog.Logger
	identity string

	registry     *prometheus.Registry
	queueMetrics workqueue.MetricsProvider
	leaderGauge  prometheus.Gauge
	listener     net.Listener

	leading atomic.Bool
	running atomic.Bool
	ran     atomic.Bool

	// groups are the controller groups running: the whole manager's (or
	// its unshardable part) while leading, and one per shard held.
	groupsMu sync.Mutex
	groups   map[*group]struct{}
}

// New checks cfg, builds the API client and opens the HTTP listener. The
// listener is closed by Run, or by Close when Run is never called.
func New(cfg Config) (*Manager, error) {
	if cfg.Client == nil || cfg.Client.REST == nil {
		return nil, errors.New("controllermanager: Config.Client is required")
	}
	chosen := cfg.Controllers
	if len(chosen) == 0 {
		chosen = AllControllers()
	}
	var names []string
	for _, n := range chosen {
		n = strings.TrimSpace(n)
		if _, ok := lookup(n); !ok {
			return nil, fmt.Errorf("controllermanager: unknown controller %q (known: %s)", n, strings.Join(AllControllers(), ", "))
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	log := cmp.Or(cfg.Logger, slog.Default())
	m := &Manager{cfg: cfg, controllers: names, log: log.With("component", "controller-manager"), registry: prometheus.NewRegistry()}
	m.identity = cfg.LeaderElection.Identity
	if m.identity == "" {
		id, err := defaultIdentity()
		if err != nil {
			return nil, err
		}
		m.identity = id
	}

	// Metrics first: the client's transport records into them.
	m.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cm, err := newClientMetrics(m.registry)
	if err != nil {
		return nil, fmt.Errorf("controllermanager: metrics: %w", err)
	}
	wq, err := workqueue.NewPrometheusProvider(m.registry)
	if err != nil {
		return nil, fmt.Errorf("controllermanager: metrics: %w", err)
	}
	m.queueMetrics = wq
	m.leaderGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "leader_election_master_status",
		Help:        "1 while this replica leads, 0 otherwise.",
		ConstLabels: prometheus.Labels{"name": m.leaseName()},
	})
	m.registry.MustRegister(m.leaderGauge)

	cc := *cfg.Client
	cc.REST = rest.CopyConfig(cfg.Client.REST)
	// Keep whatever wrapper the caller had (auth plugins, tests) inside
	// the metrics one.
	inner := cfg.Client.REST.WrapTransport
	cc.REST.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if inner != nil {
			rt = inner(rt)
		}
		return cm.wrap(rt)
	}
	if cc.UserAgent == "" {
		// The identity tells the replicas' requests apart in the server's
		// logs (and which replica of a sharded group wrote what).
		cc.UserAgent = UserAgent() + " controller-manager/" + m.identity
	}
	m.client, err = client.New(&cc)
	if err != nil {
		return nil, fmt.Errorf("controllermanager: %w", err)
	}
	m.restConfig = cc.REST
	m.userAgent = cc.UserAgent
	if cfg.ServiceAccountCredentials {
		if m.clients, err = controllerClients(&cc, names); err != nil {
			return nil, fmt.Errorf("controllermanager: %w", err)
		}
	}
	switch {
	case cfg.Shards < 0:
		return nil, fmt.Errorf("controllermanager: Shards must not be negative, not %d", cfg.Shards)
	case cfg.Shards > 0 && cfg.LeaderElection.Disabled:
		return nil, errors.New("controllermanager: Shards needs leader election: the replicas share the shards through Leases")
	}
	if !cfg.LeaderElection.Disabled {
		// Bad durations are a configuration error: report it now, not
		// from Run.
		if _, err := m.newElector(); err != nil {
			return nil, err
		}
	}
	if cfg.BindAddress != "" {
		m.listener, err = net.Listen("tcp", cfg.BindAddress)
		if err != nil {
			return nil, fmt.Errorf("controllermanager: listening on %s: %w", cfg.BindAddress, err)
		}
	}
	return m, nil
}

// UserAgent is the controller-manager's default user agent: it begins as
// kube-controller-manager's, so that the API server names the controllers'
// writes (managedFields' manager, audit, metrics) as it names kube's, and
// ends with listwatch's own.
func UserAgent() string {
	return "kube-controller-manager/" + podlifecycle.KubeletVersion + " (" + runtime.GOOS + "/" + runtime.GOARCH + ") " + client.DefaultUserAgent()
}

// defaultIdentity is hostname_random: the host says where the replica
// runs, the suffix keeps two replicas on one host (or a restart that
// races its predecessor's Lease) apart.
func defaultIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("controllermanager: identity: %w", err)
	}
	return host + "_" + hex.EncodeToString(b), nil
}

func (m *Manager) leaseName() string {
	if n := m.cfg.LeaderElection.Name; n != "" {
		return n
	}
	return DefaultLeaseName
}

func (m *Manager) leaseNamespace() string {
	if n := m.cfg.LeaderElection.Namespace; n != "" {
		return n
	}
	return DefaultLeaseNamespace
}

// Addr returns the address of the HTTP endpoint, "" when there is none.
func (m *Manager) Addr() string {
	if m.listener == nil {
		return ""
	}
	return m.listener.Addr().String()
}

// Identity returns this replica's identity in the Lease.
func (m *Manager) Identity() string { return m.identity }

// Controllers returns the names of the controllers the manager runs.
func (m *Manager) Controllers() []string { return slices.Clone(m.controllers) }

// IsLeader reports whether this replica leads (always, once running,
// with leader election off).
func (m *Manager) IsLeader() bool { return m.leading.Load() }

// Ready reports what /readyz does: the controllers' caches have synced
// while this replica leads (or leader election is off).
func (m *Manager) Ready() bool { return m.notReady() == "" }

// notReady says why /readyz fails, "" when it does not: no group of
// controllers runs (waiting for the Lease, or for a shard), or one has
// not synced its caches.
func (m *Manager) notReady() string {
	m.groupsMu.Lock()
	defer m.groupsMu.Unlock()
	if len(m.groups) == 0 {
		if m.cfg.Shards > 0 {
			return "holding no shard of " + m.leaseNamespace() + "/" + m.leaseName() + " and not leading"
		}
		return "not leading: waiting for the lease " + m.leaseNamespace() + "/" + m.leaseName()
	}
	for g := range m.groups {
		if !g.synced.Load() {
			return "caches not synced"
		}
	}
	return ""
}

// Registry returns the registry /metrics serves.
func (m *Manager) Registry() *prometheus.Registry { return m.registry }

// Close releases the listener of a Manager that will not Run.
func (m *Manager) Close() error {
	if m.listener != nil && !m.ran.Load() {
		return m.listener.Close()
	}
	return nil
}

// Run serves the HTTP endpoint and runs the controllers, behind leader
// election unless it is disabled, until ctx ends. It then stops the
// controllers (which finish the syncs in flight), releases the Lease and
// returns nil. A Manager runs once.
func (m *Manager) Run(ctx context.Context) error {
	if !m.ran.CompareAndSwap(false, true) {
		return errors.New("controllermanager: Run called twice")
	}
	m.running.Store(true)
	defer m.running.Store(false)
	stopHTTP := m.serveHTTP()
	defer stopHTTP()

	m.log.Info("starting", "controllers", m.controllers, "server", m.client.Host(),
		"leaderElection", !m.cfg.LeaderElection.Disabled, "identity", m.identity, "shards", m.cfg.Shards)
	if m.cfg.Shards > 0 {
		return m.runSharded(ctx)
	}
	m.runWhole(ctx, m.controllers)
	return nil
}

// runWhole runs the controllers names as one group, behind leader
// election unless it is disabled, until ctx ends: with new controllers and
// caches at once when leadership was lost, after a backoff when they
// failed (discovery failed, say) rather than end a process that may
// recover.
func (m *Manager) runWhole(ctx context.Context, names []string) {
	m.keepRunning(ctx, func(ctx context.Context) error {
		if m.cfg.LeaderElection.Disabled {
			m.setLeading(true)
			err := m.runControllers(ctx, &group{names: names})
			m.setLeading(false)
			if err == nil && ctx.Err() == nil {
				err = errors.New("controllers stopped on their own")
			}
			return err
		}
		le, err := m.newElector()
		if err != nil {
			return err
		}
		return m.lead(ctx, le, names)
	})
}

// Bounds of the wait before controllers that failed are started again.
const (
	minRestartBackoff = time.Second
	maxRestartBackoff = 30 * time.Second
)

// electorSlot receives the callbacks of the current term's elector.
type electorSlot struct {
	le        *leaderelection.LeaderElector
	onLeading func(ctx context.Context)
}

// newElector makes the LeaderElector of one term; its callbacks go
// through the returned slot so that lead can set them per term.
func (m *Manager) newElector() (*electorSlot, error) {
	slot := &electorSlot{}
	le, err := leaderelection.New(leaderelection.Config{
		Client:        newLeaseClient(m.client),
		Namespace:     m.leaseNamespace(),
		Name:          m.leaseName(),
		Identity:      m.identity,
		LeaseDuration: m.cfg.LeaderElection.LeaseDuration,
		RenewDeadline: m.cfg.LeaderElection.RenewDeadline,
		RetryPeriod:   m.cfg.LeaderElection.RetryPeriod,
		Logger:        m.log,
		Callbacks: leaderelection.Callbacks{
			OnStartedLeading: func(lctx context.Context) { slot.onLeading(lctx) },
			OnStoppedLeading: func() { m.setLeading(false) },
		},
	})
	if err != nil {
		return nil, fmt.Errorf("controllermanager: %w", err)
	}
	slot.le = le
	return slot, nil
}

// lead campaigns and, once leading, runs the controllers until ctx ends
// (nil), leadership is lost (nil, logged) or the controllers fail, in
// which case the Lease is released and their error returned: a replica
// that cannot run its controllers must not keep others from leading.
func (m *Manager) lead(ctx context.Context, slot *electorSlot, names []string) error {
	tctx, endTerm := context.WithCancel(ctx)
	defer endTerm()
	var runErr error
	slot.onLeading = func(lctx context.Context) {
		m.setLeading(true)
		if runErr = m.runControllers(lctx, &group{names: names}); runErr != nil && lctx.Err() == nil {
			endTerm()
		}
	}
	err := slot.le.Run(tctx)
	if errors.Is(err, leaderelection.ErrLeadershipLost) {
		m.log.Warn("lost leadership; campaigning again")
		return nil
	}
	return errors.Join(err, runErr)
}

func (m *Manager) setLeading(v bool) {
	m.leading.Store(v)
	if v {
		m.leaderGauge.Set(1)
	} else {
		m.leaderGauge.Set(0)
	}
}

// serveHTTP serves /metrics, /healthz and /readyz on the listener until
// the returned func is called.
func (m *Manager) serveHTTP() (stop func()) {
	if m.listener == nil {
		return func() {}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		// The process serves and Run is live: a replica waiting for the
		// Lease is healthy, only not ready.
		if !m.running.Load() {
			http.Error(w, "not running", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := m.notReady(); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(m.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("metrics endpoint failed", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		<-done
	}
}

// group is a set of controllers run together on one informer factory:
// all the manager's, its unshardable ones, or its shardable ones on one
// shard.
type group struct {
	names []string
	// shard is the part of every resource the group's informers hold;
	// nil: all of it.
	shard  *informers.Shard
	synced atomic.Bool
}

// runControllers builds g's controllers on a new shared informer factory,
// starts the informers and the controllers, and stops them all when ctx
// ends: the controllers first (they drain their queues), then the
// informers and the event broadcaster.
func (m *Manager) runControllers(ctx context.Context, g *group) error {
	log := m.log
	if g.shard != nil {
		log = log.With("shard", g.shard.Index)
	}
	factory := informers.NewSharedInformerFactory(m.client, informers.Options{
		Reflector: cache.ReflectorOptions{Logger: log},
		Shard:     g.shard,
	})
	defer factory.Shutdown()
	m.groupsMu.Lock()
	if m.groups == nil {
		m.groups = map[*group]struct{}{}
	}
	m.groups[g] = struct{}{}
	m.groupsMu.Unlock()
	defer func() {
		m.groupsMu.Lock()
		delete(m.groups, g)
		m.groupsMu.Unlock()
	}()

	broadcaster := record.NewBroadcaster(record.ClientSink(m.client), m.eventOptions())
	bctx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	var eventsDone sync.WaitGroup
	eventsDone.Go(func() { broadcaster.Run(bctx) })
	// Events recorded during the controllers' drain are still written:
	// the broadcaster stops after them.
	defer func() { stopEvents(); eventsDone.Wait() }()

	d := deps{m: m, factory: factory, events: broadcaster}
	runs := make([]runner, len(g.names))
	for i, name := range g.names {
		def, _ := lookup(name)
		r, err := def.new(ctx, d)
		if err != nil {
			release(runs[:i])
			return fmt.Errorf("%s: %w", name, err)
		}
		runs[i] = r
	}
	factory.Start(ctx)

	// A lost Lease (leaderelection.ErrLeadershipLost) stops the
	// controllers at once, with no drain: another replica may soon write
	// what they would.
	runCtx, stopRuns := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopRuns(nil)
	defer context.AfterFunc(ctx, func() {
		cause := context.Cause(ctx)
		if errors.Is(cause, leaderelection.ErrLeadershipLost) {
			cause = controller.ErrStopNow
		}
		stopRuns(cause)
	})()
	var wg sync.WaitGroup
	errs := make([]error, len(runs))
	for i, r := range runs {
		name := g.names[i]
		wg.Go(func() {
			if err := r.Run(runCtx); err != nil && ctx.Err() == nil {
				m.log.Error("controller stopped", "controller", name, "err", err)
				errs[i] = fmt.Errorf("%s: %w", name, err)
			}
		})
	}
	synced := factory.WaitForCacheSync(ctx)
	all := ctx.Err() == nil
	for gvr, ok := range synced {
		if !ok {
			all = false
			m.log.Warn("cache did not sync", "resource", gvr.String())
		}
	}
	if all {
		g.synced.Store(true)
		log.Info("caches synced; controllers running", "controllers", g.names)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// release runs controllers that were built but are not to run on an
// ended context, so that what their constructors started stops: kube's
// controllers start their queues' goroutines there. Without it, every
// term whose build failed (discovery refused, or cancelled at shutdown)
// would leak them.
func release(runs []runner) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(controller.ErrStopNow)
	for _, r := range runs {
		_ = r.Run(ctx)
	}
}

func (m *Manager) eventOptions() record.Options {
	o := m.cfg.Events
	if o.Logger == nil {
		o.Logger = m.log
	}
	return o
}

// runner is a controller built and not yet run: every controller's New
// returns one, and its Run returns once ctx has ended and its workers
// have stopped.
type runner interface {
	Run(ctx context.Context) error
}

// deps are what the controllers of one term of leadership share.
type deps struct {
	m       *Manager
	factory *informers.SharedInformerFactory
	events  *record.Broadcaster
}

// options fills in what every controller gets from the manager unless its
// Config section says otherwise: the logger, the queue metrics, stale-read
// protection's timeout, and a recorder of its events as component.
func (d deps) options(component string, o controller.Options) controller.Options {
	if o.Logger == nil {
		o.Logger = d.m.log
	}
	if o.Metrics == nil {
		o.Metrics = d.m.queueMetrics
	}
	if o.StaleReadTimeout == 0 {
		o.StaleReadTimeout = d.m.cfg.StaleReadTimeout
	}
	if o.Recorder == nil {
		o.Recorder = d.events.NewRecorder(component)
	}
	return o
}

// controllerDef is a row of the table of controllers: a name
// Config.Controllers chooses by, and how to make the controller on the
// term's shared informer factory, registering on its informers before
// they start.
type controllerDef struct {
	name string
	new  func(ctx context.Context, d deps) (runner, error)
}

// controllers is every controller the manager can run, in the order they
// start.
var controllers = []controllerDef{
	{Replication, func(_ context.Context, d deps) (runner, error) {
		return newReplicaSetManager(d, Replication, replicaset.ReplicationControllers{}, "replication-controller", d.m.cfg.Replication)
	}},
	{ReplicaSet, func(_ context.Context, d deps) (runner, error) {
		return newReplicaSetManager(d, ReplicaSet, replicaset.ReplicaSets{}, "replicaset-controller", d.m.cfg.ReplicaSet)
	}},
	{PodLifecycle, func(_ context.Context, d deps) (runner, error) {
		opts := d.m.cfg.PodLifecycle
		opts.Controller = d.options("pod-lifecycle-controller", opts.Controller)
		if opts.Events == nil {
			opts.Events = func(component, host string) controller.EventRecorder {
				if host == "" {
					return d.events.NewHostnameRecorder(component)
				}
				return d.events.NewHostRecorder(component, host)
			}
		}
		return podlifecycle.New(informers.For[*corev1.Pod](d.factory), informers.For[*corev1.Node](d.factory), podlifecycle.NewClient(d.m.client), opts)
	}},
	{Endpoints, func(_ context.Context, d deps) (runner, error) {
		return endpoints.New(informers.For[*corev1.Service](d.factory), informers.For[*corev1.Pod](d.factory),
			//lint:ignore SA1019 the endpoints controller keeps core/v1 Endpoints, as kube's still does.
			informers.For[*corev1.Endpoints](d.factory), endpoints.NewClient(d.clientOf(Endpoints)), d.options("endpoint-controller", controller.Options{}))
	}},
	{EndpointSlice, func(_ context.Context, d deps) (runner, error) {
		cs, err := d.clientsetOf(EndpointSlice)
		if err != nil {
			return nil, err
		}
		opts := d.m.cfg.EndpointSlice
		opts.Controller = d.options("endpoint-slice-controller", opts.Controller)
		return endpointslice.New(endpointslice.Informers{
			Services:       informers.For[*corev1.Service](d.factory),
			Pods:           informers.For[*corev1.Pod](d.factory),
			Nodes:          informers.For[*corev1.Node](d.factory),
			EndpointSlices: informers.For[*discoveryv1.EndpointSlice](d.factory),
		}, cs, opts)
	}},
	{EndpointSliceMirroring, func(ctx context.Context, d deps) (runner, error) {
		cs, err := d.clientsetOf(EndpointSliceMirroring)
		if err != nil {
			return nil, err
		}
		opts := d.m.cfg.EndpointSliceMirroring
		if opts.Logger == nil {
			opts.Logger = d.m.log
		}
		return endpointslicemirroring.New(ctx, endpointslicemirroring.Informers{
			Services: informers.For[*corev1.Service](d.factory),
			//lint:ignore SA1019 the mirroring controller reads core/v1 Endpoints, as kube's does.
			Endpoints:      informers.For[*corev1.Endpoints](d.factory),
			EndpointSlices: informers.For[*discoveryv1.EndpointSlice](d.factory),
		}, cs, opts)
	}},
	{GarbageCollector, newGarbageCollector},
	{Namespace, func(_ context.Context, d deps) (runner, error) {
		opts := d.m.cfg.Namespace
		opts.Controller = d.options("namespace-controller", opts.Controller)
		return namespace.New(informers.For[*corev1.Namespace](d.factory), namespace.NewClient(d.clientOf(Namespace)), opts)
	}},
	{ServiceAccount, func(_ context.Context, d deps) (runner, error) {
		return serviceaccount.New(informers.For[*corev1.Namespace](d.factory), informers.For[*corev1.ServiceAccount](d.factory),
			serviceaccount.NewClient(d.clientOf(ServiceAccount)), serviceaccount.Options{Controller: d.options("service-account-controller", controller.Options{})})
	}},
	{RootCACert, newRootCACert},
	{Deployment, func(_ context.Context, d deps) (runner, error) {
		return deployment.New(informers.For[*appsv1.Deployment](d.factory), informers.For[*appsv1.ReplicaSet](d.factory),
			informers.For[*corev1.Pod](d.factory), deployment.NewClient(d.clientOf(Deployment)),
			deployment.Options{Recorder: d.events.NewRecorder("deployment-controller"), Controller: d.options("deployment-controller", d.m.cfg.Deployment.Controller)})
	}},
	{Job, func(_ context.Context, d deps) (runner, error) {
		opts := d.m.cfg.Job
		opts.Controller = d.options("job-controller", opts.Controller)
		return job.New(informers.For[*batchv1.Job](d.factory), informers.For[*corev1.Pod](d.factory), job.NewClient(d.clientOf(Job)), opts)
	}},
	{CronJob, func(_ context.Context, d deps) (runner, error) {
		opts := d.m.cfg.CronJob
		opts.Controller = d.options("cronjob-controller", opts.Controller)
		return cronjob.New(informers.For[*batchv1.CronJob](d.factory), informers.For[*batchv1.Job](d.factory), cronjob.NewClient(d.clientOf(CronJob)), opts)
	}},
	{TTLAfterFinished, func(_ context.Context, d deps) (runner, error) {
		opts := d.m.cfg.TTLAfterFinished
		opts.Controller = d.options("ttl-after-finished-controller", opts.Controller)
		return ttlafterfinished.New(informers.For[*batchv1.Job](d.factory), ttlafterfinished.NewClient(d.clientOf(TTLAfterFinished)), opts)
	}},
	{ResourceQuota, newResourceQuota},
	{StatefulSet, func(_ context.Context, d deps) (runner, error) {
		opts := d.m.cfg.StatefulSet
		opts.Controller = d.options("statefulset-controller", opts.Controller)
		return statefulset.New(statefulset.Informers{
			StatefulSets:        informers.For[*appsv1.StatefulSet](d.factory),
			Pods:                informers.For[*corev1.Pod](d.factory),
			Claims:              informers.For[*corev1.PersistentVolumeClaim](d.factory),
			ControllerRevisions: informers.For[*appsv1.ControllerRevision](d.factory),
		}, statefulset.NewClient(d.clientOf(StatefulSet)), opts)
	}},
	{DaemonSet, func(_ context.Context, d deps) (runner, error) {
		opts := d.m.cfg.DaemonSet
		opts.Controller = d.options("daemonset-controller", opts.Controller)
		return daemonset.New(daemonset.Informers{
			DaemonSets:          informers.For[*appsv1.DaemonSet](d.factory),
			Pods:                informers.For[*corev1.Pod](d.factory),
			Nodes:               informers.For[*corev1.Node](d.factory),
			ControllerRevisions: informers.For[*appsv1.ControllerRevision](d.factory),
		}, daemonset.NewClient(d.clientOf(DaemonSet)), opts)
	}},
	{PVCProtection, func(_ context.Context, d deps) (runner, error) {
		opts := d.m.cfg.VolumeProtection
		opts.Controller = d.options("persistentvolumeclaim-protection-controller", opts.Controller)
		return volumeprotection.NewClaims(informers.For[*corev1.PersistentVolumeClaim](d.factory), informers.For[*corev1.Pod](d.factory),
			volumeprotection.NewClient(d.clientOf(PVCProtection)), opts)
	}},
	{PVProtection, func(_ context.Context, d deps) (runner, error) {
		opts := d.m.cfg.VolumeProtection
		opts.Controller = d.options("persistentvolume-protection-controller", opts.Controller)
		return volumeprotection.NewVolumes(informers.For[*corev1.PersistentVolume](d.factory), volumeprotection.NewClient(d.clientOf(PVProtection)), opts)
	}},
	{Disruption, func(_ context.Context, d deps) (runner, error) {
		opts := d.m.cfg.Disruption
		// kube's disruption controller records its events as
		// "controllermanager".
		opts.Controller = d.options(disruption.Component, opts.Controller)
		return disruption.New(disruption.Informers{
			PDBs:                   informers.For[*policyv1.PodDisruptionBudget](d.factory),
			Pods:                   informers.For[*corev1.Pod](d.factory),
			ReplicationControllers: informers.For[*corev1.ReplicationController](d.factory),
			ReplicaSets:            informers.For[*appsv1.ReplicaSet](d.factory),
			Deployments:            informers.For[*appsv1.Deployment](d.factory),
			StatefulSets:           informers.For[*appsv1.StatefulSet](d.factory),
		}, disruption.NewClient(d.clientOf(Disruption)), opts)
	}},
	{ClusterRoleAggregation, func(_ context.Context, d deps) (runner, error) {
		return clusterroleaggregation.New(informers.For[*rbacv1.ClusterRole](d.factory), clusterroleaggregation.NewClient(d.clientOf(ClusterRoleAggregation)),
			clusterroleaggregation.Options{Controller: d.options("clusterrole-aggregation-controller", controller.Options{})})
	}},
	{AdmissionPolicyStatus, func(_ context.Context, d deps) (runner, error) {
		checker, err := admissionpolicystatus.NewChecker(d.m.restConfig)
		if err != nil {
			return nil, err
		}
		return admissionpolicystatus.New(informers.For[*admissionregistrationv1.ValidatingAdmissionPolicy](d.factory),
			admissionpolicystatus.NewClient(d.clientOf(AdmissionPolicyStatus)), checker,
			admissionpolicystatus.Options{Controller: d.options("validatingadmissionpolicy-status-controller", controller.Options{})})
	}},
}

// lookup finds the row of the controller called name.
func lookup(name string) (controllerDef, bool) {
	for _, c := range controllers {
		if c.name == name {
			return c, true
		}
	}
	return controllerDef{}, false
}
