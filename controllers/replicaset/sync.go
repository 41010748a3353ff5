package replicaset

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
)

// sync brings the object with key one step closer to its desired number
// of active pods and records what it finds in status. It is never called
// concurrently for one key. It asks to be called again when a ready pod
// will become available, which no event announces.
func (m *Manager[T]) sync(ctx context.Context, key string) (controller.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		// Retrying cannot mend a malformed key.
		return controller.Result{}, controller.Terminal(fmt.Errorf("malformed key %q: %w", key, err))
	}
	obj, err := m.lister.Namespace(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Its pods are the garbage collector's business, not ours: they
		// are neither recreated nor deleted.
		m.expectations.DeleteExpectations(key)
		m.writes.Forget(key)
		m.views.forget(key)
		m.statusPace.Forget(key)
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, fmt.Errorf("getting %s %s from the cache: %w", m.kind.GroupVersionKind().Kind, key, err)
	}
	// The last status write may not have reached the cache yet.
	obj = m.writes.Latest(key, obj)

	// Expectations are read before the pods are: a pod event that lands
	// in between makes the pods newer than the expectations said, which
	// is safe; the other order could act on pods older than them.
	satisfied := m.expectations.SatisfiedExpectations(key)

	view, err := m.podView(obj)
	if err != nil {
		return controller.Result{}, fmt.Errorf("reading pods of %s: %w", key, err)
	}
	orphans, err := m.orphanPods(ns)
	if err != nil {
		return controller.Result{}, fmt.Errorf("reading pods for %s: %w", key, err)
	}
	adopted, err := m.claimPods(ctx, obj, view.selector, append(view.unselected(), orphans...))
	if err != nil {
		// Pods left half adopted or unreleased are retried with backoff
		// before anything is created for them.
		return controller.Result{}, fmt.Errorf("claiming pods for %s: %w", key, err)
	}

	now := time.Now()
	counts, next, waiting := view.tally(adopted, now)
	var manageErr error
	managed := satisfied && obj.GetDeletionTimestamp() == nil
	if managed {
		manageErr = m.manageReplicas(ctx, obj, int(counts.replicas), func() []*corev1.Pod { return view.replicas(adopted) })
	}

	var res controller.Result
	if waiting {
		// A ready pod becomes available then, and no event will say so.
		res.RequeueAfter = next
	}
	status := calculateStatus(m.kind, obj, counts, managed, manageErr, now)
	if wait := m.statusDelay(key, obj, status, now); wait > 0 {
		// Written by the sync this queues, with whatever more has
		// changed by then.
		if !waiting || wait < res.RequeueAfter {
			res.RequeueAfter = wait
		}
		return res, manageErr
	}
	if err := m.updateStatus(ctx, obj, status); err != nil {
		return controller.Result{}, errors.Join(manageErr, err)
	}
	return res, manageErr
}

// statusDelay returns how long the write of status to obj waits: zero
// for a status others wait on, which is written at once, whatever the
// pace: one that acknowledges a new generation, changes a condition,
// counts fewer ready or available pods (the Deployment controller's
// bound on unavailable pods reads availableReplicas, and must not see
// more than there are), or has every pod wanted ready and available.
// Other statuses (pods on their way up) are paced by StatusInterval.
func (m *Manager[T]) statusDelay(key string, obj T, status appsv1.ReplicaSetStatus, now time.Time) time.Duration {
	cur := m.kind.Status(obj)
	want := m.kind.Replicas(obj)
	switch {
	case status.ObservedGeneration != cur.ObservedGeneration,
		!apiequality.Semantic.DeepEqual(status.Conditions, cur.Conditions),
		status.ReadyReplicas < cur.ReadyReplicas || status.AvailableReplicas < cur.AvailableReplicas,
		status.Replicas == want && status.ReadyReplicas == want && status.AvailableReplicas == want:
		return 0
	case apiequality.Semantic.DeepEqual(status, cur):
		// Nothing to write.
		return 0
	}
	return m.statusPace.Delay(key, now)
}

