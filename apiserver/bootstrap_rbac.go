package apiserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-helpers/auth/rbac/reconciliation"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/storage"

	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

// rbacWorkers is how many objects of the bootstrap policy are reconciled
// (or written) at once: each is a read and a write, mostly waiting on
// storage.
const rbacWorkers = 8

// rbacPolicy is kube's bootstrap RBAC policy.
type rbacPolicy struct {
	clusterRoles    []rbacv1.ClusterRole
	clusterBindings []rbacv1.ClusterRoleBinding
	roles           map[string][]rbacv1.Role
	bindings        map[string][]rbacv1.RoleBinding
	// namespaces holds roles or bindings, sorted.
	namespaces []string
}

// bootstrapRBAC is kube's policy, built once per process: tests start
// many servers. Its objects are shared, so users copy before they hand
// one to anything that might change it.
var bootstrapRBAC = sync.OnceValue(func() *rbacPolicy {
	p := &rbacPolicy{
		clusterRoles:    slices.Concat(bootstrappolicy.ClusterRoles(), bootstrappolicy.ControllerRoles()),
		clusterBindings: slices.Concat(bootstrappolicy.ClusterRoleBindings(), bootstrappolicy.ControllerRoleBindings()),
		roles:           bootstrappolicy.NamespaceRoles(),
		bindings:        bootstrappolicy.NamespaceRoleBindings(),
	}
	p.namespaces = slices.Sorted(maps.Keys(p.roles))
	for ns := range p.bindings {
		if !slices.Contains(p.namespaces, ns) {
			p.namespaces = append(p.namespaces, ns)
		}
	}
	slices.Sort(p.namespaces)
	return p
})

// policyObject is one object of the policy as the write path stored it
// on a fresh server, less what each create makes anew (uid,
// creationTimestamp, the time of its managedFields, resourceVersion).
type policyObject struct {
	plural string
	obj    object
}

// policyTemplates holds the whole policy as the first fresh server of the
// process created it through its write path (nil until then).
var policyTemplates atomic.Pointer[[]policyObject]

// ensureRBACPolicy reconciles the bootstrap RBAC policy as kube's hook
// does: every object, even when some fail, each with kube's
// reconciliation (k8s.io/component-helpers/auth/rbac/reconciliation) and a
// retry of conflicts. Three things differ, none visible in the result:
//
//   - The objects are reconciled several at a time rather than one by
//     one, and the reconciliation's first read of each object is answered
//     from one list of its kind taken at the start rather than from a read
//     of its own (a second read, after a create that lost a race, is a
//     read).
//   - On a fresh store (no RBAC object at all, and no ResourceQuota in the
//     policy's namespaces that would count its roles), the reconciliation
//     can only create every object. The first such server of the process
//     does so through its write path and keeps what was stored (fresh
//     servers starting meanwhile wait for it: awaitTemplates); a later
//     one writes those objects to its store directly, with a uid, a
//     creationTimestamp and a managedFields time of its own: what the
//     write path would store, without a request, a decode, defaulting,
//     validation and field management for each of ~120 objects (a third
//     of a start's CPU). TestPolicyFastPathStoresWhatTheWritePathStores
//     checks the two stores equal. An object that appeared meanwhile is
//     reconciled instead.
//   - The reconciliation's own calls take no context: ctx is checked
//     between objects.
func (s *Server) ensureRBACPolicy(ctx context.Context, c kubernetes.Interface) error {
	p := bootstrapRBAC()
	rbac := c.RbacV1()
	l := newListedPolicy()
	clusterRoles, clusterBindings, roles, bindings := l.clusterRoles, l.clusterBindings, l.roles, l.bindings
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
	quotas := 0
	for _, ns := range p.namespaces {
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
		q, err := c.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list resourcequotas in %s: %w", ns, err)
		}
		quotas += len(q.Items)
	}
	fresh := quotas == 0 && len(clusterRoles.items)+len(clusterBindings.items)+len(roles.items)+len(bindings.items) == 0

	// reconcile holds the reconciliation of each object, by policyKey;
	// order is kube's: cluster roles, their bindings, then by namespace.
	reconcile, order := reconcileJobs(c, p, l)

	if fresh {
		tmpl, done := awaitTemplates(ctx)
		defer done()
		if tmpl != nil && len(tmpl) == len(reconcile) {
			return s.writePolicy(ctx, c, p, tmpl, reconcile)
		}
	}
	jobs := make([]rbacJob, len(order))
	for i, key := range order {
		jobs[i] = reconcile[key]
	}
	created, err := runRBACJobs(ctx, jobs)
	if err != nil {
		return err
	}
	if fresh && len(created) == len(reconcile) {
		// In the policy's order, for a later server to write in it.
		at := make(map[string]int, len(order))
		for i, key := range order {
			at[key] = i
		}
		slices.SortFunc(created, func(x, y policyObject) int {
			return at[policyKey(x.plural, x.obj.GetNamespace(), x.obj.GetName())] - at[policyKey(y.plural, y.obj.GetNamespace(), y.obj.GetName())]
		})
		policyTemplates.CompareAndSwap(nil, &created)
	}
	return nil
}

