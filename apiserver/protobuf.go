package apiserver

import (
	"bytes"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
)

// typedOf converts an unstructured built-in object or list to its Go type.
// It walks the map with apimachinery's converter rather than decoding the
// map's JSON, which gives the same object (TestTypedOfMatchesJSONDecoding)
// at about half the cost: BenchmarkTypedOf, a running pod of a
// Deployment, 47 µs, 133 allocations and 5.9 kB against 86 µs, 248 and
// 12.1 kB through JSON.
func typedOf(u *unstructured.Unstructured) (runtime.Object, error) {
	gvk := u.GroupVersionKind()
	typed, err := registry.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("no Go type for %s: %w", gvk, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
		return nil, err
	}
	typed.GetObjectKind().SetGroupVersionKind(gvk)
	return typed, nil
}

// toProtobuf encodes a built-in object or list as protobuf.
func toProtobuf(_ *resource, u *unstructured.Unstructured) ([]byte, error) {
	typed, err := typedOf(u)
	if err != nil {
		return nil, err
	}
	return encodeProto(typed)
}

func encodeProto(obj runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	if err := registry.Protobuf.Encode(obj, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
