// Package serviceaccount is the service account controller of
// kube-controller-manager: it keeps the ServiceAccount "default" in every
// active namespace, creating it when a namespace appears and again when it
// is deleted. kube-apiserver's ServiceAccount admission gives every pod
// that names none the account "default" and refuses a pod whose account
// does not exist, so without this controller no pod of a new namespace
// could be created.
package serviceaccount

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/objclient"
)

// DefaultName is the account kept in every namespace.
const DefaultName = "default"

// Client is the controller's access to the API server. Errors must be
// recognisable by k8s.io/apimachinery/pkg/api/errors.
type Client interface {
	// Create creates sa in its namespace.
	Create(ctx context.Context, sa *corev1.ServiceAccount) (*corev1.ServiceAccount, error)
}

// NewClient returns the Client that talks to an API server through c.
func NewClient(c *client.Client) Client {
	return objclient.For[*corev1.ServiceAccount](c)
}

// Options tune the controller; the zero value is kube-controller-manager's
// configuration.
type Options struct {
	// Names are the accounts kept in every namespace; DefaultName alone
	// when empty.
	Names []string
	// Controller tunes the workers (one when not positive, as
	// kube-controller-manager runs it), retries, logs and metrics.
	Controller controller.Options
}

// Controller keeps the accounts of Options.Names in every active
// namespace.
type Controller struct {
	*controller.Controller[string]
	namespaces cache.Lister[*corev1.Namespace]
	accounts   cache.Lister[*corev1.ServiceAccount]
	client     Client
	names      []string
}

// New returns the controller of the namespaces and service accounts of
// the two informers. A namespace is synced when it is added or updated,
// and when one of its accounts is deleted.
func New(namespaces cache.Informer[*corev1.Namespace], accounts cache.Informer[*corev1.ServiceAccount], client Client, opts Options) (*Controller, error) {
	if namespaces == nil || accounts == nil || client == nil {
		return nil, errors.New("serviceaccount: two informers and a client are required")
	}
	names := opts.Names
	if len(names) == 0 {
		names = []string{DefaultName}
	}
	c := &Controller{
		namespaces: cache.NewLister(namespaces.GetIndexer(), corev1.Resource("namespaces")),
		accounts:   cache.NewLister(accounts.GetIndexer(), corev1.Resource("serviceaccounts")),
		client:     client,
		names:      names,
	}
	var err error
	c.Controller, err = controller.New("serviceaccount", c.sync, opts.Controller,
		controller.Handle[string](namespaces, cache.ResourceEventHandlerFuncs[*corev1.Namespace]{
			AddFunc:    func(ns *corev1.Namespace, _ bool) { c.Queue().Add(ns.Name) },
			UpdateFunc: func(_, ns *corev1.Namespace) { c.Queue().Add(ns.Name) },
		}),
		controller.Handle[string](accounts, cache.ResourceEventHandlerFuncs[*corev1.ServiceAccount]{
			DeleteFunc: func(sa *corev1.ServiceAccount, _ bool) { c.Queue().Add(sa.Namespace) },
		}))
	if err != nil {
		return nil, fmt.Errorf("serviceaccount: %w", err)
	}
	return c, nil
}

// sync creates the accounts missing from namespace key, if it is active.
// A namespace that went, or began terminating, meanwhile is no error.
func (c *Controller) sync(ctx context.Context, key string) (controller.Result, error) {
	ns, err := c.namespaces.Get(key)
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if ns.Status.Phase != corev1.NamespaceActive {
		return controller.Result{}, nil
	}
	var errs []error
	for _, name := range c.names {
		_, err := c.accounts.Namespace(key).Get(name)
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return controller.Result{}, err
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: key, Name: name}}
		_, err = c.client.Create(ctx, sa)
		switch {
		case err == nil:
			c.Logger().Debug("created service account", "namespace", key, "name", name)
		case apierrors.IsAlreadyExists(err), apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		default:
			errs = append(errs, fmt.Errorf("create service account %s/%s: %w", key, name, err))
		}
	}
	return controller.Result{}, errors.Join(errs...)
}
