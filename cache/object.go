// Package cache holds the List-Watch machinery on the client side: key
// functions, the thread-safe Store and Indexer, DeltaFIFO, the ListerWatcher
// contract, the Reflector that keeps a store in step with a server, and the
// low-level controller behind NewInformer and NewIndexerInformer.
//
// Everything is generic over the object type T, so a *corev1.Pod informer
// hands out *corev1.Pod values and callers never type-assert.
package cache

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Object is what the cache holds: any Kubernetes object with object metadata,
// such as *corev1.Pod or *unstructured.Unstructured.
//
// runtime.Object is part of the constraint because the cache must be able to
// copy an object (DeepCopyObject) without knowing its concrete type.
type Object interface {
	metav1.Object
	runtime.Object
}

// isNil reports whether obj is a nil pointer dressed as an Object. A typed
// nil can reach the cache through a buggy ListerWatcher, and every method call
// on it would panic, so the cache checks before touching it.
func isNil[T Object](obj T) bool {
	v := any(obj)
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Interface, reflect.Slice:
		return rv.IsNil()
	}
	return false
}
