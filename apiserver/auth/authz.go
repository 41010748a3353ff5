package auth

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/authorization/union"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/apis/rbac"
	rbacregistry "k8s.io/kubernetes/pkg/registry/rbac"
	clusterrolepolicy "k8s.io/kubernetes/pkg/registry/rbac/clusterrole/policybased"
	clusterrolebindingpolicy "k8s.io/kubernetes/pkg/registry/rbac/clusterrolebinding/policybased"
	rolepolicy "k8s.io/kubernetes/pkg/registry/rbac/role/policybased"
	rolebindingpolicy "k8s.io/kubernetes/pkg/registry/rbac/rolebinding/policybased"
	rbacregistryvalidation "k8s.io/kubernetes/pkg/registry/rbac/validation"
	rbacauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac"
)

// Authorization as kube-apiserver's for a kubeadm cluster (--authorization-
// mode Node,RBAC) without the Node authorizer: the system:masters group is
// allowed everything (kube's privileged-group authorizer), then kube's RBAC
// authorizer decides on the Roles, ClusterRoles and their bindings, read
// through the informers of the server's loopback client (Loopback), as
// kube-apiserver's RBAC authorizer reads them through its own.
//
// An informer lags the writes it follows by a moment. A request that RBAC
// would deny is decided again once the informers have seen the writes
// already stored (Loopback.Fresh), so that a client that has just bound
// itself a role is not refused on what the informers had not yet read; an
// allowed request pays nothing for it. A rules review waits for them
// before it lists (freshRules).

// policyStorage is the Create and Update of kube's policy-based RBAC
// storages (pkg/registry/rbac/*/policybased).
type policyStorage interface {
	Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error)
	Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error)
}

// initAuthorizer builds the authorizer on the loopback informers.
func (a *Auth) initAuthorizer() {
	rbacInformers := a.cfg.Loopback.Informers().Rbac().V1()
	roles := &rbacauthorizer.RoleGetter{Lister: rbacInformers.Roles().Lister()}
	roleBindings := &rbacauthorizer.RoleBindingLister{Lister: rbacInformers.RoleBindings().Lister()}
	clusterRoles := &rbacauthorizer.ClusterRoleGetter{Lister: rbacInformers.ClusterRoles().Lister()}
	clusterRoleBindings := &rbacauthorizer.ClusterRoleBindingLister{Lister: rbacInformers.ClusterRoleBindings().Lister()}
	rbacAuthz := rbacauthorizer.New(roles, roleBindings, clusterRoles, clusterRoleBindings)
	// union.New fails only on an empty or nil authorizer.
	unioned, _ := union.New(
		union.NamedAuthorizer{AuthorizerName: "kubernetes.io/system-privileged-group", Authorizer: authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)},
		union.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: rbacAuthz},
	)
	fresh := a.cfg.Loopback.Fresh
	authz := &freshAuthorizer{Authorizer: unioned, fresh: fresh}
	resolver := rbacregistryvalidation.NewDefaultRuleResolver(roles, roleBindings, clusterRoles, clusterRoleBindings)
	a.authorizer = authz
	a.rules = freshRules{RuleResolver: union.NewRuleResolvers(rbacAuthz), fresh: fresh}
	a.policies = map[schema.GroupResource]policyStorage{
		rbac.Resource("roles"):               rolepolicy.NewStorage(checkOnly{}, authz, resolver),
		rbac.Resource("clusterroles"):        clusterrolepolicy.NewStorage(checkOnly{}, authz, resolver),
		rbac.Resource("rolebindings"):        rolebindingpolicy.NewStorage(checkOnly{}, authz, resolver),
		rbac.Resource("clusterrolebindings"): clusterrolebindingpolicy.NewStorage(checkOnly{}, authz, resolver),
	}
}

// Authorizer is the server's authorizer, for the filters in front of it:
// kube-apiserver's, as described above.
func (a *Auth) Authorizer() authorizer.Authorizer { return a.authorizer }

