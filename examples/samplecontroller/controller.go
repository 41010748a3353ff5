package main

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
)

// Foo is k8s.io/sample-controller's custom resource: spec.deploymentName
// names a Deployment of spec.replicas nginx pods, whose available replicas
// go to status.availableReplicas. The example reads it unstructured.
var (
	fooGVK = schema.GroupVersionKind{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Kind: "Foo"}
	fooGVR = fooGVK.GroupVersion().WithResource("foos")
)

// Client writes what the controller makes: Deployments, and Foos' status.
type Client interface {
	CreateDeployment(ctx context.Context, d *appsv1.Deployment) error
	UpdateDeployment(ctx context.Context, d *appsv1.Deployment) error
	UpdateFooStatus(ctx context.Context, foo *unstructured.Unstructured) error
}

// errNotOurs is the terminal error of a Foo whose Deployment someone else
// controls: retrying changes nothing until that Deployment goes.
var errNotOurs = errors.New("deployment exists and is not controlled by the Foo")

// Controller is the sample controller: for every Foo, a Deployment it
// controls, with the Foo's replicas.
type Controller struct {
	*controller.Controller[string]
	foos        cache.Lister[*unstructured.Unstructured]
	deployments cache.Lister[*appsv1.Deployment]
	client      Client
}

// New returns the controller of the Foos of foos: it syncs a Foo when it
// changes and when a Deployment it controls does.
func New(foos cache.Informer[*unstructured.Unstructured], deployments cache.Informer[*appsv1.Deployment], client Client, opts controller.Options) (*Controller, error) {
	c := &Controller{
		foos:        cache.NewLister(foos.GetIndexer(), fooGVR.GroupResource()),
		deployments: cache.NewLister(deployments.GetIndexer(), appsv1.Resource("deployments")),
		client:      client,
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
	deploymentName, _, _ := unstructured.NestedString(foo.Object, "spec", "deploymentName")
	if deploymentName == "" {
		return controller.Result{}, controller.Terminal(fmt.Errorf("foo %s: spec.deploymentName is empty", key))
	}
	replicas, hasReplicas, _ := unstructured.NestedInt64(foo.Object, "spec", "replicas")

	deployment, err := c.deployments.Namespace(namespace).Get(deploymentName)
	switch {
	case apierrors.IsNotFound(err):
		// Created now, seen through the informer later.
		return controller.Result{}, c.client.CreateDeployment(ctx, newDeployment(foo, deploymentName, int32(replicas)))
	case err != nil:
		return controller.Result{}, err
	case !metav1.IsControlledBy(deployment, foo):
		return controller.Result{}, controller.Terminal(fmt.Errorf("foo %s: %s: %w", key, deploymentName, errNotOurs))
	}
	if hasReplicas && deployment.Spec.Replicas != nil && int64(*deployment.Spec.Replicas) != replicas {
		d := deployment.DeepCopy()
		d.Spec.Replicas = new(int32(replicas))
		return controller.Result{}, c.client.UpdateDeployment(ctx, d)
	}
	return controller.Result{}, c.updateFooStatus(ctx, foo, deployment)
}

// updateFooStatus writes the Deployment's available replicas to the
// Foo's status when they differ; the Foo from the cache is copied first.
func (c *Controller) updateFooStatus(ctx context.Context, foo *unstructured.Unstructured, d *appsv1.Deployment) error {
	have, _, _ := unstructured.NestedInt64(foo.Object, "status", "availableReplicas")
	if have == int64(d.Status.AvailableReplicas) {
		return nil
	}
	cp := foo.DeepCopy()
	if err := unstructured.SetNestedField(cp.Object, int64(d.Status.AvailableReplicas), "status", "availableReplicas"); err != nil {
		return controller.Terminal(err)
	}
	return c.client.UpdateFooStatus(ctx, cp)
}

// newDeployment is the Deployment of foo: nginx pods, controlled by foo so
// that the controller hears of its changes and the garbage collector
// deletes it with foo.
func newDeployment(foo *unstructured.Unstructured, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "nginx", "controller": foo.GetName()}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       foo.GetNamespace(),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(foo, fooGVK)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:latest"}}},
			},
		},
	}
}
