package replicaset

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
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
