package main

import (
	"context"
	"flag"
	"log/slog"
	"strings"
	"time"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/deployment"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
	"github.com/listwatch/listwatch/controllers/replicaset"
	"github.com/listwatch/listwatch/controllers/replication"
)

func init() {
	register("controller-manager", "run the controllers (replication, pod lifecycle, endpoints, garbage collector, namespace) against an API server", runControllerManager)
	components = append(components, component{name: "controller-manager", flags: upControllerManager.addUpFlags, run: upControllerManager.run})
}

// cmOptions are the flags the controller-manager shares between its own
// command and `up`.
type cmOptions struct {
	controllers    string
	leaderElect    bool
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	retryPeriod    time.Duration
	leaseNamespace string
	leaseName      string
	bindAddress    string
	rcWorkers      int
	rsWorkers      int
	deployWorkers  int
	burstReplicas  int
	nodes          string
	podStartDelay  time.Duration
	podRunDuration time.Duration
	podFail        float64
	podFailImages  string
	qps            float64
	burst          int
	// saCredentials is --use-service-account-credentials.
	saCredentials bool
	// staleReadTimeout is --stale-read-timeout.
	staleReadTimeout time.Duration
	// shards is --shards.
	shards int
}

func defaultCMOptions() cmOptions {
	return cmOptions{
		controllers:    strings.Join(controllermanager.AllControllers(), ","),
		leaderElect:    true,
		leaseDuration:  15 * time.Second,
		renewDeadline:  10 * time.Second,
		retryPeriod:    2 * time.Second,
		leaseNamespace: controllermanager.DefaultLeaseNamespace,
		leaseName:      controllermanager.DefaultLeaseName,
		bindAddress:    "127.0.0.1:10257",
		rcWorkers:      replication.DefaultWorkers,
		rsWorkers:      replicaset.DefaultWorkers,
		deployWorkers:  deployment.DefaultWorkers,
		burstReplicas:  replication.DefaultBurstReplicas,
		nodes:          "node-1,node-2,node-3",
		podStartDelay:  time.Second,
		podRunDuration: time.Second,
		qps:            client.DefaultQPS,
		burst:          client.DefaultBurst,

		staleReadTimeout: controller.DefaultStaleReadTimeout,
	}
}

// addFlags adds the flags to fs, with prefix before the names of those
// that `up` shares with the API server's own (none today, but `up` keeps
// its namespace clean by prefixing the bind address).
func (o *cmOptions) addFlags(fs *flag.FlagSet, bindFlag string) {
	fs.StringVar(&o.controllers, "controllers", o.controllers, "comma-separated controllers to run, of: "+strings.Join(controllermanager.AllControllers(), ", "))
	fs.BoolVar(&o.leaderElect, "leader-elect", o.leaderElect, "elect a leader on a Lease before running the controllers, so replicas never act together")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", o.leaseDuration, "how long non-leaders wait after the last renewal before taking the Lease over")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", o.renewDeadline, "how long the leader retries a renewal before it stops leading (< lease duration)")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", o.retryPeriod, "interval between attempts to acquire or renew the Lease")
	fs.StringVar(&o.leaseNamespace, "leader-elect-resource-namespace", o.leaseNamespace, "namespace of the Lease")
	fs.StringVar(&o.leaseName, "leader-elect-resource-name", o.leaseName, "name of the Lease")
	fs.StringVar(&o.bindAddress, bindFlag, o.bindAddress, "host:port serving /metrics, /healthz and /readyz (empty: none)")
	fs.IntVar(&o.rcWorkers, "concurrent-rc-syncs", o.rcWorkers, "replication controllers synced in parallel")
	fs.IntVar(&o.rsWorkers, "concurrent-replicaset-syncs", o.rsWorkers, "replica sets synced in parallel")
	fs.IntVar(&o.deployWorkers, "concurrent-deployment-syncs", o.deployWorkers, "deployments synced in parallel")
	fs.IntVar(&o.burstReplicas, "burst-replicas", o.burstReplicas, "pods one sync of one RC or ReplicaSet creates or deletes at most")
	fs.StringVar(&o.nodes, "nodes", o.nodes, "comma-separated names of the simulated nodes the podlifecycle controller runs pods on")
	fs.DurationVar(&o.podStartDelay, "pod-start-delay", o.podStartDelay, "how long a bound pod stays Pending before it runs (podlifecycle)")
	fs.DurationVar(&o.podRunDuration, "pod-run-duration", o.podRunDuration, "how long the containers of a pod whose restartPolicy is not Always run before they exit, so that Jobs complete (podlifecycle; a pod's "+podlifecycle.RunDurationAnnotation+" annotation overrides it)")
	fs.Float64Var(&o.podFail, "pod-fail-fraction", o.podFail, "fraction of pods, 0 to 1, the simulated nodes fail instead of running (podlifecycle)")
	fs.StringVar(&o.podFailImages, "pod-fail-images", o.podFailImages, `comma-separated image patterns (path.Match, e.g. "registry.example/broken:*") whose pods the simulated nodes fail (podlifecycle)`)
	fs.Float64Var(&o.qps, "kube-api-qps", o.qps, "requests per second to the API server (negative: no limit)")
	fs.IntVar(&o.burst, "kube-api-burst", o.burst, "requests allowed in a burst above --kube-api-qps")
	fs.DurationVar(&o.staleReadTimeout, "stale-read-timeout", o.staleReadTimeout, "how long a controller's sync of an object waits for its informers to show the controller's own last write of it (stale-read protection); then it syncs anyway and records a StaleReadTimeout event (negative: no protection)")
	fs.IntVar(&o.shards, "shards", o.shards, "split the work of the namespaced controllers ("+strings.Join(shardable(), ", ")+") into this many shards, by namespace, shared out among the replicas through Leases; the others run on the elected leader (0: no sharding; every replica must be given the same number)")
	fs.BoolVar(&o.saCredentials, "use-service-account-credentials", o.saCredentials, "run each controller as its own service account in kube-system (impersonated: the kubeconfig's user must be allowed to impersonate), so kube's bootstrap controller roles decide what it may do")
}

