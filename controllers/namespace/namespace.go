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
	"github.com/listwatch/listwatch/workqueue"
)

// Defaults of Options, kube-controller-manager's.
const (
	// DefaultWorkers is --concurrent-namespace-syncs.
	DefaultWorkers = 10
	// DefaultResyncPeriod is --namespace-sync-period.
	DefaultResyncPeriod = 5 * time.Minute
	// DefaultDeletionGracePeriod is how long an event about a namespace
	// being deleted waits before it is acted on: time for every API server
	// to see the namespace Terminating (and refuse new content in it), and
	// for creations racing the deletion to land, so that the controller
	// finds them.
	DefaultDeletionGracePeriod = 5 * time.Second
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
	// Workers is the number of namespaces synced at once; DefaultWorkers
	// when zero.
	Workers int
	// ResyncPeriod is how often every namespace is looked at again;
	// DefaultResyncPeriod when zero, none when negative.
	ResyncPeriod time.Duration
	// DeletionGracePeriod delays the handling of a namespace's events;
	// DefaultDeletionGracePeriod when zero, no delay when negative.
	DeletionGracePeriod time.Duration
	// FinalizerToken is the token of spec.finalizers the controller owns;
	// FinalizerKubernetes when empty.
	FinalizerToken corev1.FinalizerName
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics, when set, records the queue's metrics.
	Metrics workqueue.MetricsProvider
}

// Controller deletes the content of namespaces being deleted.
type Controller struct {
	namespaces *cache.SharedIndexInformer[*corev1.Namespace]
	lister     cache.Lister[*corev1.Namespace]
	client     Client
	queue      *workqueue.RateLimitingQueue[string]
	workers    int
	grace      time.Duration
	token      corev1.FinalizerName
	log        *slog.Logger
	runnerLog  *slog.Logger // without the controller attribute, which the Runner adds
	// now is the clock of estimates and condition times.
	now func() time.Time
}

// New registers the controller's handlers on the shared informer of
// namespaces.
func New(namespaces *cache.SharedIndexInformer[*corev1.Namespace], client Client, opts Options) (*Controller, error) {
	if namespaces == nil || client == nil {
		return nil, errors.New("namespace: an informer and a client are required")
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	switch {
	case opts.ResyncPeriod == 0:
		opts.ResyncPeriod = DefaultResyncPeriod
	case opts.ResyncPeriod < 0:
		opts.ResyncPeriod = 0
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
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Controller{
		namespaces: namespaces,
		lister:     namespaces.Lister(corev1.Resource("namespaces")),
		client:     client,
		queue:      workqueue.NewRateLimitingQueue(rateLimiter(), workqueue.Config{Name: "namespace", MetricsProvider: opts.Metrics}),
		workers:    opts.Workers,
		grace:      opts.DeletionGracePeriod,
		token:      opts.FinalizerToken,
		log:        opts.Logger.With("controller", "namespace"),
		runnerLog:  opts.Logger,
		now:        time.Now,
	}
	_, err := namespaces.AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs[*corev1.Namespace]{
		AddFunc:    func(ns *corev1.Namespace, _ bool) { c.enqueue(ns) },
		UpdateFunc: func(_, ns *corev1.Namespace) { c.enqueue(ns) },
	}, opts.ResyncPeriod)
	if err != nil {
		return nil, fmt.Errorf("namespace: %w", err)
	}
	return c, nil
}

// rateLimiter retries a failed namespace sooner than other controllers
// do, and at least once a minute: namespaces being deleted are few, and
// someone is usually waiting for them.
func rateLimiter() workqueue.RateLimiter[string] {
	return workqueue.NewMaxOfRateLimiter[string](
		workqueue.NewItemExponentialFailureRateLimiter[string](5*time.Millisecond, time.Minute),
		workqueue.NewBucketRateLimiter[string](10, 100),
	)
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
		c.queue.AddAfter(key, c.grace)
		return
	}
	c.queue.Add(key)
}

// Run runs the workers until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	r := controller.Runner[string]{Name: "namespace", Queue: c.queue, Sync: c.sync, Logger: c.runnerLog}
	return r.Run(ctx, c.workers, c.namespaces.HasSynced)
}

// sync empties the namespace key names if it is being deleted. Content
// that is going away but not gone yet queues the namespace again after
// half the estimate of its going.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, err := c.lister.Get(key)
	if apierrors.IsNotFound(err) {
		c.log.Debug("namespace has been deleted", "namespace", key)
		return nil
	}
	if err != nil {
		return err
	}
	start := time.Now()
	estimate, err := c.deleteNamespace(ctx, ns.Name)
	c.log.Debug("synced namespace", "namespace", key, "duration", time.Since(start), "estimate", estimate, "err", err)
	if err != nil {
		return fmt.Errorf("deleting namespace %s: %w", key, err)
	}
	if estimate > 0 {
		wait := requeueAfter(estimate)
		c.log.Debug("content remains in namespace", "namespace", key, "wait", wait)
		c.queue.AddAfter(key, wait)
	}
	return nil
}

// requeueAfter is when a namespace whose content should be gone in
// estimate seconds is looked at again.
func requeueAfter(estimate int64) time.Duration {
	return time.Duration(estimate/2+1) * time.Second
}
