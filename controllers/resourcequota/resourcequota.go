// Package resourcequota is kube-controller-manager's resource quota
// controller, on listwatch's controller package: it keeps every
// ResourceQuota's status — status.hard a copy of spec.hard, status.used
// the usage of what the quota counts in its namespace — which the API
// server's ResourceQuota admission reads and charges (until a quota's
// status is written, admission refuses what it counts: "status unknown
// for quota").
//
// Usage is kube's: its evaluators (k8s.io/kubernetes/pkg/quota) decide
// what a pod, a service or a claim uses and which quota scopes it falls
// in, and count the objects of every other resource ("count/<resource>.
// <group>", and the legacy "configmaps", "secrets", ...). They read the
// objects from the informers the controller is given (Counted), which the
// controller-manager shares with its other controllers: pods, services
// and claims whole, everything else as metadata.
//
// A quota is recalculated whole, as kube does, when its spec.hard
// changes, when an object it counts is deleted or stops counting (a pod
// that finished, a service whose type changed, a claim resized — kube's
// update filter), and every ResyncPeriod. Creations are charged by
// admission, not here.
//
// Not done: the quota monitor's rediscovery — resources served after the
// controller started (a CustomResourceDefinition created later) are not
// counted until it restarts; kube's second queue, which puts quotas whose
// usage is missing first.
package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	clientcache "k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/quota/v1/evaluator/core"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/defaults"
)

// DefaultWorkers is kube-controller-manager's
// --concurrent-resource-quota-syncs.
const DefaultWorkers = 5

// DefaultResyncPeriod is kube-controller-manager's
// --resource-quota-sync-period: how often every quota is recalculated
// whole.
const DefaultResyncPeriod = 5 * time.Minute

// Options tune a Controller; the zero value is kube's.
type Options struct {
	// ResyncPeriod is how often each quota is recalculated whole;
	// DefaultResyncPeriod when not positive.
	ResyncPeriod time.Duration
	// Controller tunes the workers (DefaultWorkers when not positive),
	// retries, logs and metrics.
	Controller controller.Options
}

// Controller is the resource quota controller. Make it with New and run
// it once with Run.
type Controller struct {
	*controller.Controller[string]
	quotas   cache.Lister[*corev1.ResourceQuota]
	registry quota.Registry
	client   *client.Resource[*corev1.ResourceQuota]
	resync   time.Duration
}

var (
	resourceQuotas = corev1.SchemeGroupVersion.WithResource("resourcequotas")
	resourceClaims = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}
)

// New returns the controller over the shared ResourceQuota informer,
// counting the objects of counted, and writing quotas' status through c.
// Pods, services and persistent volume claims, when counted, must come
// whole (CountedBy with their Go types): kube's evaluators read their
// specs.
func New(quotas cache.Informer[*corev1.ResourceQuota], counted []Counted, c *client.Client, opts Options) (*Controller, error) {
	if quotas == nil || c == nil {
		return nil, errors.New("resourcequota: New needs the ResourceQuota informer and a client")
	}
	defaults.Positive(&opts.Controller.Workers, DefaultWorkers)
	defaults.Positive(&opts.ResyncPeriod, DefaultResyncPeriod)

	listers := make(map[schema.GroupVersionResource]clientcache.GenericLister, len(counted))
	for _, r := range counted {
		if r.metadataOnly && wholeObjects[r.GVR] {
			return nil, fmt.Errorf("resourcequota: %s must be counted from an informer of whole objects, not metadata", r.GVR)
		}
		listers[r.GVR] = r.lister
	}
	listerFor := func(gvr schema.GroupVersionResource) (clientcache.GenericLister, error) {
		if l, ok := listers[gvr]; ok {
			return l, nil
		}
		return nil, fmt.Errorf("resourcequota: %s is not counted", gvr)
	}
	evaluators, err := core.NewEvaluators(listerFor, nil, func(gvr schema.GroupVersionResource) bool {
		_, ok := listers[gvr]
		// kube's evaluator of resource claims (DRA) reads device classes
		// and pods through a client-go informer factory of its own, which
		// is not given here (it would dereference the nil one): claims
		// are counted by number, as any other resource.
		return ok && gvr != resourceClaims
	})
	if err != nil {
		return nil, fmt.Errorf("resourcequota: %w", err)
	}
	registry := generic.NewRegistry(evaluators)
	// Every other resource counted is counted by number, as kube's quota
	// monitor does for each resource discovery names.
	for _, r := range counted {
		if registry.Get(r.GVR.GroupResource()) == nil {
			registry.Add(generic.NewObjectCountEvaluator(r.GVR.GroupResource(), generic.ListResourceUsingListerFunc(listerFor, r.GVR), ""))
		}
	}

	rc := &Controller{
		quotas:   cache.NewLister(quotas.GetIndexer(), resourceQuotas.GroupResource()),
		registry: registry,
		client:   client.For[*corev1.ResourceQuota](c, ""),
		resync:   opts.ResyncPeriod,
	}
	enqueue := func(q *corev1.ResourceQuota) { rc.Queue().Add(q.Namespace + "/" + q.Name) }
	sources := []controller.Source[string]{
		controller.Handle[string](quotas, cache.ResourceEventHandlerFuncs[*corev1.ResourceQuota]{
			AddFunc: func(q *corev1.ResourceQuota, _ bool) { enqueue(q) },
			// Only a change of spec.hard asks for a recalculation: the
			// status is this controller's and admission's to write.
			UpdateFunc: func(old, cur *corev1.ResourceQuota) {
				if !quota.Equals(old.Spec.Hard, cur.Spec.Hard) {
					enqueue(cur)
				}
			},
			DeleteFunc: func(q *corev1.ResourceQuota, _ bool) { enqueue(q) },
		}),
	}
	for _, r := range counted {
		sources = append(sources, r.source(rc.replenish))
	}
	rc.Controller, err = controller.New("resourcequota", rc.sync, opts.Controller, sources...)
	if err != nil {
		return nil, fmt.Errorf("resourcequota: %w", err)
	}
	return rc, nil
}