// config turns the options into a controllermanager.Config.
func (o *cmOptions) config(cc *client.Config, log *slog.Logger) controllermanager.Config {
	cc.QPS, cc.Burst = float32(o.qps), o.burst
	if o.qps == 0 {
		// The client reads 0 as "its default"; a user who says 0 means
		// no requests at all, which cannot work: take it as no limit.
		cc.QPS = -1
	}
	return controllermanager.Config{
		Client:      cc,
		Controllers: splitList(o.controllers),
		LeaderElection: controllermanager.LeaderElection{
			Disabled:      !o.leaderElect,
			Namespace:     o.leaseNamespace,
			Name:          o.leaseName,
			LeaseDuration: o.leaseDuration,
			RenewDeadline: o.renewDeadline,
			RetryPeriod:   o.retryPeriod,
		},
		BindAddress: o.bindAddress,
		Replication: replication.Options{BurstReplicas: o.burstReplicas, Controller: controller.Options{Workers: o.rcWorkers}},
		ReplicaSet:  replicaset.Options{BurstReplicas: o.burstReplicas, Controller: controller.Options{Workers: o.rsWorkers}},
		Deployment:  deployment.Options{Controller: controller.Options{Workers: o.deployWorkers}},
		PodLifecycle: podlifecycle.Options{
			Nodes: splitList(o.nodes),
			// podlifecycle reads 0 as "the default"; a nanosecond is
			// what "no delay" means to a user.
			StartDelay:   max(o.podStartDelay, time.Nanosecond),
			RunDuration:  max(o.podRunDuration, time.Nanosecond),
			FailFraction: o.podFail,
			FailImages:   splitList(o.podFailImages),
		},
		Logger:                    log,
		ServiceAccountCredentials: o.saCredentials,
		StaleReadTimeout:          o.staleReadTimeout,
		Shards:                    o.shards,
	}
}

// shardable lists the controllers --shards splits, in the order they
// start.
func shardable() []string {
	var names []string
	for _, n := range controllermanager.AllControllers() {
		if _, ok := controllermanager.Shardable[n]; ok {
			names = append(names, n)
		}
	}
	return names
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func runControllerManager(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("controller-manager", flag.ContinueOnError)
	opts := defaultCMOptions()
	opts.addFlags(fs, "bind-address")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	kubecontext := fs.String("context", "", "kubeconfig context (default: the current one)")
	log, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	cc, err := client.LoadConfig(client.LoadOptions{Kubeconfig: *kubeconfig, Context: *kubecontext})
	if err != nil {
		return err
	}
	m, err := controllermanager.New(opts.config(cc, log))
	if err != nil {
		return err
	}
	if a := m.Addr(); a != "" {
		log.Info("serving /metrics, /healthz and /readyz", "address", "http://"+a)
	}
	return m.Run(ctx)
}

// upCMOptions are the controller-manager's flags under `up`.
type upCMOptions struct {
	enabled bool
	cmOptions
}

// upControllerManager holds the flags of `up` that concern the
// controller-manager; `up` fills it when it parses its flags.
var upControllerManager = &upCMOptions{enabled: true, cmOptions: func() cmOptions {
	o := defaultCMOptions()
	// A local cluster may run next to a real controller-manager on the
	// default port, and tests run several: no endpoint unless asked.
	o.bindAddress = ""
	// In the same process as the server, on one machine: a client-side
	// limit would only slow a newcomer's large RC down.
	o.qps = -1
	// Each controller as its own user with kube's bootstrap controller
	// roles, as kubeadm runs kube-controller-manager: a controller that
	// lacks a permission fails here as it would in a cluster.
	o.saCredentials = true
	return o
}()}

func (u *upCMOptions) addUpFlags(fs *flag.FlagSet) {
	fs.BoolVar(&u.enabled, "controller-manager", u.enabled, "run the controller-manager in the same process (false: only the API server)")
	u.addFlags(fs, "controller-manager-bind-address")
}

// run is the controller-manager as a component of `up`.
func (u *upCMOptions) run(ctx context.Context, env componentEnv) error {
	if !u.enabled {
		return nil
	}
	cc, err := client.LoadConfig(client.LoadOptions{Kubeconfig: env.Kubeconfig, Context: env.Context})
	if err != nil {
		return err
	}
	m, err := controllermanager.New(u.config(cc, env.Logger))
	if err != nil {
		return err
	}
	return m.Run(ctx)
}
