package kube

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"

	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/validation"
)

// Binding is what kube-apiserver does with a Binding before it touches
// the pod: its create handler's mutating admission (PodTopologyLabels
// copies the target node's topology labels into the Binding), then its
// binding storage's checks (pkg/registry/core/pod/storage, BindingREST):
// the name against req.Name (400), kube's ValidatePodBinding, whose
// errors kube-apiserver answers as a bare 500, and validating admission.
// resource is pods, with req.Subresource "binding", or bindings. It
// returns the Binding as admitted.
func Binding(ctx context.Context, req Request, resource schema.GroupVersionResource, b *corev1.Binding) (*corev1.Binding, error) {
	chain, err := req.chain()
	if err != nil {
		return nil, err
	}
	internal := &api.Binding{}
	if err := scheme.Convert(b, internal, nil); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("binding: %w", err))
	}
	a := attributesOf(req, bindingKind, resource, internal, nil)
	if chain.fresh != nil {
		chain.fresh(ctx)
	}
	if chain.mutating != nil && chain.mutating.Handles(admission.Create) {
		if err := chain.mutating.Admit(ctx, a, admissionObjects); err != nil {
			return nil, err
		}
	}
	if internal.Name != req.Name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Binding object")
	}
	if errs := validation.ValidatePodBinding(internal); len(errs) > 0 {
		// Returned as a plain error by kube's storage, which its handler
		// answers with a 500 and no reason.
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: errs.ToAggregate().Error(),
		}}
	}
	if chain.validating != nil && chain.validating.Handles(admission.Create) {
		if err := chain.validating.Validate(ctx, a, admissionObjects); err != nil {
			return nil, err
		}
	}
	out := &corev1.Binding{}
	if err := scheme.Convert(internal, out, nil); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("binding: %w", err))
	}
	return out, nil
}
