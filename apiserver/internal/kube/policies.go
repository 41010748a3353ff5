package kube

import (
	"context"
	"errors"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"

	"k8s.io/kubernetes/pkg/apis/admissionregistration"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingadmissionpolicy"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingadmissionpolicybinding"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/resolver"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingadmissionpolicy"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingadmissionpolicybinding"
)

// The admission policies and their bindings are written through kube's
// strategies, which also check that the user writing one may read the
// parameters it names (spec.paramKind, spec.paramRef): they ask the
// server's authorizer, resolve the parameters' kind to a resource through
// the server's discovery, and read the policy a binding names, all as
// kube-apiserver's storages do over its loopback client. Those strategies
// belong to one server, so Admission holds them (policyEntries); the table
// below has them without an authorizer, which lets every write through
// the check, for the requests that carry no Admission.

var (
	validatingPolicies       = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies").GroupResource()
	validatingPolicyBindings = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicybindings").GroupResource()
	mutatingPolicies         = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicies").GroupResource()
	mutatingPolicyBindings   = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicybindings").GroupResource()
)

func init() {
	unresolved := resolver.ResourceResolverFunc(func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
		return schema.GroupVersionResource{}, errors.New("kube: no discovery to resolve kinds with")
	})
	for gr, e := range policyEntries(nil, unresolved, nil) {
		strategies[gr] = e
	}
}

// policyEntries are the strategies of the admission policies and their
// bindings, checking writes with authz (none when nil), resolving kinds
// with resolve and reading the policies a binding names through client.
func policyEntries(authz authorizer.UnconditionalAuthorizer, resolve resolver.ResourceResolver, client kubernetes.Interface) map[schema.GroupResource]entry {
	policies := policyGetter{client}
	vap := validatingadmissionpolicy.NewStrategy(authz, resolve)
	return map[schema.GroupResource]entry{
		validatingPolicies:       {main: vap, status: validatingadmissionpolicy.NewStatusStrategy(vap)},
		validatingPolicyBindings: {main: validatingadmissionpolicybinding.NewStrategy(authz, policies, resolve)},
		mutatingPolicies:         {main: mutatingadmissionpolicy.NewStrategy(authz, resolve)},
		mutatingPolicyBindings:   {main: mutatingadmissionpolicybinding.NewStrategy(authz, policies, resolve)},
	}
}

// policyGetter reads the policy a binding names, as the internal object
// kube's binding strategies take.
type policyGetter struct{ client kubernetes.Interface }

func (g policyGetter) GetValidatingAdmissionPolicy(ctx context.Context, name string) (*admissionregistration.ValidatingAdmissionPolicy, error) {
	in := &admissionregistration.ValidatingAdmissionPolicy{}
	return in, g.get(in, func(c kubernetes.Interface) (runtime.Object, error) {
		return c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
	})
}

func (g policyGetter) GetMutatingAdmissionPolicy(ctx context.Context, name string) (*admissionregistration.MutatingAdmissionPolicy, error) {
	in := &admissionregistration.MutatingAdmissionPolicy{}
	return in, g.get(in, func(c kubernetes.Interface) (runtime.Object, error) {
		return c.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
	})
}

// get reads a policy with read and converts it into in.
func (g policyGetter) get(in runtime.Object, read func(kubernetes.Interface) (runtime.Object, error)) error {
	if g.client == nil {
		return errors.New("kube: no client to read policies with")
	}
	ext, err := read(g.client)
	if err != nil {
		return err
	}
	return scheme.Convert(ext, in, nil)
}

// strategiesFor is the strategies of the resource k serves for req: the
// server's own for the admission policies (policyEntries), else the
// table's.
func (k *Rules) strategiesFor(req Request) entry {
	if req.Admission != nil {
		if e, ok := req.Admission.policies[k.gvr.GroupResource()]; ok {
			return e
		}
	}
	return k.entry
}
