// Package v1 holds the webhooks of webapp.example.com's Guestbook, as
// `kubebuilder create webhook --version v1 --kind Guestbook --defaulting
// --programmatic-validation --conversion --spoke v2` lays them out: a
// defaulting and a validating admission webhook for v1, and the
// conversion between v1 (the hub) and v2, all served by the manager's
// webhook server.
package v1

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	webappv1 "example.com/guestbook/api/v1"
)

// DefaultImage is the image a Guestbook created or updated without one
// runs.
const DefaultImage = "gcr.io/google-samples/gb-frontend:v4"

// MaxReplicas is the most replicas a Guestbook may ask for.
const MaxReplicas = 10

// SetupGuestbookWebhookWithManager registers the Guestbook webhooks with
// mgr: the defaulter at /mutate-webapp-example-com-v1-guestbook, the
// validator at /validate-webapp-example-com-v1-guestbook, and
// controller-runtime's conversion handler at /convert, since the
// manager's scheme holds v1 as the hub and v2 as a spoke.
func SetupGuestbookWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &webappv1.Guestbook{}).
		WithDefaulter(&GuestbookCustomDefaulter{}).
		WithValidator(&GuestbookCustomValidator{}).
		Complete()
}

// +kubebuilder:webhook:path=/mutate-webapp-example-com-v1-guestbook,mutating=true,failurePolicy=fail,sideEffects=None,groups=webapp.example.com,resources=guestbooks,verbs=create;update,versions=v1,name=mguestbook-v1.kb.io,admissionReviewVersions=v1

// GuestbookCustomDefaulter sets the defaults of a Guestbook created or
// updated: DefaultImage when it names no image. It runs before the
// API server validates the object against the CRD's schema, which
// requires an image.
type GuestbookCustomDefaulter struct{}

var _ admission.Defaulter[*webappv1.Guestbook] = &GuestbookCustomDefaulter{}

// Default sets the defaults of g.
func (d *GuestbookCustomDefaulter) Default(_ context.Context, g *webappv1.Guestbook) error {
	if g.Spec.Image == "" {
		g.Spec.Image = DefaultImage
	}
	return nil
}

// +kubebuilder:webhook:path=/validate-webapp-example-com-v1-guestbook,mutating=false,failurePolicy=fail,sideEffects=None,groups=webapp.example.com,resources=guestbooks,verbs=create;update,versions=v1,name=vguestbook-v1.kb.io,admissionReviewVersions=v1

// GuestbookCustomValidator refuses a Guestbook created or updated with
// more than MaxReplicas replicas, what the CRD's schema cannot say on
// its own terms for every version (v2 calls them size).
type GuestbookCustomValidator struct{}

var _ admission.Validator[*webappv1.Guestbook] = &GuestbookCustomValidator{}

// ValidateCreate validates a Guestbook being created.
func (v *GuestbookCustomValidator) ValidateCreate(_ context.Context, g *webappv1.Guestbook) (admission.Warnings, error) {
	return nil, validateGuestbook(g)
}

// ValidateUpdate validates a Guestbook being updated.
func (v *GuestbookCustomValidator) ValidateUpdate(_ context.Context, _, g *webappv1.Guestbook) (admission.Warnings, error) {
	return nil, validateGuestbook(g)
}

// ValidateDelete allows every deletion; the webhook is not called for
// them (its verbs are create and update).
func (v *GuestbookCustomValidator) ValidateDelete(context.Context, *webappv1.Guestbook) (admission.Warnings, error) {
	return nil, nil
}

// validateGuestbook returns g's errors as a 422 Invalid status error
// (which the API server returns with its code, the message prefixed
// with the webhook's name), nil when it has none.
func validateGuestbook(g *webappv1.Guestbook) error {
	var errs field.ErrorList
	if g.Spec.Replicas > MaxReplicas {
		errs = append(errs, field.Invalid(field.NewPath("spec", "replicas"), g.Spec.Replicas, fmt.Sprintf("must be at most %d", MaxReplicas)))
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(webappv1.GroupVersion.WithKind("Guestbook").GroupKind(), g.Name, errs)
}
