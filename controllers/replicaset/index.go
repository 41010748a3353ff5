package replicaset

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
)

// Pod indices the manager adds to the (shared) pod informer, so that a
// sync reads only the pods it can act on, the object's own and the
// orphans of its namespace, rather than every pod of the namespace: with
// one owner of 10,000 pods, or many owners in one namespace, that walk was
// most of the cost of a sync. The indices are by owner UID, whatever the
// owner's kind, so the managers of ReplicaSets and of RCs over one pod
// informer share them. The names are the package's own, so that another
// user of the informer cannot have filed something else under them.
const (
	// indexByController files a pod with a controller reference under
	// "namespace/controllerUID": the claim of pods goes by UID alone.
	indexByController = "replicaset.listwatch.io/by-controller"
	// indexOrphans files a pod without a controller reference under its
	// namespace.
	indexOrphans = "replicaset.listwatch.io/orphans"
)

func byControllerValue(namespace string, uid string) string {
	return namespace + "/" + uid
}

func indexPodByController(p *corev1.Pod) ([]string, error) {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil {
		return nil, nil
	}
	return []string{byControllerValue(p.Namespace, string(ref.UID))}, nil
}

func indexOrphanPod(p *corev1.Pod) ([]string, error) {
	if metav1.GetControllerOfNoCopy(p) != nil {
		return nil, nil
	}
	return []string{p.Namespace}, nil
}

// addPodIndexers adds the manager's indices to the pod informer's cache
// unless an earlier manager over the same informer already did.
func addPodIndexers(idx cache.Indexer[*corev1.Pod]) error {
	have := idx.GetIndexers()
	want := cache.Indexers[*corev1.Pod]{}
	if _, ok := have[indexByController]; !ok {
		want[indexByController] = indexPodByController
	}
	if _, ok := have[indexOrphans]; !ok {
		want[indexOrphans] = indexOrphanPod
	}
	if len(want) == 0 {
		return nil
	}
	if err := idx.AddIndexers(want); err != nil {
		// Another manager may have added them between the check and
		// here; anything else is a real failure.
		have = idx.GetIndexers()
		_, a := have[indexByController]
		_, b := have[indexOrphans]
		if !a || !b {
			return fmt.Errorf("replicaset: adding pod indices: %w", err)
		}
	}
	return nil
}

// candidatePods returns the active pods of namespace that an object with
// uid can claim: those it controls (to keep or release) and the orphans
// (to adopt if its selector matches them); and, apart, the pods it
// controls that are terminating (being deleted, not yet finished), which
// ReplicaSets count in status. Pods of other controllers are never
// touched by a claim and are not read at all.
func (m *Manager[T]) candidatePods(namespace string, uid string) (active, terminating []*corev1.Pod, err error) {
	idx := m.pods.GetIndexer()
	owned, err := idx.ByIndex(indexByController, byControllerValue(namespace, uid))
	if err != nil {
		return nil, nil, fmt.Errorf("listing controlled pods: %w", err)
	}
	orphans, err := idx.ByIndex(indexOrphans, namespace)
	if err != nil {
		return nil, nil, fmt.Errorf("listing orphan pods: %w", err)
	}
	for _, p := range owned {
		if p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			terminating = append(terminating, p)
		}
	}
	// ByIndex returns fresh slices: filter in place, without another.
	out := append(owned, orphans...)
	active = out[:0]
	for _, p := range out {
		if controller.IsPodActive(p) {
			active = append(active, p)
		}
	}
	clear(out[len(active):])
	return active, terminating, nil
}
