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
// most of the cost of a sync. The owned pods are read through
// controller.PodsByControllerIndex, by owner UID whatever the owner's
// kind, which the managers of ReplicaSets and of RCs and the other
// controllers over one pod informer share; the orphans through an index
// of the package's own, so that another user of the informer cannot have
// filed something else under its name.
const (
	// indexOrphans files a pod without a controller reference under its
	// namespace.
	indexOrphans = "replicaset.listwatch.io/orphans"
)

func indexOrphanPod(p *corev1.Pod) ([]string, error) {
	if metav1.GetControllerOfNoCopy(p) != nil {
		return nil, nil
	}
	return []string{p.Namespace}, nil
}

// addPodIndexers adds the manager's indices to the pod informer's cache
// unless an earlier manager over the same informer already did.
func addPodIndexers(idx cache.Indexer[*corev1.Pod]) error {
	if err := controller.AddPodsByControllerIndex(idx); err != nil {
		return fmt.Errorf("replicaset: %w", err)
	}
	if _, ok := idx.GetIndexers()[indexOrphans]; ok {
		return nil
	}
	if err := idx.AddIndexers(cache.Indexers[*corev1.Pod]{indexOrphans: indexOrphanPod}); err != nil {
		// Another manager may have added it between the check and
		// here; anything else is a real failure.
		if _, ok := idx.GetIndexers()[indexOrphans]; !ok {
			return fmt.Errorf("replicaset: adding pod indices: %w", err)
		}
	}
	return nil
}
