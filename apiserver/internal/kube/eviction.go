package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/apis/policy"
	podstorage "k8s.io/kubernetes/pkg/registry/core/pod/storage"
	"k8s.io/utils/ptr"
)

// The pods/eviction subresource, as kube-apiserver's eviction storage
// (k8s.io/kubernetes/pkg/registry/core/pod/storage, EvictionREST) decides
// it. Kube's storage is built on its generic store and a client of its
// own API; the server runs the same steps on its own storage (eviction.go
// of package apiserver), with these pieces deciding each of them.

// EvictionKind is the kind pods/eviction is served as; its bodies may be
// policy/v1beta1 Evictions too.
var EvictionKind = policyv1.SchemeGroupVersion.WithKind("Eviction")

// EvictionRetry is kube's backoff for the conflicts of an eviction: the
// pod's reads and deletes, the budget's status writes.
var EvictionRetry = podstorage.EvictionsRetry

// Eviction decodes js, the body of an eviction of req's pod, as
// kube-apiserver's create handler does (any version of Eviction kube's
// scheme holds, with kube's 400s), checks its namespace against the
// request's, runs mutating admission on it, then its eviction storage's
// checks (the name against the URL's, 400;
// ignoreStoreReadErrorWithClusterBreakingPotential, 422; the dry-run of
// the request and of the body, which must agree) and validating
// admission. It returns the delete options of the eviction, the request's
// dry-run in them.
func Eviction(ctx context.Context, req Request, js []byte) (*metav1.DeleteOptions, error) {
	internal := &policy.Eviction{}
	dec := legacyscheme.Codecs.DecoderToVersion(jsonSerializer, policy.SchemeGroupVersion)
	def := EvictionKind
	if _, _, err := dec.Decode(js, &def, internal); err != nil {
		return nil, bodyError(EvictionKind, js)
	}
	if internal.Namespace != "" && internal.Namespace != req.Namespace {
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	chain, err := req.chain()
	if err != nil {
		return nil, err
	}
	resource := corev1.SchemeGroupVersion.WithResource("pods")
	a := attributesOf(req, EvictionKind, resource, internal, nil)
	if chain.fresh != nil {
		chain.fresh(ctx)
	}
	if chain.mutating != nil && chain.mutating.Handles(admission.Create) {
		if err := chain.mutating.Admit(ctx, a, admissionObjects); err != nil {
			return nil, err
		}
	}
	if internal.Name != req.Name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	if internal.DeleteOptions != nil && ptr.Deref(internal.DeleteOptions.IgnoreStoreReadErrorWithClusterBreakingPotential, false) {
		return nil, apierrors.NewInvalid(EvictionKind.GroupKind(), req.Name, field.ErrorList{
			field.Invalid(field.NewPath("deleteOptions").Child("ignoreStoreReadErrorWithClusterBreakingPotential"), true, "can not be set for pod eviction, try after removing the option"),
		})
	}
	var dryRun []string
	if req.DryRun {
		dryRun = []string{metav1.DryRunAll}
	}
	opts, err := propagateDryRun(internal, dryRun)
	if err != nil {
		return nil, err
	}
	if chain.validating != nil && chain.validating.Handles(admission.Create) {
		if err := chain.validating.Validate(ctx, attributesOf(req, EvictionKind, resource, internal.DeepCopy(), nil), admissionObjects); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

// propagateDryRun is kube's: the request's dry-run goes into the
// eviction's delete options, which may name it too but not otherwise
// (answered, as kube's storage returns it, with a bare 500).
func propagateDryRun(ev *policy.Eviction, dryRun []string) (*metav1.DeleteOptions, error) {
	switch {
	case ev.DeleteOptions == nil:
		return &metav1.DeleteOptions{DryRun: dryRun}, nil
	case len(ev.DeleteOptions.DryRun) == 0:
		ev.DeleteOptions.DryRun = dryRun
		return ev.DeleteOptions, nil
	case len(dryRun) == 0:
		return ev.DeleteOptions, nil
	case !reflect.DeepEqual(dryRun, ev.DeleteOptions.DryRun):
		return nil, unreasoned(fmt.Sprintf("Non-matching dry-run options in request and content: %v and %v", dryRun, ev.DeleteOptions.DryRun))
	}
	return ev.DeleteOptions, nil
}

// unreasoned is how kube-apiserver answers a plain error of a storage: a
// 500 with the error's text and no reason.
func unreasoned(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: msg}}
}

// EvictionSkipsBudgets reports whether pod is deleted with no look at its
// budgets: it is terminal, not yet running, or already being deleted.
func EvictionSkipsBudgets(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

// EvictionPinsVersion reports whether the delete of pod, evicted with no
// budget look, is made on the resourceVersion read (unless the client
// gave one): not for a pod terminal or being deleted, which no race can
// make healthy again.
func EvictionPinsVersion(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return false
	}
	return pod.DeletionTimestamp == nil
}

// PodBudgets returns the budgets of pdbs, of pod's namespace, whose
// selectors select pod; a budget whose selector does not parse selects
// nothing.
func PodBudgets(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) []policyv1.PodDisruptionBudget {
	var out []policyv1.PodDisruptionBudget
	for _, pdb := range pdbs {
		if pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	return out
}

// ErrTooManyBudgets is kube's answer to the eviction of a pod more than
// one budget selects: a Failure Status of code 500 written as the
// eviction's result.
var ErrTooManyBudgets = &apierrors.StatusError{ErrStatus: metav1.Status{
	Status:  metav1.StatusFailure,
	Code:    http.StatusInternalServerError,
	Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
}}

// EvictUnhealthy reports whether pod, not Ready, is evicted without
// spending pdb's budget: the budget's unhealthyPodEvictionPolicy is
// AlwaysAllow, or (IfHealthyBudget, the default) the budget is met.
func EvictUnhealthy(pod *corev1.Pod, pdb *policyv1.PodDisruptionBudget) bool {
	if podutil.IsPodReady(pod) {
		return false
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
		return true
	}
	return pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0
}

// BudgetBusy is kube's 429 for an eviction that a budget refuses while
// it is written or not yet observed.
func BudgetBusy(name string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: policyv1.DisruptionBudgetCause, Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", name)})
	return err
}

// BudgetConflicts is kube's answer when the budget's status could not be
// written for conflicts through every retry.
func BudgetConflicts(name string) error {
	return apierrors.NewTimeoutError(fmt.Sprintf("couldn't update PodDisruptionBudget %q due to conflicts", name), 10)
}

// SpendBudget is kube's check and decrement of pdb for the eviction of
// podName, on pdb in place: an error (429, or 403 when the budget is
// negative or holds too many evictions its controller has not seen) when
// the budget allows none; else one disruption fewer allowed, the
// DisruptionAllowed condition updated when none are left and, unless
// dryRun, podName recorded in disruptedPods at now. It reports whether
// the status is to be written (not on a dry run).
func SpendBudget(pdb *policyv1.PodDisruptionBudget, podName string, dryRun bool, now time.Time) (bool, error) {
	switch {
	case pdb.Status.ObservedGeneration < pdb.Generation:
		return false, BudgetBusy(pdb.Name)
	case pdb.Status.DisruptionsAllowed < 0:
		return false, budgetForbidden(pdb.Name, "pdb disruptions allowed is negative", "pdb disruptions allowed is negative")
	case len(pdb.Status.DisruptedPods) > podstorage.MaxDisruptedPodSize:
		return false, budgetForbidden(pdb.Name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
			"too many pending evictions not confirmed by PDB controller")
	case pdb.Status.DisruptionsAllowed == 0:
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type: policyv1.DisruptionBudgetCause, Message: budgetRefusal(pdb)})
		return false, err
	}
	pdb.Status.DisruptionsAllowed--
	if pdb.Status.DisruptionsAllowed == 0 {
		pdbhelper.UpdateDisruptionAllowedCondition(pdb)
	}
	if dryRun {
		return false, nil
	}
	if pdb.Status.DisruptedPods == nil {
		pdb.Status.DisruptedPods = map[string]metav1.Time{}
	}
	pdb.Status.DisruptedPods[podName] = metav1.Time{Time: now}
	return true, nil
}

