package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	schedulingapiv1 "k8s.io/kubernetes/pkg/apis/scheduling/v1"
	"k8s.io/kubernetes/pkg/controlplane/controller/kubernetesservice"
	"k8s.io/kubernetes/pkg/controlplane/reconcilers"

	"github.com/listwatch/listwatch/internal/ctxtime"
)

// Config is what the start-up needs of the server.
type Config struct {
	// Client is the server's loopback client.
	Client kubernetes.Interface
	// Informers is the informer factory on it; the server starts it.
	Informers informers.SharedInformerFactory
	// AdvertiseAddress, when valid, is the address and port the
	// "kubernetes" Service stands for; ServiceIP is the Service's cluster
	// IP.
	AdvertiseAddress netip.AddrPort
	ServiceIP        net.IP
	// SyncInformers waits until the informers of the admission plugins
	// have synced (the informer-sync check).
	SyncInformers func(ctx context.Context) error
	// Store stores obj, an object of the bootstrap RBAC policy of the
	// resource plural (clusterroles, clusterrolebindings, roles or
	// rolebindings), as a create through the server's write path at
	// created would have stored it: with a new uid, created as its
	// creationTimestamp and the time of its managedFields. It fails with
	// storage.ErrKeyExists when the object exists.
	Store func(ctx context.Context, plural string, obj Object, created metav1.Time) error
	// Templates, shared by the servers of a process, hold the policy as the
	// first fresh one stored it, for the others to store directly.
	Templates *Templates
	// Log receives what the start-up reports.
	Log *slog.Logger
}

// Object is an object of the bootstrap RBAC policy.
type Object interface {
	runtime.Object
	metav1.Object
}

// Startup is the server's start-up tasks.
type Startup struct {
	cfg   Config
	tasks []*task

	// kubeService makes the "kubernetes" Service when the server has an
	// advertised address; kubeServiceSynced reports its services
	// informer synced.
	kubeService       *kubernetesservice.Controller
	kubeServiceSynced cache.DoneChecker

	// policyWritten is set once the RBAC policy was written from the
	// process's templates rather than reconciled.
	policyWritten atomic.Bool
}

// ReadyCheck is a readiness check of the server, named as
// kube-apiserver's /readyz names it.
type ReadyCheck struct {
	Name string
	// Check reports nil once the check passes.
	Check func(ctx context.Context) error
}

// task is one of the server's start-up tasks.
type task struct {
	name string
	run  func(ctx context.Context) error
	done chan struct{}
}

// The wait between attempts of a start-up task: doubling from the first
// to the last, then the last for as long as it takes.
const (
	startupRetryFirst = 100 * time.Millisecond
	startupRetryLast  = 5 * time.Second
)

