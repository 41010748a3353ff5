package kube

import (
	"bytes"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// kube-apiserver keeps built-in objects in etcd as protobuf, and what a
// client sees of one, the answer to the write that stored it included, is
// what its storage decodes: the protobuf read back, which keeps no
// difference between an empty list or map and none (`"endpoints": []`
// comes back null), defaulted, as every object decoded from storage is
// (a Job's labels from its template, a claim's Pending phase, both of which
// the strategy's create left out), and converted through the internal
// version to the one served. The server stores that read-back form, so
// that every later read is the same.

// storageCodec is kube-apiserver's storage serialization of built-in
// objects.
var storageCodec = protobuf.NewSerializer(scheme, scheme)

// ReadBack returns ext, an object of the served version, as
// kube-apiserver's storage reads it back after storing it, with its
// apiVersion and kind set: what is stored
// of an object that goes through no strategy (a pod bound by
// pods/binding), and the last step of one that does.
func (k *Rules) ReadBack(ext runtime.Object) (runtime.Object, error) {
	ext.GetObjectKind().SetGroupVersionKind(k.gvk)
	var buf bytes.Buffer
	if err := storageCodec.Encode(ext, &buf); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode %v for storage: %w", k.gvk, err))
	}
	out, _, err := storageCodec.Decode(buf.Bytes(), nil, nil)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decode %v from storage: %w", k.gvk, err))
	}
	scheme.Default(out)
	// kube-apiserver's storage decodes to the internal version, and its
	// handlers convert that to the version served (which sets the kind of
	// embedded objects, such as a StatefulSet's volumeClaimTemplates).
	in, err := k.toInternal(out)
	if err != nil {
		return nil, err
	}
	served, err := scheme.New(k.gvk)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := scheme.Convert(in, served, nil); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("convert %v from internal: %w", k.gvk, err))
	}
	served.GetObjectKind().SetGroupVersionKind(k.gvk)
	return served, nil
}
