// Package controller holds the Guestbook reconciler.
package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	webappv1 "example.com/guestbook/api/v1"
)

// GuestbookReconciler keeps, for every Guestbook, a Deployment of its
// image and replicas that the Guestbook controls, and the Deployment's
// available replicas in the Guestbook's status.
type GuestbookReconciler struct {
	client.Client
}

// Reconcile brings the Guestbook req names and its Deployment in line.
func (r *GuestbookReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var gb webappv1.Guestbook
	if err := r.Get(ctx, req.NamespacedName, &gb); err != nil {
		// Deleted: the garbage collector deletes its Deployment.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	labels := map[string]string{"guestbook": gb.Name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: gb.Name, Namespace: gb.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, d, func() error {
		d.Spec.Replicas = &gb.Spec.Replicas
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		d.Spec.Template.Labels = labels
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "guestbook", Image: gb.Spec.Image}}
		return controllerutil.SetControllerReference(&gb, d, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	if gb.Status.AvailableReplicas == d.Status.AvailableReplicas {
		return ctrl.Result{}, nil
	}
	gb.Status.AvailableReplicas = d.Status.AvailableReplicas
	return ctrl.Result{}, r.Status().Update(ctx, &gb)
}

// SetupWithManager registers the reconciler: Guestbooks, and the
// Deployments they own.
func (r *GuestbookReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&webappv1.Guestbook{}).Owns(&appsv1.Deployment{}).Complete(r)
}
