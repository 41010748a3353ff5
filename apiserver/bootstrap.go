package apiserver

import (
	"context"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	schedulingapiv1 "k8s.io/kubernetes/pkg/apis/scheduling/v1"
)

// Start-up: what kube-apiserver does once it serves, before it reports
// ready (its post-start hooks and readiness checks), done the same way,
// through the loopback client:
//
//   - informer-sync: the informers of the admission plugins have synced.
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

// initStartup lists the start-up tasks; New calls it.
func (s *Server) initStartup() {
	c := s.self.client
	s.startup = []*startupTask{
		{name: "informer-sync", run: s.syncInformers},
		{name: "poststarthook/scheduling/bootstrap-system-priority-classes", run: func(ctx context.Context) error {
			return ensurePriorityClasses(ctx, c)
		}},
		{name: "poststarthook/rbac/bootstrap-roles", run: func(ctx context.Context) error {
			return ensureRBACPolicy(ctx, c)
		}},
	}
	for _, t := range s.startup {
		t.done = make(chan struct{})
	}
}

// start runs the start-up tasks in the background; New calls it last.
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

// WaitReady blocks until the start-up tasks are done (nil) or ctx ends.
func (s *Server) WaitReady(ctx context.Context) error {
	for _, t := range s.startup {
		select {
		case <-t.done:
		case <-ctx.Done():
			return fmt.Errorf("apiserver: %s: %w", t.name, ctx.Err())
		case <-s.ctx.Done():
			return fmt.Errorf("apiserver: closed before %s", t.name)
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
