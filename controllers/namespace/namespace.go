// Package namespace is the namespace controller of kube-controller-manager:
// it empties the namespaces being deleted. The API server keeps a deleted
// namespace, Terminating, while its spec.finalizers hold "kubernetes"; the
// controller then deletes every object of every namespaced resource the
// server serves (found through discovery, so custom resources too) in it,
// pods first, reports its progress in the namespace's status conditions,
// waits for what is still going away (pods in their grace period, objects
// held by finalizers), and when nothing is left removes its finalizer
// through the namespace's finalize subresource, upon which the server
// removes the namespace.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
)

// Defaults of Options, kube-controller-manager's.
const (
	// DefaultWorkers is --concurrent-namespace-syncs.
	DefaultWorkers = 10
	// DefaultDeletionGracePeriod is how long an event about a namespace
	// being deleted waits before it is acted on: time for every API server
	// to see the namespace Terminating (and refuse new content in it), and
	// for creations racing the deletion to land, so that the controller
	// finds them.
	DefaultDeletionGracePeriod = 5 * time.Second
	// DefaultRetryMaxDelay bounds the backoff of a failed namespace: the
	// namespaces being deleted are few, and someone is usually waiting.
	DefaultRetryMaxDelay = time.Minute
	// FinalizerKubernetes is the token of spec.finalizers the controller
	// removes once the namespace is empty.
	FinalizerKubernetes = corev1.FinalizerKubernetes
)

// finalizerEstimate is the wait, in seconds, assumed for objects held by
// finalizers to go.
const finalizerEstimate = 15

// Options tune the controller; the zero value is kube-controller-manager's
// configuration.
type Options struct {
	// DeletionGracePeriod delays the handling of a namespace's events;
	// DefaultDeletionGracePeriod when zero, no delay when negative.
	DeletionGracePeriod time.Duration
	// FinalizerToken is the token of spec.finalizers the controller owns;
	// FinalizerKubernetes when empty.
	FinalizerToken corev1.FinalizerName
	// Controller tunes the workers (DefaultWorkers when not positive),
	// retries (at most DefaultRetryMaxDelay apart when not set), logs and
	// metrics.
	Controller controller.Options
}

// Controller deletes the content of namespaces being deleted.
type Controller struct {
	*controller.Controller[string]
	lister cache.Lister[*corev1.Namespace]
	client Client
	grace  time.Duration
	token  corev1.FinalizerName
	log    *slog.Logger
	// now is the clock of estimates and condition times.
	now func() time.Time
}

// New returns the controller of the namespaces of the namespaces
// informer. A namespace being deleted is synced after the grace period
// that follows each of its events, and again for as long as content
// remains in it.
func New(namespaces cache.Informer[*corev1.Namespace], client Client, opts Options) (*Controller, error) {
	if namespaces == nil || client == nil {
		return nil, errors.New("namespace: an informer and a client are required")
	}
	if opts.Controller.Workers <= 0 {
		opts.Controller.Workers = DefaultWorkers
	}
	if opts.Controller.RetryMaxDelay <= 0 {
		opts.Controller.RetryMaxDelay = DefaultRetryMaxDelay
	}
	switch {
	case opts.DeletionGracePeriod == 0:
		opts.DeletionGracePeriod = DefaultDeletionGracePeriod
	case opts.DeletionGracePeriod < 0:
		opts.DeletionGracePeriod = 0
	}
	if opts.FinalizerToken == "" {
		opts.FinalizerToken = FinalizerKubernetes
	}
	c := &Controller{
		lister: cache.NewLister(namespaces.GetIndexer(), corev1.Resource("namespaces")),
		client: client,
		grace:  opts.DeletionGracePeriod,
		token:  opts.FinalizerToken,
		now:    time.Now,
	}
	var err error
	c.Controller, err = controller.New("namespace", c.sync, opts.Controller,
		controller.Handle[string](namespaces, cache.ResourceEventHandlerFuncs[*corev1.Namespace]{
			AddFunc:    func(ns *corev1.Namespace, _ bool) { c.enqueue(ns) },
			UpdateFunc: func(_, ns *corev1.Namespace) { c.enqueue(ns) },
		}))
	if err != nil {
		return nil, fmt.Errorf("namespace: %w", err)
	}
	c.log = c.Logger()
	return c, nil
}

// enqueue queues a namespace being deleted, after the grace period.
func (c *Controller) enqueue(ns *corev1.Namespace) {
	if ns.DeletionTimestamp == nil || ns.DeletionTimestamp.IsZero() {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(ns)
	if err != nil {
		return
	}
	if c.grace > 0 {
		c.Queue().AddAfter(key, c.grace)
		return
	}
	c.Queue().Add(key)
}

// sync empties the namespace key names if it is being deleted. Content
// that is going away but not gone yet syncs the namespace again after
// half the estimate of its going.
func (c *Controller) sync(ctx context.Context, key string) (controller.Result, error) {
	ns, err := c.lister.Get(key)
	if apierrors.IsNotFound(err) {
		c.log.Debug("namespace has been deleted", "namespace", key)
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	start := time.Now()
	estimate, err := c.deleteNamespace(ctx, ns.Name)
	c.log.Debug("synced namespace", "namespace", key, "duration", time.Since(start), "estimate", estimate, "err", err)
	if err != nil {
		return controller.Result{}, fmt.Errorf("deleting namespace %s: %w", key, err)
	}
	if estimate <= 0 {
		return controller.Result{}, nil
	}
	wait := requeueAfter(estimate)
	c.log.Debug("content remains in namespace", "namespace", key, "wait", wait)
	return controller.Result{RequeueAfter: wait}, nil
}

// requeueAfter is when a namespace whose content should be gone in
// estimate seconds is looked at again.
func requeueAfter(estimate int64) time.Duration {
	return time.Duration(estimate/2+1) * time.Second
}
