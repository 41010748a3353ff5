package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	schedulingapiv1 "k8s.io/kubernetes/pkg/apis/scheduling/v1"
	"k8s.io/kubernetes/pkg/controlplane/controller/kubernetesservice"
	"k8s.io/kubernetes/pkg/controlplane/reconcilers"
)

// Start-up: what kube-apiserver does once it serves, before it reports
// ready (its post-start hooks and readiness checks), done the same way,
// through the loopback client:
//
//   - informer-sync: the informers of the admission plugins have synced.
//   - poststarthook/start-system-namespaces-controller: the namespaces
//     kube-system, kube-public and kube-node-lease exist, as kube's
//     system namespaces controller makes them (created when missing).
//   - poststarthook/bootstrap-controller: the namespace default exists
//     and, when Config.AdvertiseAddress is set, the "kubernetes" Service
//     in it, with its Endpoints and EndpointSlice, made and kept by kube's
//     own controller (k8s.io/kubernetes/pkg/controlplane/controller/
//     kubernetesservice, with the endpoint reconciler of a single
//     kube-apiserver, reconcilers.NewMasterCountEndpointReconciler), every
//     kubernetesServiceInterval as kube-apiserver runs it. An address
//     Endpoints may not hold (loopback) gets the Service alone.
//   - poststarthook/scheduling/bootstrap-system-priority-classes: the
//     PriorityClasses system-node-critical and system-cluster-critical
//     exist (k8s.io/kubernetes/pkg/apis/scheduling/v1.SystemPriorityClasses,
//     created when missing, never changed).
//   - poststarthook/rbac/bootstrap-roles: the bootstrap RBAC policy
//     (k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy:
//     cluster roles and their bindings, the controllers' roles and
//     bindings, and the roles and bindings of kube-system and kube-public)
//     is reconciled as kube's hook reconciles it
//     (k8s.io/component-helpers/auth/rbac/reconciliation): what is missing
//     is created, and what lacks a rule, subject or label of the policy is
//     completed unless annotated rbac.authorization.kubernetes.io/autoupdate
//     "false". kube's hook first migrates roles and bindings of clusters
//     made before Kubernetes 1.9 and 1.14 to their later names; a store of
//     listwatch never held those, and that step is left out.
//
// Each task runs until it succeeds or the server closes, retrying with a
// backoff (kube-apiserver's hooks give up after 30 s and the process
// exits, to be restarted). The readiness checks of ReadyChecks fail until
// they are done.

// startupTask is one of the server's start-up tasks.
type startupTask struct {
	name string
	run  func(ctx context.Context) error
	done chan struct{}
}

// ReadyCheck is a readiness check of the server, named as
// kube-apiserver's /readyz names it.
type ReadyCheck struct {
	Name string
	// Check reports nil once the check passes.
	Check func(ctx context.Context) error
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

// initStartup lists the start-up tasks; New calls it, before the
// informers start.
func (s *Server) initStartup() {
	c := s.self.client
	if a := s.cfg.AdvertiseAddress; a.IsValid() {
		services := s.self.informers.Core().V1().Services()
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
			ServiceIP:          s.KubernetesServiceIP(),
			ServicePort:        443,
			PublicServicePort:  int(a.Port()),
		}, c, services)
	}
	informerSync := &startupTask{name: "informer-sync", run: s.syncInformers}
	s.startup = []*startupTask{
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
	for _, t := range s.startup {
		t.done = make(chan struct{})
	}
}

// start runs the start-up tasks in the background; Run calls it.
func (s *Server) start() {
	s.self.informers.Start(s.ctx.Done())
	for _, t := range s.startup {
		s.wg.Go(func() {
			if untilDone(s.ctx, t.run, startupRetryFirst, startupRetryLast, func(err error) {
				s.log.Warn("server start-up; will retry", "task", t.name, "err", err)
			}) {
				close(t.done)
			}
		})
	}
	if s.kubeService != nil {
		s.wg.Go(s.keepKubernetesService)
	}
}

// bootstrapController is kube-apiserver's bootstrap controller at start:
// the namespace default, then the "kubernetes" Service and its endpoints.
// A Service refused for good (its cluster IP taken by another one, say)
// is logged and not waited for, as kube's controller does not hold
// readiness for it; keepKubernetesService tries again.
func (s *Server) bootstrapController(ctx context.Context) error {
	if err := ensureNamespaces(ctx, s.self.client, []string{metav1.NamespaceDefault}); err != nil {
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
		s.log.Warn("cannot make the kubernetes service", "err", err)
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
func (s *Server) keepKubernetesService() {
	for _, t := range s.startup {
		if t.name != bootstrapControllerTask {
			continue
		}
		select {
		case <-t.done:
		case <-s.ctx.Done():
			return
		}
	}
	tick := time.NewTicker(kubernetesServiceInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		if err := s.kubeService.UpdateKubernetesService(false); err != nil && s.ctx.Err() == nil {
			s.log.Warn("reconciling the kubernetes service", "err", err)
		}
	}
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

// syncInformers waits for the admission plugins' informers.
func (s *Server) syncInformers(ctx context.Context) error {
	synced := s.self.informers.WaitForCacheSync(ctx.Done())
	types := make([]reflect.Type, 0, len(synced))
	for typ, ok := range synced {
		if !ok {
			return fmt.Errorf("informer of %v not synced: %w", typ, ctx.Err())
		}
		types = append(types, typ)
	}
	return s.track(s.self.informers, types)
}

// ReadyChecks returns the server's readiness checks beyond storage: one
// per start-up task, failing until it is done.
func (s *Server) ReadyChecks() []ReadyCheck {
	checks := make([]ReadyCheck, len(s.startup))
	for i, t := range s.startup {
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
// Run has ended before them.
func (s *Server) WaitReady(ctx context.Context) error {
	for _, t := range s.startup {
		select {
		case <-t.done:
		case <-ctx.Done():
			return fmt.Errorf("apiserver: %s: %w", t.name, ctx.Err())
		case <-s.ctx.Done():
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
