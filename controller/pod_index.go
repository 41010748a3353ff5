package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
)

// ByControllerIndex is the name of the index AddByControllerIndex adds:
// an object with a controller reference filed under
// "namespace/controllerUID", so that a controller reads its own objects
// (a Job's pods, a CronJob's Jobs) rather than every object of their
// namespace.
const ByControllerIndex = "controller.listwatch.io/by-controller"

// PodsByControllerIndex is ByControllerIndex on a pod informer.
const PodsByControllerIndex = ByControllerIndex

func byControllerValue(namespace string, uid types.UID) string {
	return namespace + "/" + string(uid)
}

func indexByController[T cache.Object](obj T) ([]string, error) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return nil, nil
	}
	return []string{byControllerValue(obj.GetNamespace(), ref.UID)}, nil
}

// AddByControllerIndex adds ByControllerIndex to an informer's cache,
// unless it is there already (another controller over the same shared
// informer added it).
func AddByControllerIndex[T cache.Object](idx cache.Indexer[T]) error {
	if _, ok := idx.GetIndexers()[ByControllerIndex]; ok {
		return nil
	}
	if err := idx.AddIndexers(cache.Indexers[T]{ByControllerIndex: indexByController[T]}); err != nil {
		if _, ok := idx.GetIndexers()[ByControllerIndex]; ok {
			// Added by another controller between the check and here.
			return nil
		}
		return fmt.Errorf("adding index %s: %w", ByControllerIndex, err)
	}
	return nil
}

// Controlled returns the objects of namespace whose controller has uid,
// from a cache with ByControllerIndex.
func Controlled[T cache.Object](idx cache.Indexer[T], namespace string, uid types.UID) ([]T, error) {
	return idx.ByIndex(ByControllerIndex, byControllerValue(namespace, uid))
}

// OrphansIndex is the name of the index AddOrphansIndex adds: an object
// without a controller reference filed under its namespace, so that a
// controller reads the orphans it may adopt rather than every object of
// the namespace.
const OrphansIndex = "controller.listwatch.io/orphans"

func indexOrphan[T cache.Object](obj T) ([]string, error) {
	if metav1.GetControllerOfNoCopy(obj) != nil {
		return nil, nil
	}
	return []string{obj.GetNamespace()}, nil
}

// AddOrphansIndex adds OrphansIndex to an informer's cache, unless it is
// there already.
func AddOrphansIndex[T cache.Object](idx cache.Indexer[T]) error {
	if _, ok := idx.GetIndexers()[OrphansIndex]; ok {
		return nil
	}
	if err := idx.AddIndexers(cache.Indexers[T]{OrphansIndex: indexOrphan[T]}); err != nil {
		if _, ok := idx.GetIndexers()[OrphansIndex]; ok {
			return nil
		}
		return fmt.Errorf("adding index %s: %w", OrphansIndex, err)
	}
	return nil
}

// Orphans returns the objects of namespace without a controller
// reference, from a cache with OrphansIndex.
func Orphans[T cache.Object](idx cache.Indexer[T], namespace string) ([]T, error) {
	return idx.ByIndex(OrphansIndex, namespace)
}

// AddPodsByControllerIndex is AddByControllerIndex on a pod informer.
func AddPodsByControllerIndex(idx cache.Indexer[*corev1.Pod]) error { return AddByControllerIndex(idx) }

// ControlledPods is Controlled on a pod informer's cache.
func ControlledPods(idx cache.Indexer[*corev1.Pod], namespace string, uid types.UID) ([]*corev1.Pod, error) {
	return Controlled(idx, namespace, uid)
}
