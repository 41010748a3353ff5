package registry

import (
	"encoding/json"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/listwatch/listwatch/internal/jsontree"
	"github.com/listwatch/listwatch/storage"
)

// Object is an object the server creates or answers with: a built-in
// resource's Go type (such as *corev1.Pod), or *unstructured.Unstructured.
type Object interface {
	runtime.Object
	metav1.Object
}

// AsObject is obj, which must have object metadata, as an Object.
func AsObject(obj runtime.Object) (Object, error) {
	o, ok := obj.(Object)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("%T has no object metadata", obj))
	}
	return o, nil
}

// EncodeStored is the storage form of an object: JSON without
// resourceVersion (the revision is the resourceVersion).
func EncodeStored(obj Object) ([]byte, error) {
	if rv := obj.GetResourceVersion(); rv != "" {
		obj.SetResourceVersion("")
		defer obj.SetResourceVersion(rv)
	}
	b, err := MarshalJSON(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode: %w", err))
	}
	return b, nil
}

// MarshalJSON is obj as JSON: a map's keys sorted, a Go type's fields in
// their order.
func MarshalJSON(obj Object) ([]byte, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return json.Marshal(u.Object)
	}
	return json.Marshal(obj)
}

// DecodeStored is the inverse of EncodeStored: it sets resourceVersion from
// the revision.
func DecodeStored(value []byte, rev int64) (*unstructured.Unstructured, error) {
	obj, err := jsontree.DecodeObject(value)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decode stored object: %w", err))
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetResourceVersion(strconv.FormatInt(rev, 10))
	return u, nil
}

// DecodeKV is DecodeStored of a storage entry.
func DecodeKV(kv storage.KeyValue) (*unstructured.Unstructured, error) {
	return DecodeStored(kv.Value, kv.Revision)
}

// Protobuf reads and writes the Kubernetes protobuf envelope (magic prefix
// and runtime.Unknown) of the built-in types.
var Protobuf = protobuf.NewSerializer(Scheme, Scheme)