// claimPods adopts the matching orphans among pods and releases the pods
// obj controls but no longer selects, and returns the pods it adopted.
func (m *Manager[T]) claimPods(ctx context.Context, obj T, selector labels.Selector, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	if len(pods) == 0 {
		return nil, nil
	}
	cm := &controller.PodControllerRefManager{
		Control:    m.podControl,
		Controller: obj,
		Selector:   selector,
		Kind:       m.kind.GroupVersionKind(),
		// The cached object may be stale: one deleted meanwhile (or
		// deleted and recreated) must not adopt anything.
		Recheck: func(ctx context.Context) (metav1.Object, error) {
			fresh, err := m.client.Get(ctx, obj.GetNamespace(), obj.GetName())
			if apierrors.IsNotFound(err) {
				// Not passed on as NotFound: ClaimPods would take it for
				// the pod's and skip the pod, leaving the sync to create
				// pods for an owner that is gone.
				return nil, fmt.Errorf("%w: %s %s is gone", controller.ErrOwnerBeingDeleted, m.kind.GroupVersionKind().Kind, objectKey(obj))
			}
			if err != nil {
				return nil, err
			}
			return fresh, nil
		},
	}
	// None of pods is both controlled by obj and selected, so what the
	// claim returns is what it adopted.
	return cm.ClaimPods(ctx, pods)
}

// errTemplateNotSelected is reported for an object whose template makes
// pods its own selector does not match: every pod created would be an
// orphan and the controller would create more without end.
var errTemplateNotSelected = errors.New("pod template labels do not match the selector")

// manageReplicas creates or deletes pods so that, once the cache has
// caught up, obj has its desired number of active pods, of which it has
// n (pods lists them, and is called only when some are to go): at most
// burstReplicas at a time, with expectations set first so that no sync
// acts on a cache that has not seen the outcome yet.
func (m *Manager[T]) manageReplicas(ctx context.Context, obj T, n int, pods func() []*corev1.Pod) error {
	key := objectKey(obj)
	diff := n - int(m.kind.Replicas(obj))
	switch {
	case diff < 0:
		return m.createPods(ctx, obj, key, min(-diff, m.burst))
	case diff > 0:
		return m.deletePods(ctx, obj, key, controller.PodsToDelete(pods(), min(diff, m.burst)))
	}
	return nil
}

func (m *Manager[T]) createPods(ctx context.Context, obj T, key string, n int) error {
	template := m.kind.Template(obj)
	if template == nil || !m.kind.Selector(obj).Matches(labels.Set(template.Labels)) {
		if m.recorder != nil {
			m.recorder.Eventf(obj, corev1.EventTypeWarning, "InvalidTemplate", "Not creating pods: %v", errTemplateNotSelected)
		}
		return fmt.Errorf("%s: %w", key, errTemplateNotSelected)
	}
	// Expected before created: the informer may report a pod before
	// CreatePods returns.
	m.expectations.ExpectCreations(key, n)
	ref := controller.NewControllerRef(obj, m.kind.GroupVersionKind())
	created, err := controller.SlowStartBatch(ctx, n, controller.SlowStartInitialBatchSize, 0, func(ctx context.Context, _ int) error {
		return m.podControl.CreatePods(ctx, obj.GetNamespace(), template, obj, ref)
	})
	if skipped := n - created; skipped > 0 {
		// Failed and never-tried creations will not be observed: stop
		// waiting for them, so the next sync can try again.
		m.expectations.LowerExpectations(key, skipped, 0)
		m.log.Debug("pod creations failed or skipped", "key", key, "wanted", n, "created", created, "err", err)
	}
	if err != nil {
		return fmt.Errorf("creating pods for %s (%d of %d created): %w", key, created, n, err)
	}
	return nil
}

func (m *Manager[T]) deletePods(ctx context.Context, obj T, key string, victims []*corev1.Pod) error {
	keys := make([]string, len(victims))
	for i, p := range victims {
		keys[i] = podKey(p)
	}
	// Tracked by pod, so that a pod seen deleted twice (gracefully, then
	// finally) counts once.
	m.expectations.ExpectDeletions(key, keys)
	errs := make([]error, len(victims))
	var wg sync.WaitGroup
	for i, p := range victims {
		wg.Go(func() {
			err := m.podControl.DeletePod(ctx, p.Namespace, p.Name, obj)
			if err == nil {
				return
			}
			// This deletion will not be observed (or, for a pod already
			// gone, may have been already): stop waiting for it.
			m.expectations.DeletionObserved(key, keys[i])
			if !apierrors.IsNotFound(err) {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deleting pods of %s: %w", key, err)
	}
	return nil
}