// wholeObjects are the resources whose evaluators read more than
// metadata.
var wholeObjects = map[schema.GroupVersionResource]bool{
	corev1.SchemeGroupVersion.WithResource("pods"):                   true,
	corev1.SchemeGroupVersion.WithResource("services"):               true,
	corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"): true,
}

// replenish queues the quotas of namespace that count resource gr, whose
// usage there has just gone down.
func (rc *Controller) replenish(gr schema.GroupResource, namespace string) {
	evaluator := rc.registry.Get(gr)
	if evaluator == nil {
		return
	}
	quotas, err := rc.quotas.Namespace(namespace).List(nil)
	if err != nil {
		return
	}
	for _, q := range quotas {
		if len(evaluator.MatchingResources(quota.ResourceNames(q.Status.Hard))) > 0 {
			rc.Queue().Add(q.Namespace + "/" + q.Name)
		}
	}
}

// sync recalculates the usage of the quota at key and writes its status
// when it changed, as kube's syncResourceQuota does: status.hard becomes
// spec.hard, status.used the usage of each resource of it — those kube's
// evaluators could not count keep their last usage, and the error is
// returned (the key retried) once the rest is written.
func (rc *Controller) sync(ctx context.Context, key string) (controller.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return controller.Result{}, controller.Terminal(err)
	}
	q, err := rc.quotas.Namespace(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	dirty := !apiequality.Semantic.DeepEqual(q.Spec.Hard, q.Status.Hard) || q.Status.Hard == nil || q.Status.Used == nil
	used := corev1.ResourceList{}
	if q.Status.Used != nil {
		used = quota.Add(corev1.ResourceList{}, q.Status.Used)
	}
	hard := quota.Add(corev1.ResourceList{}, q.Spec.Hard)
	newUsage, usageErr := quota.CalculateUsage(q.Namespace, q.Spec.Scopes, hard, rc.registry, q.Spec.ScopeSelector)
	for k, v := range newUsage {
		used[k] = v
	}
	used = quota.Mask(used, quota.ResourceNames(hard))

	next := q.DeepCopy()
	next.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
	var writeErr error
	if dirty || !quota.Equals(next.Status.Used, q.Status.Used) {
		if _, err := rc.client.Namespace(ns).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			writeErr = fmt.Errorf("updating the status of quota %s: %w", key, err)
		}
	}
	if err := errors.Join(usageErr, writeErr); err != nil {
		return controller.Result{}, err
	}
	return controller.Result{RequeueAfter: rc.resync}, nil
}
