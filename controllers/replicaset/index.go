package replicaset

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
)

// Pod indices the manager adds to the (shared) pod informer, so that a
// sync reads only the pods it can act on, the object's own and the
// orphans of its namespace, rather than every pod of the namespace: with
// one owner of 10,000 pods, or many owners in one namespace, that walk was
// most of the cost of a sync. The owned pods are read through
// controller.PodsByControllerIndex, by owner UID whatever the owner's
// kind, and the orphans through controller.OrphansIndex; the managers of
// ReplicaSets and of RCs and the other controllers over one pod informer
// share both.

// addPodIndexers adds the manager's indices to the pod informer's cache
// unless an earlier manager over the same informer already did.
func addPodIndexers(idx cache.Indexer[*corev1.Pod]) error {
	if err := controller.AddPodsByControllerIndex(idx); err != nil {
		return fmt.Errorf("replicaset: %w", err)
	}
	if err := controller.AddOrphansIndex(idx); err != nil {
		return fmt.Errorf("replicaset: %w", err)
	}
	return nil
}
