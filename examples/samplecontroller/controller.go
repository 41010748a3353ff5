package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
)

// Client writes what the controller makes: Deployments, and Foos' status.
type Client interface {
	CreateDeployment(ctx context.Context, d *appsv1.Deployment) error
	UpdateDeployment(ctx context.Context, d *appsv1.Deployment) error
	UpdateFooStatus(ctx context.Context, foo *Foo) error
}

// Event reasons, as k8s.io/sample-controller's.
const (
	// SuccessSynced: a Foo's Deployment and status are in line with it.
	SuccessSynced = "Synced"
	// ErrResourceExists: the Deployment a Foo names belongs to someone
	// else.
	ErrResourceExists = "ErrResourceExists"
)

// Controller is the sample controller: for every Foo, a Deployment it
// controls, with the Foo's replicas.
type Controller struct {
	*controller.Controller[string]
	foos        cache.Lister[*Foo]
	deployments cache.Lister[*appsv1.Deployment]
	client      Client
	events      controller.EventRecorder
}

// New returns the controller of the Foos of foos: it syncs a Foo when it
// changes and when a Deployment it controls does. No handler acts on a
// Foo's deletion: the garbage collector deletes its Deployment.
func New(foos cache.Informer[*Foo], deployments cache.Informer[*appsv1.Deployment], client Client, events controller.EventRecorder, opts controller.Options) (*Controller, error) {
	c := &Controller{
		foos:        cache.NewLister(foos.GetIndexer(), fooGVR.GroupResource()),
		deployments: cache.NewLister(deployments.GetIndexer(), appsv1.Resource("deployments")),
		client:      client,
		events:      events,
	}
	var err error
	c.Controller, err = controller.New("foo", c.syncHandler, opts,
		controller.For(foos),
		controller.Owns(deployments, fooGVK))
	return c, err
}

// syncHandler brings the Deployment of the Foo key names in line with it
// and writes the Deployment's available replicas to the Foo's status.
func (c *Controller) syncHandler(ctx context.Context, key string) (controller.Result, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return controller.Result{}, controller.Terminal(err)
	}
	foo, err := c.foos.Namespace(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil // deleted: the garbage collector takes its Deployment
	}
	if err != nil {
		return controller.Result{}, err
	}
	if foo.DeletionTimestamp != nil {
		// Going, and its Deployment with it: one made now (its old one
		// gone first in a foreground deletion) would outlive it.
		return controller.Result{}, nil
	}
	if foo.Spec.DeploymentName == "" {
		return controller.Result{}, controller.Terminal(fmt.Errorf("foo %s: spec.deploymentName is empty", key))
	}

	deployment, err := c.deployments.Namespace(namespace).Get(foo.Spec.DeploymentName)
	switch {
	case apierrors.IsNotFound(err):
		// Created now, seen through the informer later.
		return controller.Result{}, c.client.CreateDeployment(ctx, newDeployment(foo))
	case err != nil:
		return controller.Result{}, err
	case !metav1.IsControlledBy(deployment, foo):
		// Retried with backoff: the Deployment may go away.
		c.events.Eventf(foo, corev1.EventTypeWarning, ErrResourceExists, "Resource %q already exists and is not managed by Foo", deployment.Name)
		return controller.Result{}, fmt.Errorf("foo %s: deployment %s is not controlled by it", key, deployment.Name)
	}
	if foo.Spec.Replicas != nil && (deployment.Spec.Replicas == nil || *deployment.Spec.Replicas != *foo.Spec.Replicas) {
		return controller.Result{}, c.client.UpdateDeployment(ctx, newDeployment(foo))
	}
	if foo.Status.AvailableReplicas != deployment.Status.AvailableReplicas {
		// The Foo from the cache is shared: change a copy.
		foo = foo.DeepCopyObject().(*Foo)
		foo.Status.AvailableReplicas = deployment.Status.AvailableReplicas
		if err := c.client.UpdateFooStatus(ctx, foo); err != nil {
			return controller.Result{}, err
		}
	}
	c.events.Eventf(foo, corev1.EventTypeNormal, SuccessSynced, "Foo synced successfully")
	return controller.Result{}, nil
}

// newDeployment is the Deployment of foo: nginx pods, controlled by foo so
// that the controller hears of its changes and the garbage collector
// deletes it with foo.
func newDeployment(foo *Foo) *appsv1.Deployment {
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
