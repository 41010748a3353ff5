// Package admissionpolicystatus is the validatingadmissionpolicy-status
// controller of kube-controller-manager: each new generation of a
// ValidatingAdmissionPolicy has its CEL expressions type-checked against
// the schemas of the kinds it matches, and the warnings (an expression
// that refers to a field the kind lacks, or compares values of different
// types) are applied to status.typeChecking with status.observedGeneration.
// The type checking is kube's own (k8s.io/apiserver's TypeChecker), on the
// schemas the API server publishes at /openapi/v3; the status is written by
// server-side apply with kube's field manager, forced, as kube's
// controller writes it.
package admissionpolicystatus

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/objclient"
)

// FieldManager is the manager the status is applied as, the one
// kube-controller-manager uses.
const FieldManager = "validatingadmissionpolicy-status"

// Client is the controller's access to the API server. Errors must be
// recognisable by k8s.io/apimachinery/pkg/api/errors.
type Client interface {
	// ApplyStatus makes status the status of ValidatingAdmissionPolicy
	// name, by a forced server-side apply of its status subresource as
	// FieldManager.
	ApplyStatus(ctx context.Context, name string, status admissionregistrationv1.ValidatingAdmissionPolicyStatus) error
}

// NewClient returns the Client that talks to an API server through c.
func NewClient(c *client.Client) Client {
	return restClient{policies: client.For[*admissionregistrationv1.ValidatingAdmissionPolicy](c, "")}
}

type restClient struct {
	policies *client.Resource[*admissionregistrationv1.ValidatingAdmissionPolicy]
}

// ApplyStatus sends the apply configuration kube's controller sends: the
// policy's identity and its status alone.
func (r restClient) ApplyStatus(ctx context.Context, name string, status admissionregistrationv1.ValidatingAdmissionPolicyStatus) error {
	return objclient.Apply(ctx, r.policies, admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy"), name, FieldManager,
		map[string]any{"status": status}, "status")
}

// Checker type-checks a policy's expressions and returns the warnings.
type Checker interface {
	Check(policy *admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ExpressionWarning
}

// NewChecker returns kube's type checker on the API server cfg reaches:
// the kinds a policy matches are resolved through its discovery and
// their schemas read from its /openapi/v3.
func NewChecker(cfg *rest.Config) (Checker, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("admissionpolicystatus: discovery client: %w", err)
	}
	return &validating.TypeChecker{
		SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: dc},
		RestMapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
	}, nil
}

// Options tune the controller; the zero value is kube-controller-manager's
// configuration.
type Options struct {
	// Controller tunes the workers (one when not positive;
	// kube-controller-manager runs five, but policies are few), retries,
	// logs and metrics.
	Controller controller.Options
}

// Controller writes the type checking of every ValidatingAdmissionPolicy.
type Controller struct {
	*controller.Controller[string]
	policies cache.Lister[*admissionregistrationv1.ValidatingAdmissionPolicy]
	client   Client
	checker  Checker
}

// New returns the controller of the policies of the informer. A policy is
// synced when it is added, updated or deleted (which syncs nothing).
func New(policies cache.Informer[*admissionregistrationv1.ValidatingAdmissionPolicy], client Client, checker Checker, opts Options) (*Controller, error) {
	if policies == nil || client == nil || checker == nil {
		return nil, errors.New("admissionpolicystatus: an informer, a client and a checker are required")
	}
	c := &Controller{
		policies: cache.NewLister(policies.GetIndexer(), admissionregistrationv1.Resource("validatingadmissionpolicies")),
		client:   client,
		checker:  checker,
	}
	var err error
	c.Controller, err = controller.New(FieldManager, c.sync, opts.Controller, controller.For(policies))
	if err != nil {
		return nil, fmt.Errorf("admissionpolicystatus: %w", err)
	}
	return c, nil
}

// sync type-checks policy name when its generation is newer than the one
// its status reports, and applies the result.
func (c *Controller) sync(ctx context.Context, name string) (controller.Result, error) {
	policy, err := c.policies.Get(name)
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if policy.Generation <= policy.Status.ObservedGeneration {
		return controller.Result{}, nil
	}
	status := admissionregistrationv1.ValidatingAdmissionPolicyStatus{
		ObservedGeneration: policy.Generation,
		TypeChecking:       &admissionregistrationv1.TypeChecking{ExpressionWarnings: c.checker.Check(policy)},
	}
	if err := c.client.ApplyStatus(ctx, name, status); err != nil {
		return controller.Result{}, fmt.Errorf("apply the status of validatingadmissionpolicy %s: %w", name, err)
	}
	c.Logger().Debug("type-checked policy", "validatingadmissionpolicy", name, "generation", policy.Generation, "warnings", len(status.TypeChecking.ExpressionWarnings))
	return controller.Result{}, nil
}