// budgetRefusal is the cause kube gives when pdb allows no disruption.
func budgetRefusal(pdb *policyv1.PodDisruptionBudget) string {
	c := meta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	failed := c != nil && c.Status == metav1.ConditionFalse && len(c.Message) > 0
	switch {
	case failed && c.Reason == policyv1.SyncFailedReason:
		return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently because it failed sync: %s", pdb.Name, c.Message)
	case pdb.Status.CurrentHealthy <= pdb.Status.DesiredHealthy:
		return fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)
	case failed:
		return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently (%s): %s", pdb.Name, c.Reason, c.Message)
	}
	return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
}

// budgetForbidden is kube's 403 for a budget that allows no eviction at
// all.
func budgetForbidden(name, reason, cause string) error {
	err := apierrors.NewForbidden(policy.Resource("poddisruptionbudget"), name, errors.New(reason))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: policyv1.DisruptionBudgetCause, Message: fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: %s", name, cause)})
	return err
}

// MarkDisruptionTarget checks opts' preconditions against pod, the pod as
// stored (409 on Pod, as kube words it), and adds to it, in place, the
// DisruptionTarget condition kube's eviction sets before it deletes.
func MarkDisruptionTarget(pod *corev1.Pod, opts *metav1.DeleteOptions) error {
	if p := opts.Preconditions; p != nil {
		gr := schema.GroupResource{Resource: "Pod"}
		if uid := p.UID; uid != nil && len(*uid) > 0 && *uid != pod.UID {
			return apierrors.NewConflict(gr, pod.Name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *uid, pod.UID))
		}
		if rv := p.ResourceVersion; rv != nil && len(*rv) > 0 && *rv != pod.ResourceVersion {
			return apierrors.NewConflict(gr, pod.Name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *rv, pod.ResourceVersion))
		}
	}
	podutil.UpdatePodCondition(&pod.Status, &corev1.PodCondition{
		Type:    corev1.DisruptionTarget,
		Status:  corev1.ConditionTrue,
		Reason:  "EvictionByEvictionAPI",
		Message: "Eviction API: evicting",
	})
	return nil
}