// listedPolicy holds the RBAC objects the lists found, which answer the
// reconciliations' first reads.
type listedPolicy struct {
	clusterRoles    *listed[rbacv1.ClusterRole]
	clusterBindings *listed[rbacv1.ClusterRoleBinding]
	roles           *listed[rbacv1.Role]
	bindings        *listed[rbacv1.RoleBinding]
}

func newListedPolicy() listedPolicy {
	return listedPolicy{newListed[rbacv1.ClusterRole](), newListed[rbacv1.ClusterRoleBinding](), newListed[rbacv1.Role](), newListed[rbacv1.RoleBinding]()}
}

// reconcileJobs are the reconciliations of p's objects through c, their
// first reads answered from l, by policyKey; order lists the keys in
// kube's order: cluster roles, their bindings, then by namespace.
func reconcileJobs(c kubernetes.Interface, p *rbacPolicy, l listedPolicy) (reconcile map[string]rbacJob, order []string) {
	rbac := c.RbacV1()
	reconcile = map[string]rbacJob{}
	add := func(key string, j rbacJob) {
		reconcile[key] = j
		order = append(order, key)
	}
	for i := range p.clusterRoles {
		r := p.clusterRoles[i].DeepCopy()
		o := reconciliation.ReconcileRoleOptions{
			Role:    reconciliation.ClusterRoleRuleOwner{ClusterRole: r},
			Client:  listedClusterRoles{reconciliation.ClusterRoleModifier{Client: rbac.ClusterRoles()}, l.clusterRoles},
			Confirm: true,
		}
		add(policyKey("clusterroles", "", r.Name), roleJob("clusterroles", "clusterrole "+r.Name, o))
	}
	for i := range p.clusterBindings {
		b := p.clusterBindings[i].DeepCopy()
		o := reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: b},
			Client:      listedClusterRoleBindings{reconciliation.ClusterRoleBindingClientAdapter{Client: rbac.ClusterRoleBindings()}, l.clusterBindings},
			Confirm:     true,
		}
		add(policyKey("clusterrolebindings", "", b.Name), bindingJob("clusterrolebindings", "clusterrolebinding "+b.Name, o))
	}
	for _, ns := range p.namespaces {
		for i := range p.roles[ns] {
			r := p.roles[ns][i].DeepCopy()
			o := reconciliation.ReconcileRoleOptions{
				Role:    reconciliation.RoleRuleOwner{Role: r},
				Client:  listedRoles{reconciliation.RoleModifier{Client: rbac, NamespaceClient: c.CoreV1().Namespaces()}, l.roles},
				Confirm: true,
			}
			add(policyKey("roles", ns, r.Name), roleJob("roles", "role "+ns+"/"+r.Name, o))
		}
		for i := range p.bindings[ns] {
			b := p.bindings[ns][i].DeepCopy()
			o := reconciliation.ReconcileRoleBindingOptions{
				RoleBinding: reconciliation.RoleBindingAdapter{RoleBinding: b},
				Client:      listedRoleBindings{reconciliation.RoleBindingClientAdapter{Client: rbac, NamespaceClient: c.CoreV1().Namespaces()}, l.bindings},
				Confirm:     true,
			}
			add(policyKey("rolebindings", ns, b.Name), bindingJob("rolebindings", "rolebinding "+ns+"/"+b.Name, o))
		}
	}
	return reconcile, order
}