// freshAuthorizer decides again, once the informers have caught up with
// the stored writes, a request it would deny.
type freshAuthorizer struct {
	authorizer.Authorizer
	fresh func(context.Context)
}

func (a *freshAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	d, reason, err := a.Authorizer.Authorize(ctx, attrs)
	if d == authorizer.DecisionAllow {
		return d, reason, err
	}
	a.fresh(ctx)
	return a.Authorizer.Authorize(ctx, attrs)
}

func (a *freshAuthorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// freshRules lists a user's rules once the informers have seen the
// writes already stored, so that a rules review made right after a
// binding lists what it grants, as an access review of it allows it.
type freshRules struct {
	authorizer.RuleResolver
	fresh func(context.Context)
}

func (r freshRules) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	r.fresh(ctx)
	return r.RuleResolver.RulesFor(ctx, u, namespace)
}

// EscalationCheck returns the check kube's RBAC registries make of a
// role or binding written (nil for other resources): a user may create or
// update a role only with rules it holds itself (or with the escalate
// verb on it), and a binding only to a role whose rules it holds (or with
// the bind verb on it). obj and old are the internal objects after
// mutating admission, as kube's storages see them; old is nil on create.
func (a *Auth) EscalationCheck(gr schema.GroupResource) func(ctx context.Context, obj, old runtime.Object) error {
	p, ok := a.policies[gr]
	if !ok {
		return nil
	}
	return func(ctx context.Context, obj, old runtime.Object) error {
		if _, ok := genericapirequest.UserFrom(ctx); !ok || rbacregistry.EscalationAllowed(ctx) {
			// No authentication in front of the routes (the handler
			// used on its own: every request is served, and there is
			// nobody whose rules could be escalated), or a member of
			// system:masters, which kube's storages let through first
			// (and the bootstrap policy's writes need not wait below).
			return nil
		}
		// The rule resolver reads the informers: let them catch up with
		// the roles and bindings stored before this write.
		a.cfg.Loopback.Fresh(ctx)
		var err error
		if old == nil {
			_, err = p.Create(ctx, obj, nil, nil)
		} else {
			var name string
			if name, err = nameOf(obj); err != nil {
				return err
			}
			ctx = context.WithValue(ctx, oldObjectKey{}, old)
			_, _, err = p.Update(ctx, name, rest.DefaultUpdatedObjectInfo(obj), nil, nil, false, nil)
		}
		// A binding to a missing role: the storage's NotFound names the
		// role, and kube-apiserver's create and update handlers answer it
		// as a NotFound of the resource written, under the role's name.
		var st apierrors.APIStatus
		if errors.As(err, &st) && apierrors.IsNotFound(err) && st.Status().Details != nil {
			return apierrors.NewNotFound(gr, st.Status().Details.Name)
		}
		return err
	}
}

// nameOf returns obj's name.
func nameOf(obj runtime.Object) (string, error) {
	m, ok := obj.(interface{ GetName() string })
	if !ok {
		return "", fmt.Errorf("auth: %T has no name", obj)
	}
	return m.GetName(), nil
}

// checkOnly is the storage under kube's policy-based RBAC storages: it
// stores nothing and hands back the object they let through, so that
// their checks decide and the server's own write path stores it. Update
// applies the (checking) update to the old object the context carries
// (oldObjectKey), as a store would.
type checkOnly struct {
	rest.StandardStorage
}

func (checkOnly) Create(_ context.Context, obj runtime.Object, _ rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	return obj, nil
}

func (checkOnly) Update(ctx context.Context, _ string, objInfo rest.UpdatedObjectInfo, _ rest.ValidateObjectFunc, _ rest.ValidateObjectUpdateFunc, _ bool, _ *metav1.UpdateOptions) (runtime.Object, bool, error) {
	old, _ := ctx.Value(oldObjectKey{}).(runtime.Object)
	obj, err := objInfo.UpdatedObject(ctx, old)
	return obj, false, err
}

type oldObjectKey struct{}