// systemNamespaces are the namespaces of kube-apiserver's system
// namespaces controller (pkg/controlplane's list); default is the
// bootstrap controller's.
var systemNamespaces = []string{metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// bootstrapControllerTask names the bootstrap controller's start-up task.
const bootstrapControllerTask = "poststarthook/bootstrap-controller"

// kubernetesServiceInterval is how often the "kubernetes" Service and its
// endpoints are reconciled: kube-apiserver's EndpointInterval.
const kubernetesServiceInterval = 10 * time.Second

// New lists the start-up tasks; call it before the informers start.
func New(cfg Config) *Startup {
	s := &Startup{cfg: cfg}
	c := cfg.Client
	if a := cfg.AdvertiseAddress; a.IsValid() {
		services := cfg.Informers.Core().V1().Services()
		s.kubeServiceSynced = services.Informer().HasSyncedChecker()
		ip := net.IP(a.Addr().AsSlice())
		endpoints := reconcilers.NewMasterCountEndpointReconciler(1, reconcilers.NewEndpointsAdapter(c.CoreV1(), c.DiscoveryV1()))
		if endpoints.ValidateIP(ip) != nil {
			// An address Endpoints cannot hold (loopback, as a server on
			// 127.0.0.1 for tests advertises): the Service alone, as
			// kube-apiserver with --endpoint-reconciler-type=none.
			endpoints = reconcilers.NewNoneEndpointReconciler()
		}
		s.kubeService = kubernetesservice.New(kubernetesservice.Config{
			PublicIP:           ip,
			EndpointReconciler: endpoints,
			EndpointInterval:   kubernetesServiceInterval,
			ServiceIP:          cfg.ServiceIP,
			ServicePort:        443,
			PublicServicePort:  int(a.Port()),
		}, c, services)
	}
	informerSync := &task{name: "informer-sync", run: cfg.SyncInformers}
	s.tasks = []*task{
		informerSync,
		{name: "poststarthook/start-system-namespaces-controller", run: func(ctx context.Context) error {
			return ensureNamespaces(ctx, c, systemNamespaces)
		}},
		{name: bootstrapControllerTask, run: s.bootstrapController},
		{name: "poststarthook/scheduling/bootstrap-system-priority-classes", run: func(ctx context.Context) error {
			return ensurePriorityClasses(ctx, c)
		}},
		{name: "poststarthook/rbac/bootstrap-roles", run: func(ctx context.Context) error {
			// The authorizer waits for its informers (fresh) only for
			// the writes stored once they have synced: a bootstrap role
			// written before might still be missing from them when the
			// server is ready, and a request it grants be denied. The
			// other tasks write nothing the authorizer reads, and do
			// not wait.
			select {
			case <-informerSync.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			return s.ensureRBACPolicy(ctx, c)
		}},
	}
	for _, t := range s.tasks {
		t.done = make(chan struct{})
	}
	return s
}

// Run runs the start-up tasks until they are done, then keeps the
// "kubernetes" Service, until ctx, the server's lifetime, ends. It may be
// called once.
func (s *Startup) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range s.tasks {
		wg.Go(func() {
			if untilDone(ctx, t.run, startupRetryFirst, startupRetryLast, func(err error) {
				s.cfg.Log.Warn("server start-up; will retry", "task", t.name, "err", err)
			}) {
				close(t.done)
			}
		})
	}
	if s.kubeService != nil {
		wg.Go(func() { s.keepKubernetesService(ctx) })
	}
	wg.Wait()
}

// bootstrapController is kube-apiserver's bootstrap controller at start:
// the namespace default, then the "kubernetes" Service and its endpoints.
// A Service refused for good (its cluster IP taken by another one, say)
// is logged and not waited for, as kube's controller does not hold
// readiness for it; keepKubernetesService tries again.
func (s *Startup) bootstrapController(ctx context.Context) error {
	if err := ensureNamespaces(ctx, s.cfg.Client, []string{metav1.NamespaceDefault}); err != nil {
		return err
	}
	if s.kubeService == nil {
		return nil
	}
	// The controller reads the Service from its lister: before the
	// lister has the stored one, it would try to create it again.
	if !cache.WaitFor(ctx, "", s.kubeServiceSynced) {
		return fmt.Errorf("services informer not synced: %w", ctx.Err())
	}
	err := s.kubeService.UpdateKubernetesService(false)
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code < 500 && status.Status().Code != 429 {
		s.cfg.Log.Warn("cannot make the kubernetes service", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubernetes service: %w", err)
	}
	return nil
}

// keepKubernetesService reconciles the "kubernetes" Service and its
// endpoints every kubernetesServiceInterval once the bootstrap controller
// is done, as kube's controller loop does (a deleted one comes back),
// until the server closes.
func (s *Startup) keepKubernetesService(ctx context.Context) {
	for _, t := range s.tasks {
		if t.name != bootstrapControllerTask {
			continue
		}
		select {
		case <-t.done:
		case <-ctx.Done():
			return
		}
	}
	ctxtime.Every(ctx, kubernetesServiceInterval, func() bool {
		if err := s.kubeService.UpdateKubernetesService(false); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("reconciling the kubernetes service", "err", err)
		}
		return true
	})
}

// ensureNamespaces creates the namespaces of names that are missing,
// through the loopback client, so that they get what a client's namespace
// gets (admission, finalizers).
func ensureNamespaces(ctx context.Context, c kubernetes.Interface, names []string) error {
	nss := c.CoreV1().Namespaces()
	for _, name := range names {
		_, err := nss.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get namespace %s: %w", name, err)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := nss.Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}

// untilDone calls run until it succeeds (true) or ctx ends (false),
// waiting first, doubling up to last, between attempts; failed reports
// each failure but the one ctx ended.
func untilDone(ctx context.Context, run func(context.Context) error, first, last time.Duration, failed func(error)) bool {
	wait := first
	for {
		err := run(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		failed(err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wait = min(2*wait, last)
	}
}

// ReadyChecks returns one readiness check per start-up task, failing
// until it is done.
func (s *Startup) ReadyChecks() []ReadyCheck {
	checks := make([]ReadyCheck, len(s.tasks))
	for i, t := range s.tasks {
		checks[i] = ReadyCheck{Name: t.name, Check: func(context.Context) error {
			select {
			case <-t.done:
				return nil
			default:
				return fmt.Errorf("%s not finished", t.name)
			}
		}}
	}
	return checks
}

// WaitReady blocks until the start-up tasks are done (nil), ctx ends, or
// stopped is closed (the server ended before them).
func (s *Startup) WaitReady(ctx context.Context, stopped <-chan struct{}) error {
	for _, t := range s.tasks {
		select {
		case <-t.done:
		case <-ctx.Done():
			return fmt.Errorf("apiserver: %s: %w", t.name, ctx.Err())
		case <-stopped:
			return fmt.Errorf("apiserver: stopped before %s", t.name)
		}
	}
	return nil
}

// ensurePriorityClasses creates the system PriorityClasses that are
// missing, as kube-apiserver's scheduling post-start hook does.
func ensurePriorityClasses(ctx context.Context, c kubernetes.Interface) error {
	pcs := c.SchedulingV1().PriorityClasses()
	for _, pc := range schedulingapiv1.SystemPriorityClasses() {
		_, err := pcs.Get(ctx, pc.Name, metav1.GetOptions{})
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get PriorityClass %s: %w", pc.Name, err)
		}
		if _, err := pcs.Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create PriorityClass %s: %w", pc.Name, err)
		}
	}
	return nil
}