// templatesMaker, when not nil, is closed when the fresh server making
// the process's templates through its write path is done trying.
var (
	templatesMu    sync.Mutex
	templatesMaker chan struct{}
)

// templatesWait bounds how long a fresh server waits for another one
// making the templates: it then makes the policy itself, so that servers
// stay independent of one another should one be stuck.
const templatesWait = 10 * time.Second

// awaitTemplates returns the process's templates of the policy for a
// fresh server. When there are none yet, the first caller (until it
// calls done) makes them, through its write path, and the others wait
// for it (or for ctx, or templatesWait) rather than all doing the same
// work at once: tests in parallel start many servers at the same moment.
// A nil answer means: reconcile, and call done after.
func awaitTemplates(ctx context.Context) (tmpl []policyObject, done func()) {
	for {
		if t := policyTemplates.Load(); t != nil {
			return *t, func() {}
		}
		templatesMu.Lock()
		maker := templatesMaker
		if maker == nil {
			mine := make(chan struct{})
			templatesMaker = mine
			templatesMu.Unlock()
			return nil, func() {
				templatesMu.Lock()
				templatesMaker = nil
				templatesMu.Unlock()
				close(mine)
			}
		}
		templatesMu.Unlock()
		timer := time.NewTimer(templatesWait)
		select {
		case <-maker:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return nil, func() {}
		case <-timer.C:
			return nil, func() {}
		}
		// Made, or the maker failed (its server closed, say) and this
		// caller makes them.
	}
}

// policyKey names an object of the policy: its resource, namespace and
// name.
func policyKey(plural, namespace, name string) string {
	return plural + "/" + namespace + "/" + name
}

// writePolicy writes the policy's objects of tmpl straight to the store
// of a fresh server, each as the write path stored it on another server
// but for what every create makes anew; an object that exists by then
// (a client was quicker) is reconciled with its job of reconcile
// instead. The namespaces of the policy are made first, as the
// reconciliation of a namespaced object makes its namespace.
func (s *Server) writePolicy(ctx context.Context, c kubernetes.Interface, p *rbacPolicy, tmpl []policyObject, reconcile map[string]rbacJob) error {
	if err := ensureNamespaces(ctx, c, p.namespaces); err != nil {
		return err
	}
	// One time for every object, as a create in the same second would
	// have; the write path's are truncated to the second too (now).
	ts := now()
	jobs := make([]rbacJob, 0, len(tmpl))
	for _, t := range tmpl {
		key := policyKey(t.plural, t.obj.GetNamespace(), t.obj.GetName())
		jobs = append(jobs, rbacJob{what: key, plural: t.plural, run: func() (object, error) {
			err := s.writePolicyObject(ctx, t, ts)
			if j, ok := reconcile[key]; ok && errors.Is(err, storage.ErrKeyExists) {
				return j.run()
			}
			return nil, err
		}})
	}
	if _, err := runRBACJobs(ctx, jobs); err != nil {
		return err
	}
	s.log.Debug(policyWrittenMsg, "objects", len(jobs))
	return nil
}

