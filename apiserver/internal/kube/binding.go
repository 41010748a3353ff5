package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	apipod "k8s.io/kubernetes/pkg/api/pod"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/features"
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

// AssignPod binds pod to the node b targets, as kube-apiserver's binding
// storage changes the pod it reads (BindingREST's assignPod): a 409
// Conflict on pods/binding when the pod is being deleted, is bound
// already or still has scheduling gates; else spec.nodeName is set, the
// nominated node cleared, b's annotations (less the init-container ones
// kube drops) and, with PodTopologyLabelsAdmission, its labels copied,
// and the PodScheduled condition made True. pod is changed in place.
func AssignPod(pod *corev1.Pod, b *corev1.Binding) error {
	switch {
	case pod.DeletionTimestamp != nil:
		return bindingConflict(pod, fmt.Sprintf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
	case pod.Spec.NodeName != "":
		return bindingConflict(pod, fmt.Sprintf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
	case len(pod.Spec.SchedulingGates) != 0:
		return bindingConflict(pod, fmt.Sprintf("pod %s has non-empty .spec.schedulingGates", pod.Name))
	}
	pod.Spec.NodeName = b.Target.Name
	if utilfeature.DefaultFeatureGate.Enabled(features.ClearingNominatedNodeNameAfterBinding) {
		pod.Status.NominatedNodeName = ""
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	maps.Copy(pod.Annotations, b.Annotations)
	apipod.DropInitContainerAnnotations(pod.Annotations)
	if utilfeature.DefaultFeatureGate.Enabled(features.PodTopologyLabelsAdmission) && len(b.Labels) > 0 {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		maps.Copy(pod.Labels, b.Labels)
	}
	podutil.UpdatePodCondition(&pod.Status, &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
	return nil
}

// bindingConflict is kube-apiserver's answer when its binding storage
// refuses the pod's state: a conflict on pods/binding (the preconditions'
// conflicts are on pods).
func bindingConflict(pod *corev1.Pod, msg string) error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "pods/binding"}, pod.Name, errors.New(msg))
}
