package apiserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-helpers/auth/rbac/reconciliation"

	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

// rbacWorkers is how many objects of the bootstrap policy are reconciled
// at once: each is a read and a write, mostly waiting on storage.
const rbacWorkers = 8

// ensureRBACPolicy reconciles the bootstrap RBAC policy as kube's hook
// does: every object, even when some fail, each with kube's
// reconciliation (k8s.io/component-helpers/auth/rbac/reconciliation) and a
// retry of conflicts. Two things differ, neither visible in the result:
// the objects are reconciled several at a time rather than one by one,
// and the reconciliation's first read of each object is answered from
// one list of its kind taken at the start rather than from a read of its
// own (a second read, after a create that lost a race, is a read). The
// reconciliation's own calls take no context: ctx is checked between
// objects.
func ensureRBACPolicy(ctx context.Context, c kubernetes.Interface) error {
	rbac := c.RbacV1()
	policyRoles := bootstrappolicy.NamespaceRoles()
	policyBindings := bootstrappolicy.NamespaceRoleBindings()
	namespaces := slices.Sorted(maps.Keys(policyRoles))
	for ns := range policyBindings {
		if !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}

	clusterRoles, clusterBindings := newListed[rbacv1.ClusterRole](), newListed[rbacv1.ClusterRoleBinding]()
	roles, bindings := newListed[rbacv1.Role](), newListed[rbacv1.RoleBinding]()
	if err := listInto(ctx, clusterRoles, rbac.ClusterRoles().List,
		func(l *rbacv1.ClusterRoleList) []rbacv1.ClusterRole { return l.Items },
		func(r *rbacv1.ClusterRole) string { return r.Name }); err != nil {
		return fmt.Errorf("list clusterroles: %w", err)
	}
	if err := listInto(ctx, clusterBindings, rbac.ClusterRoleBindings().List,
		func(l *rbacv1.ClusterRoleBindingList) []rbacv1.ClusterRoleBinding { return l.Items },
		func(b *rbacv1.ClusterRoleBinding) string { return b.Name }); err != nil {
		return fmt.Errorf("list clusterrolebindings: %w", err)
	}
	for _, ns := range namespaces {
		if err := listInto(ctx, roles, rbac.Roles(ns).List,
			func(l *rbacv1.RoleList) []rbacv1.Role { return l.Items },
			func(r *rbacv1.Role) string { return r.Namespace + "/" + r.Name }); err != nil {
			return fmt.Errorf("list roles in %s: %w", ns, err)
		}
		if err := listInto(ctx, bindings, rbac.RoleBindings(ns).List,
			func(l *rbacv1.RoleBindingList) []rbacv1.RoleBinding { return l.Items },
			func(b *rbacv1.RoleBinding) string { return b.Namespace + "/" + b.Name }); err != nil {
			return fmt.Errorf("list rolebindings in %s: %w", ns, err)
		}
	}

	var jobs []rbacJob
	for _, r := range slices.Concat(bootstrappolicy.ClusterRoles(), bootstrappolicy.ControllerRoles()) {
		o := reconciliation.ReconcileRoleOptions{
			Role:    reconciliation.ClusterRoleRuleOwner{ClusterRole: &r},
			Client:  listedClusterRoles{reconciliation.ClusterRoleModifier{Client: rbac.ClusterRoles()}, clusterRoles},
			Confirm: true,
		}
		jobs = append(jobs, rbacJob{"clusterrole " + r.Name, func() error { _, err := o.Run(); return err }})
	}
	for _, b := range slices.Concat(bootstrappolicy.ClusterRoleBindings(), bootstrappolicy.ControllerRoleBindings()) {
		o := reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: &b},
			Client:      listedClusterRoleBindings{reconciliation.ClusterRoleBindingClientAdapter{Client: rbac.ClusterRoleBindings()}, clusterBindings},
			Confirm:     true,
		}
		jobs = append(jobs, rbacJob{"clusterrolebinding " + b.Name, func() error { _, err := o.Run(); return err }})
	}
	for _, ns := range namespaces {
		for _, r := range policyRoles[ns] {
			o := reconciliation.ReconcileRoleOptions{
				Role:    reconciliation.RoleRuleOwner{Role: &r},
				Client:  listedRoles{reconciliation.RoleModifier{Client: rbac, NamespaceClient: c.CoreV1().Namespaces()}, roles},
				Confirm: true,
			}
			jobs = append(jobs, rbacJob{"role " + ns + "/" + r.Name, func() error { _, err := o.Run(); return err }})
		}
		for _, b := range policyBindings[ns] {
			o := reconciliation.ReconcileRoleBindingOptions{
				RoleBinding: reconciliation.RoleBindingAdapter{RoleBinding: &b},
				Client:      listedRoleBindings{reconciliation.RoleBindingClientAdapter{Client: rbac, NamespaceClient: c.CoreV1().Namespaces()}, bindings},
				Confirm:     true,
			}
			jobs = append(jobs, rbacJob{"rolebinding " + ns + "/" + b.Name, func() error { _, err := o.Run(); return err }})
		}
	}
	return runRBACJobs(ctx, jobs)
}