// policyWrittenMsg is logged when writePolicy has stored the policy.
const policyWrittenMsg = "bootstrap RBAC policy written from the process's first fresh server's objects"

// writePolicyObject stores a copy of t with a new uid, creationTimestamp
// ts and ts as the time of its managedFields.
func (s *Server) writePolicyObject(ctx context.Context, t policyObject, ts metav1.Time) error {
	res := s.reg.Lookup(rbacv1.SchemeGroupVersion, t.plural)
	if res == nil {
		return fmt.Errorf("no resource %s of %s", t.plural, rbacv1.SchemeGroupVersion)
	}
	obj, ok := t.obj.DeepCopyObject().(object)
	if !ok {
		return fmt.Errorf("%T has no object metadata", t.obj)
	}
	obj.SetUID(types.UID(newUID()))
	obj.SetCreationTimestamp(ts)
	mf := obj.GetManagedFields()
	for i := range mf {
		mf[i].Time = &ts
	}
	obj.SetManagedFields(mf)
	value, err := registry.EncodeStored(obj)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Storage.Create(ctx, registry.KeyFor(res, obj.GetNamespace(), obj.GetName()), value); err != nil {
		return fmt.Errorf("store %s %s: %w", t.plural, obj.GetName(), err)
	}
	return nil
}

// rbacJob reconciles (or writes) one object of the policy.
type rbacJob struct {
	what string
	// plural is the resource of the object.
	plural string
	// run returns the object when it made it, as the server answered.
	run func() (object, error)
}

// roleJob is the reconciliation of a role or cluster role; plural names
// its resource.
func roleJob(plural, what string, o reconciliation.ReconcileRoleOptions) rbacJob {
	return rbacJob{what: what, plural: plural, run: func() (object, error) {
		r, err := o.Run()
		if err != nil || r.Operation != reconciliation.ReconcileCreate {
			return nil, err
		}
		return answered(plural, r.Role.GetObject())
	}}
}

// bindingJob is the reconciliation of a role binding or cluster role
// binding.
func bindingJob(plural, what string, o reconciliation.ReconcileRoleBindingOptions) rbacJob {
	return rbacJob{what: what, plural: plural, run: func() (object, error) {
		r, err := o.Run()
		if err != nil || r.Operation != reconciliation.ReconcileCreate {
			return nil, err
		}
		return answered(plural, r.RoleBinding.GetObject())
	}}
}

// answered is a created object as the server answered it, to be stored
// again: with its apiVersion and kind, which client-go's decoding drops,
// and no resourceVersion.
func answered(plural string, obj runtime.Object) (object, error) {
	o, err := registry.AsObject(obj.DeepCopyObject())
	if err != nil {
		return nil, err
	}
	kinds, _, err := registry.Scheme.ObjectKinds(o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", plural, err)
	}
	o.GetObjectKind().SetGroupVersionKind(kinds[0])
	o.SetResourceVersion("")
	return o, nil
}

// runRBACJobs runs jobs on rbacWorkers goroutines, each with kube's retry
// of conflicts (and of a server briefly unavailable), joins what failed,
// and returns the objects the jobs made.
func runRBACJobs(ctx context.Context, jobs []rbacJob) ([]policyObject, error) {
	next := make(chan rbacJob)
	var (
		mu      sync.Mutex
		errs    []error
		created []policyObject
		wg      sync.WaitGroup
	)
	for range rbacWorkers {
		wg.Go(func() {
			for j := range next {
				var obj object
				err := retry.OnError(retry.DefaultBackoff, func(err error) bool {
					return apierrors.IsConflict(err) || apierrors.IsServiceUnavailable(err)
				}, func() (err error) {
					obj, err = j.run()
					return err
				})
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("reconcile %s: %w", j.what, err))
				} else if obj != nil {
					created = append(created, policyObject{plural: j.plural, obj: obj})
				}
				mu.Unlock()
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
		return nil, err
	}
	return created, errors.Join(errs...)
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
