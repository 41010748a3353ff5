package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	sigsjson "sigs.k8s.io/json"
)

// protoSerializer writes the Kubernetes protobuf envelope (magic prefix and
// runtime.Unknown) of built-in types.
var protoSerializer = protobuf.NewSerializer(scheme, scheme)

// typedOf converts an unstructured built-in object or list to its Go type.
func typedOf(u *unstructured.Unstructured) (runtime.Object, error) {
	gvk := u.GroupVersionKind()
	typed, err := scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("no Go type for %s: %w", gvk, err)
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, typed); err != nil {
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
	if err := protoSerializer.Encode(obj, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
