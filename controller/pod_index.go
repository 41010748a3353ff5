package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
)

// PodsByControllerIndex is the name of the pod index AddPodsByControllerIndex
// adds: a pod with a controller reference filed under
// "namespace/controllerUID", so that a controller reads its own pods
// rather than every pod of their namespace.
const PodsByControllerIndex = "controller.listwatch.io/pods-by-controller"

func podsByControllerValue(namespace string, uid types.UID) string {
	return namespace + "/" + string(uid)
}

func indexPodsByController(p *corev1.Pod) ([]string, error) {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil {
		return nil, nil
	}
	return []string{podsByControllerValue(p.Namespace, ref.UID)}, nil
}

// AddPodsByControllerIndex adds PodsByControllerIndex to a pod
// informer's cache, unless it is there already (another controller over
// the same shared informer added it).
func AddPodsByControllerIndex(idx cache.Indexer[*corev1.Pod]) error {
	if _, ok := idx.GetIndexers()[PodsByControllerIndex]; ok {
		return nil
	}
	if err := idx.AddIndexers(cache.Indexers[*corev1.Pod]{PodsByControllerIndex: indexPodsByController}); err != nil {
		if _, ok := idx.GetIndexers()[PodsByControllerIndex]; ok {
			// Added by another controller between the check and here.
			return nil
		}
		return fmt.Errorf("adding index %s: %w", PodsByControllerIndex, err)
	}
	return nil
}

// ControlledPods returns the pods of namespace whose controller has uid,
// from a cache with PodsByControllerIndex.
func ControlledPods(idx cache.Indexer[*corev1.Pod], namespace string, uid types.UID) ([]*corev1.Pod, error) {
	return idx.ByIndex(PodsByControllerIndex, podsByControllerValue(namespace, uid))
}
