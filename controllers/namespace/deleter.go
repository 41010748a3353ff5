package namespace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/client"
)

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// deleteNamespace empties the namespace called name if it is being
// deleted, and gives up the controller's finalizer when it is empty. It
// returns a positive estimate, in seconds, when content is still going
// away: the namespace must be looked at again.
func (c *Controller) deleteNamespace(ctx context.Context, name string) (int64, error) {
	// The cache may be behind, and other controllers write namespaces
	// being deleted: start from the server's copy.
	ns, err := c.client.GetNamespace(ctx, name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if ns.DeletionTimestamp == nil {
		return 0, nil
	}
	ns, err = c.retryOnConflict(ctx, ns, c.markTerminating)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if ns.DeletionTimestamp.IsZero() || len(ns.Spec.Finalizers) == 0 {
		return 0, nil
	}
	estimate, err := c.deleteAllContent(ctx, ns)
	if err != nil {
		return 0, err
	}
	if estimate > 0 {
		return estimate, nil
	}
	if _, err := c.retryOnConflict(ctx, ns, c.finalize); err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	c.log.Info("namespace emptied and finalized", "namespace", name)
	return 0, nil
}

// retryOnConflict runs update on ns, and again on the server's latest copy
// of it as long as the server answers Conflict, unless the namespace was
// replaced by another of the same name meanwhile.
func (c *Controller) retryOnConflict(ctx context.Context, ns *corev1.Namespace, update func(context.Context, *corev1.Namespace) (*corev1.Namespace, error)) (*corev1.Namespace, error) {
	for {
		out, err := update(ctx, ns)
		if !apierrors.IsConflict(err) {
			return out, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		latest, err := c.client.GetNamespace(ctx, ns.Name)
		if err != nil {
			return nil, err
		}
		if latest.UID != ns.UID {
			return nil, errors.New("namespace uid has changed across retries")
		}
		ns = latest
	}
}

// markTerminating sets the phase of a namespace being deleted to
// Terminating, if the server has not.
func (c *Controller) markTerminating(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	if ns.DeletionTimestamp.IsZero() || ns.Status.Phase == corev1.NamespaceTerminating {
		return ns, nil
	}
	next := ns.DeepCopy()
	next.Status.Phase = corev1.NamespaceTerminating
	return c.client.UpdateNamespaceStatus(ctx, next)
}

// finalize removes the controller's token from the namespace's
// spec.finalizers, the others kept, sorted and unique.
func (c *Controller) finalize(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	next := &corev1.Namespace{TypeMeta: ns.TypeMeta, ObjectMeta: *ns.ObjectMeta.DeepCopy(), Spec: *ns.Spec.DeepCopy()}
	next.Spec.Finalizers = remainingFinalizers(ns.Spec.Finalizers, c.token)
	out, err := c.client.FinalizeNamespace(ctx, next)
	if apierrors.IsNotFound(err) {
		// Someone else finished first.
		return ns, nil
	}
	return out, err
}

// remainingFinalizers are fs without token, sorted, each once.
func remainingFinalizers(fs []corev1.FinalizerName, token corev1.FinalizerName) []corev1.FinalizerName {
	out := make([]corev1.FinalizerName, 0, len(fs))
	for _, f := range fs {
		if f != token {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// gvrResult is what deleting one resource's content left.
type gvrResult struct {
	// estimate is how many more seconds to wait; zero does not mean the
	// content is gone.
	estimate int64
	// remaining counts the objects left.
	remaining int
	// byFinalizer counts the objects left held by each finalizer.
	byFinalizer map[string]int
}

// deletableResources are the namespaced resources of served that can be
// deleted, each with whether it can be listed. A group version that
// does not parse fails the whole discovery, as kube's does.
func deletableResources(served []client.APIResource) (map[schema.GroupVersionResource]bool, error) {
	out := map[schema.GroupVersionResource]bool{}
	for _, r := range served {
		if !r.Namespaced || !slices.Contains(r.Verbs, "delete") {
			continue
		}
		gv := r.GVR.GroupVersion()
		if parsed, err := schema.ParseGroupVersion(gv.String()); err != nil {
			return nil, err
		} else if parsed != gv {
			return nil, fmt.Errorf("unexpected GroupVersion string: %s", gv.String())
		}
		out[r.GVR] = out[r.GVR] || slices.Contains(r.Verbs, "list")
	}
	return out, nil
}

// deleteAllContent deletes the objects of every deletable namespaced
// resource in ns, pods first and the rest only once the pods are gone,
// and writes what it found into the namespace's status conditions. It
// returns, in seconds, how long what is left should take to go.
// Discovery and deletion failures are not fatal: what can be deleted is,
// and the failures are returned together.
func (c *Controller) deleteAllContent(ctx context.Context, ns *corev1.Namespace) (int64, error) {
	conds := newConditions(c.now())
	var errs []error
	served, err := c.client.ServerResources(ctx)
	if err != nil {
		errs = append(errs, err)
		conds.discoveryFailed(err)
	}
	gvrs, err := deletableResources(served)
	if err != nil {
		errs = append(errs, err)
		conds.groupVersionFailed(err)
	}
	deletedAt := ns.DeletionTimestamp.Time
	var estimate int64
	remaining := map[schema.GroupVersionResource]int{}
	byFinalizer := map[string]int{}
	tally := func(gvr schema.GroupVersionResource, r gvrResult) {
		estimate = max(estimate, r.estimate)
		if r.remaining > 0 {
			remaining[gvr] = r.remaining
			for f, n := range r.byFinalizer {
				if n > 0 {
					byFinalizer[f] += n
				}
			}
		}
	}

	if listable, ok := gvrs[podsGVR]; ok {
		// Pods go first: until their containers have stopped, they may
		// still use what the namespace's other objects hold (secrets,
		// volume claims, ...).
		r, err := c.deleteResourceContent(ctx, podsGVR, listable, ns.Name, deletedAt)
		if err != nil {
			err = fmt.Errorf("failed to delete pods for namespace: %s, err: %w", ns.Name, err)
			errs = append(errs, err)
			conds.deleteFailed(err)
		}
		tally(podsGVR, r)
		if remaining[podsGVR] > 0 {
			c.log.Debug("pods remain; other content waits", "namespace", ns.Name, "pods", remaining[podsGVR])
			c.writeConditions(ctx, ns, conds)
			return estimate, errors.Join(errs...)
		}
	}

	order := make([]schema.GroupVersionResource, 0, len(gvrs))
	for gvr := range gvrs {
		if gvr != podsGVR {
			order = append(order, gvr)
		}
	}
	slices.SortFunc(order, func(a, b schema.GroupVersionResource) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Resource, b.Resource))
	})
	for _, gvr := range order {
		r, err := c.deleteResourceContent(ctx, gvr, gvrs[gvr], ns.Name, deletedAt)
		if err != nil {
			// Go on with the other resources.
			errs = append(errs, err)
			conds.deleteFailed(err)
		}
		tally(gvr, r)
	}
	conds.contentTotals(remaining, byFinalizer)
	// Written every time: a condition that reported trouble must say
	// when the trouble is over.
	c.writeConditions(ctx, ns, conds)
	err = errors.Join(errs...)
	c.log.Debug("deleted namespace content", "namespace", ns.Name, "estimate", estimate, "err", err)
	return estimate, err
}

// writeConditions writes conds into ns's status when they change it, and
// ns becomes what the server stored. A failure is logged, not returned:
// the next pass writes them again.
func (c *Controller) writeConditions(ctx context.Context, ns *corev1.Namespace, conds *conditions) {
	if !conds.apply(&ns.Status) {
		return
	}
	out, err := c.client.UpdateNamespaceStatus(ctx, ns)
	if err != nil {
		c.log.Warn("could not update the namespace's status conditions", "namespace", ns.Name, "err", err)
		return
	}
	*ns = *out
}

// deleteResourceContent deletes the objects of resource gvr in namespace,
// one by one, and lists what is left.
func (c *Controller) deleteResourceContent(ctx context.Context, gvr schema.GroupVersionResource, listable bool, namespace string, deletedAt time.Time) (gvrResult, error) {
	estimate, err := c.estimateGracefulTermination(ctx, gvr, namespace, deletedAt)
	if err != nil {
		return gvrResult{}, err
	}
	if err := c.deleteEach(ctx, gvr, listable, namespace); err != nil {
		return gvrResult{estimate: estimate}, err
	}
	left, supported, err := c.list(ctx, gvr, listable, namespace)
	if err != nil || !supported {
		return gvrResult{estimate: estimate}, err
	}
	if len(left) == 0 {
		return gvrResult{}, nil
	}
	byFinalizer := map[string]int{}
	for _, obj := range left {
		for _, f := range obj.GetFinalizers() {
			byFinalizer[f]++
		}
	}
	r := gvrResult{estimate: estimate, remaining: len(left), byFinalizer: byFinalizer}
	switch {
	case estimate > 0:
		return r, nil
	case len(byFinalizer) > 0:
		// Held by finalizers: normal, but their controllers (the
		// garbage collector, say) need time.
		r.estimate = finalizerEstimate
		return r, nil
	}
	// Nothing should hold these: they should have gone.
	return gvrResult{remaining: len(left)}, fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", namespace, gvr)
}

// list lists the metadata of gvr's objects in namespace; supported is
// false when the resource cannot be listed (discovery says so, or the
// server refuses the verb or does not know the path).
func (c *Controller) list(ctx context.Context, gvr schema.GroupVersionResource, listable bool, namespace string) ([]*metav1.PartialObjectMetadata, bool, error) {
	if !listable {
		return nil, false, nil
	}
	items, err := c.client.ListMetadata(ctx, gvr, namespace)
	if apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	return items, true, nil
}

// deleteEach lists gvr's objects in namespace and deletes each, in the
// background: the namespace controller deletes everything, so the garbage
// collector need not orphan dependents (which are in the namespace too,
// or in no namespace, where they outlive it either way).
func (c *Controller) deleteEach(ctx context.Context, gvr schema.GroupVersionResource, listable bool, namespace string) error {
	items, supported, err := c.list(ctx, gvr, listable, namespace)
	if err != nil || !supported {
		return err
	}
	background := metav1.DeletePropagationBackground
	for _, obj := range items {
		err := c.client.Delete(ctx, gvr, namespace, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
			return err
		}
	}
	return nil
}

// estimateGracefulTermination is how many seconds gvr's objects in
// namespace may take to go once deleted: for pods, the longest grace
// period of those still running, counted from the namespace's deletion;
// zero for every other resource.
func (c *Controller) estimateGracefulTermination(ctx context.Context, gvr schema.GroupVersionResource, namespace string, deletedAt time.Time) (int64, error) {
	if gvr.GroupResource() != podsGVR.GroupResource() {
		return 0, nil
	}
	pods, err := c.client.ListPods(ctx, namespace)
	if err != nil {
		return 0, err
	}
	var estimate int64
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if g := p.Spec.TerminationGracePeriodSeconds; g != nil && *g > estimate {
			estimate = *g
		}
	}
	if c.now().Sub(deletedAt) >= time.Duration(estimate)*time.Second {
		return 0, nil
	}
	return estimate, nil
}
