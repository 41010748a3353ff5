// Package rootcacert is the root CA certificate publisher of
// kube-controller-manager: it keeps, in every namespace, the ConfigMap
// kube-root-ca.crt holding the CA bundle that verifies the API server, which
// pods read through the kube-api-access volume ServiceAccount admission
// gives them. It creates the ConfigMap when a namespace appears or the
// ConfigMap is deleted, and puts its data and description back when they
// are changed.
package rootcacert

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/objclient"
)

// The ConfigMap, as kube-controller-manager writes it.
const (
	// ConfigMapName is the ConfigMap kept in every namespace.
	ConfigMapName = "kube-root-ca.crt"
	// DataKey is the key of the CA bundle in its data.
	DataKey = "ca.crt"
	// DescriptionAnnotation and Description say what it is for.
	DescriptionAnnotation = "kubernetes.io/description"
	Description           = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
		"No other usage is guaranteed across distributions of Kubernetes clusters."
)

// Client is the controller's access to the API server. Errors must be
// recognisable by k8s.io/apimachinery/pkg/api/errors.
type Client interface {
	// Create creates cm in its namespace.
	Create(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error)
	// Update replaces cm, with its resourceVersion as precondition.
	Update(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error)
}

// NewClient returns the Client that talks to an API server through c.
func NewClient(c *client.Client) Client {
	return objclient.For[*corev1.ConfigMap](c)
}

// Options tune the controller; the zero value is kube-controller-manager's
// configuration.
type Options struct {
	// Controller tunes the workers (one when not positive, as
	// kube-controller-manager runs it), retries, logs and metrics.
	Controller controller.Options
}

// Controller publishes the CA bundle in every namespace.
type Controller struct {
	*controller.Controller[string]
	configMaps cache.Lister[*corev1.ConfigMap]
	client     Client
	data       map[string]string
}

// New returns the publisher of rootCA (PEM) into the namespaces of the
// namespaces informer; configMaps is an informer of ConfigMaps holding at
// least those named ConfigMapName.
func New(namespaces cache.Informer[*corev1.Namespace], configMaps cache.Informer[*corev1.ConfigMap], client Client, rootCA []byte, opts Options) (*Controller, error) {
	if namespaces == nil || configMaps == nil || client == nil {
		return nil, errors.New("rootcacert: two informers and a client are required")
	}
	if len(rootCA) == 0 {
		return nil, errors.New("rootcacert: no root CA to publish")
	}
	c := &Controller{
		configMaps: cache.NewLister(configMaps.GetIndexer(), corev1.Resource("configmaps")),
		client:     client,
		data:       map[string]string{DataKey: string(rootCA)},
	}
	ours := func(cm *corev1.ConfigMap) {
		if cm.Name == ConfigMapName {
			c.Queue().Add(cm.Namespace)
		}
	}
	var err error
	c.Controller, err = controller.New("rootcacert", c.sync, opts.Controller,
		controller.Handle[string](namespaces, cache.ResourceEventHandlerFuncs[*corev1.Namespace]{
			AddFunc: func(ns *corev1.Namespace, _ bool) { c.Queue().Add(ns.Name) },
			UpdateFunc: func(_, ns *corev1.Namespace) {
				if ns.Status.Phase == corev1.NamespaceActive {
					c.Queue().Add(ns.Name)
				}
			},
		}),
		controller.Handle[string](configMaps, cache.ResourceEventHandlerFuncs[*corev1.ConfigMap]{
			UpdateFunc: func(_, cm *corev1.ConfigMap) { ours(cm) },
			DeleteFunc: func(cm *corev1.ConfigMap, _ bool) { ours(cm) },
		}))
	if err != nil {
		return nil, fmt.Errorf("rootcacert: %w", err)
	}
	return c, nil
}

// sync makes namespace key's ConfigMap hold the bundle. A namespace gone
// or terminating is no error.
func (c *Controller) sync(ctx context.Context, key string) (controller.Result, error) {
	cm, err := c.configMaps.Namespace(key).Get(ConfigMapName)
	if apierrors.IsNotFound(err) {
		_, err = c.client.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   key,
				Name:        ConfigMapName,
				Annotations: map[string]string{DescriptionAnnotation: Description},
			},
			Data: maps.Clone(c.data),
		})
		if err == nil || apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return controller.Result{}, nil
		}
		return controller.Result{}, fmt.Errorf("create %s/%s: %w", key, ConfigMapName, err)
	}
	if err != nil {
		return controller.Result{}, err
	}
	if maps.Equal(cm.Data, c.data) && cm.Annotations[DescriptionAnnotation] != "" {
		return controller.Result{}, nil
	}
	cm = cm.DeepCopy()
	cm.Data = maps.Clone(c.data)
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[DescriptionAnnotation] = Description
	if _, err := c.client.Update(ctx, cm); err != nil {
		return controller.Result{}, fmt.Errorf("update %s/%s: %w", key, ConfigMapName, err)
	}
	return controller.Result{}, nil
}
