package compat_test

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fooReconciler is k8s.io/sample-controller written with controller-runtime:
// for every Foo, a Deployment it controls with the Foo's replicas, and the
// Deployment's available replicas in the Foo's status. Its line count is
// the one issue 21 compares with listwatch's examples/samplecontroller.
type fooReconciler struct {
	client.Client
	events events.EventRecorder
}

// setupFooController registers the controller with mgr: Foos, and the
// Deployments they control.
func setupFooController(mgr ctrl.Manager) error {
	r := &fooReconciler{Client: mgr.GetClient(), events: mgr.GetEventRecorder("sample-controller")}
	return ctrl.NewControllerManagedBy(mgr).For(&Foo{}).Owns(&appsv1.Deployment{}).Complete(r)
}

func (r *fooReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var foo Foo
	if err := r.Get(ctx, req.NamespacedName, &foo); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // deleted: the garbage collector takes its Deployment
	}
	if foo.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // going, and its Deployment with it
	}
	if foo.Spec.DeploymentName == "" {
		return ctrl.Result{}, nil // nothing to do until the user names one
	}
	var d appsv1.Deployment
	err := r.Get(ctx, client.ObjectKey{Namespace: foo.Namespace, Name: foo.Spec.DeploymentName}, &d)
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, r.Create(ctx, newFooDeployment(&foo))
	case err != nil:
		return ctrl.Result{}, err
	case !metav1.IsControlledBy(&d, &foo):
		msg := fmt.Sprintf("Resource %q already exists and is not managed by Foo", d.Name)
		r.events.Eventf(&foo, nil, corev1.EventTypeWarning, "ErrResourceExists", "Sync", msg)
		return ctrl.Result{}, fmt.Errorf("%s", msg)
	}
	if foo.Spec.Replicas != nil && (d.Spec.Replicas == nil || *d.Spec.Replicas != *foo.Spec.Replicas) {
		return ctrl.Result{}, r.Update(ctx, newFooDeployment(&foo))
	}
	if foo.Status.AvailableReplicas != d.Status.AvailableReplicas {
		foo.Status.AvailableReplicas = d.Status.AvailableReplicas
		if err := r.Status().Update(ctx, &foo); err != nil {
			return ctrl.Result{}, err
		}
	}
	r.events.Eventf(&foo, nil, corev1.EventTypeNormal, "Synced", "Sync", "Foo synced successfully")
	return ctrl.Result{}, nil
}

// newFooDeployment is the Deployment of foo: nginx pods, controlled by foo.
func newFooDeployment(foo *Foo) *appsv1.Deployment {
	labels := map[string]string{"app": "nginx", "controller": foo.Name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:            foo.Spec.DeploymentName,
			Namespace:       foo.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(foo, fooGVK)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: foo.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:latest"}}},
			},
		},
	}
}