// rbacJob reconciles one object of the policy.
type rbacJob struct {
	what string
	run  func() error
}

// runRBACJobs runs jobs on rbacWorkers goroutines, each with kube's retry
// of conflicts (and of a server briefly unavailable), and joins what
// failed.
func runRBACJobs(ctx context.Context, jobs []rbacJob) error {
	next := make(chan rbacJob)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for range rbacWorkers {
		wg.Go(func() {
			for j := range next {
				err := retry.OnError(retry.DefaultBackoff, func(err error) bool {
					return apierrors.IsConflict(err) || apierrors.IsServiceUnavailable(err)
				}, j.run)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("reconcile %s: %w", j.what, err))
					mu.Unlock()
				}
			}
		})
	}
feed:
	for _, j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// listed holds the objects of one kind as lists found them, by key
// (namespace/name, or name), and the keys already asked for.
type listed[T any] struct {
	mu    sync.Mutex
	items map[string]*T
	asked map[string]bool
}

func newListed[T any]() *listed[T] {
	return &listed[T]{items: map[string]*T{}, asked: map[string]bool{}}
}

// listInto adds to l the objects list returns.
func listInto[T, L any](ctx context.Context, l *listed[T], list func(context.Context, metav1.ListOptions) (L, error), items func(L) []T, key func(*T) string) error {
	got, err := list(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	objs := items(got)
	for i := range objs {
		l.items[key(&objs[i])] = &objs[i]
	}
	return nil
}

// first returns the object of key as listed (nil: none), and whether this
// is the first time key is asked for; a later ask is read from the server.
func (l *listed[T]) first(key string) (obj *T, first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first = !l.asked[key]
	l.asked[key] = true
	return l.items[key], first
}

// The reconciliation's clients, whose first Get of each object is
// answered from the list.

type listedClusterRoles struct {
	reconciliation.ClusterRoleModifier
	l *listed[rbacv1.ClusterRole]
}

func (m listedClusterRoles) Get(namespace, name string) (reconciliation.RuleOwner, error) {
	obj, first := m.l.first(name)
	switch {
	case !first:
		return m.ClusterRoleModifier.Get(namespace, name)
	case obj == nil:
		return nil, apierrors.NewNotFound(rbacv1.Resource("clusterroles"), name)
	}
	return reconciliation.ClusterRoleRuleOwner{ClusterRole: obj.DeepCopy()}, nil
}

type listedClusterRoleBindings struct {
	reconciliation.ClusterRoleBindingClientAdapter
	l *listed[rbacv1.ClusterRoleBinding]
}

func (m listedClusterRoleBindings) Get(namespace, name string) (reconciliation.RoleBinding, error) {
	obj, first := m.l.first(name)
	switch {
	case !first:
		return m.ClusterRoleBindingClientAdapter.Get(namespace, name)
	case obj == nil:
		return nil, apierrors.NewNotFound(rbacv1.Resource("clusterrolebindings"), name)
	}
	return reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: obj.DeepCopy()}, nil
}

type listedRoles struct {
	reconciliation.RoleModifier
	l *listed[rbacv1.Role]
}

func (m listedRoles) Get(namespace, name string) (reconciliation.RuleOwner, error) {
	obj, first := m.l.first(namespace + "/" + name)
	switch {
	case !first:
		return m.RoleModifier.Get(namespace, name)
	case obj == nil:
		return nil, apierrors.NewNotFound(rbacv1.Resource("roles"), name)
	}
	return reconciliation.RoleRuleOwner{Role: obj.DeepCopy()}, nil
}

type listedRoleBindings struct {
	reconciliation.RoleBindingClientAdapter
	l *listed[rbacv1.RoleBinding]
}

func (m listedRoleBindings) Get(namespace, name string) (reconciliation.RoleBinding, error) {
	obj, first := m.l.first(namespace + "/" + name)
	switch {
	case !first:
		return m.RoleBindingClientAdapter.Get(namespace, name)
	case obj == nil:
		return nil, apierrors.NewNotFound(rbacv1.Resource("rolebindings"), name)
	}
	return reconciliation.RoleBindingAdapter{RoleBinding: obj.DeepCopy()}, nil
}
