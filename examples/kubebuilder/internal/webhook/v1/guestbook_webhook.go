// Package v1 holds the webhooks of webapp.example.com's Guestbook, as
// `kubebuilder create webhook --version v1 --kind Guestbook --conversion
// --spoke v2` lays them out: the conversion between v1 (the hub) and v2,
// served at /convert by the manager's webhook server.
package v1

import (
	ctrl "sigs.k8s.io/controller-runtime"

	webappv1 "example.com/guestbook/api/v1"
)

// SetupGuestbookWebhookWithManager registers the Guestbook webhooks with
// mgr: controller-runtime's conversion handler, since the manager's
// scheme holds v1 as the hub and v2 as a spoke.
func SetupGuestbookWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &webappv1.Guestbook{}).Complete()
}
