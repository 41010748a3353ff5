package cache

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KeyFunc computes the key an object is stored under.
type KeyFunc[T Object] func(obj T) (string, error)

// ErrNoName is returned for an object without a name: such an object cannot
// be stored, since two of them would share a key.
var ErrNoName = errors.New("object has no name")

// MetaNamespaceKeyFunc is the default key function: "namespace/name" for
// namespaced objects and "name" for cluster-scoped ones.
func MetaNamespaceKeyFunc(obj metav1.Object) (string, error) {
	if obj == nil {
		return "", fmt.Errorf("cache: key of nil object: %w", ErrNoName)
	}
	name := obj.GetName()
	if name == "" {
		return "", fmt.Errorf("cache: key of object in namespace %q: %w", obj.GetNamespace(), ErrNoName)
	}
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + name, nil
	}
	return name, nil
}

// metaKey is MetaNamespaceKeyFunc as a KeyFunc[T], guarding typed nils.
func metaKey[T Object](obj T) (string, error) {
	if isNil(obj) {
		return "", fmt.Errorf("cache: key of nil object: %w", ErrNoName)
	}
	return MetaNamespaceKeyFunc(obj)
}

// SplitMetaNamespaceKey inverts MetaNamespaceKeyFunc. A key with no "/" is a
// cluster-scoped name and yields an empty namespace.
func SplitMetaNamespaceKey(key string) (namespace, name string, err error) {
	ns, n, found := strings.Cut(key, "/")
	switch {
	case !found:
		if key == "" {
			return "", "", fmt.Errorf("cache: empty key")
		}
		return "", key, nil
	case ns == "" || n == "" || strings.Contains(n, "/"):
		return "", "", fmt.Errorf("cache: unexpected key format %q", key)
	}
	return ns, n, nil
}
