package kube

import (
	"bytes"
	"encoding/hex"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

// The server decodes request bodies itself; where it refuses one, the
// answer is the error kube-apiserver's own decoder gives for it, which
// these find by running that decoder on the body.

// jsonSerializer is kube-apiserver's JSON serializer of built-in objects.
var jsonSerializer = func() runtime.Serializer {
	info, ok := runtime.SerializerInfoForMediaType(legacyscheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		panic("kube: no JSON serializer")
	}
	return info.Serializer
}()

// decode decodes a JSON object of the resource as kube-apiserver's create,
// update and patch handlers do: into the internal type, from whatever
// version and kind the body names (the resource's by default). It returns
// the version and kind found and the decoder's error, nil when the body
// decodes. Unknown and duplicate fields are not errors here.
func (k *Rules) decode(js []byte) (*schema.GroupVersionKind, error) { return decodeAs(k.gvk, js) }

// decodeAs is decode for a body of kind gvk.
func decodeAs(gvk schema.GroupVersionKind, js []byte) (*schema.GroupVersionKind, error) {
	internal := gvk.GroupKind().WithVersion(runtime.APIVersionInternal)
	into, err := scheme.New(internal)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("no internal type for %v: %w", gvk, err))
	}
	dec := legacyscheme.Codecs.DecoderToVersion(jsonSerializer, internal.GroupVersion())
	defaultGVK := gvk
	_, found, err := dec.Decode(js, &defaultGVK, into)
	return found, err
}

// BodyError is kube-apiserver's answer, a 400, to the JSON body of a
// create or update of the resource that its decoder refuses; nil when the
// decoder takes the body. The message is the one its handlers make of the
// decoder's error (k8s.io/apiserver/pkg/endpoints/handlers'
// transformDecodeError): the kind and version the body names, or, when it
// names none that can be read, the start of the body.
func (k *Rules) BodyError(js []byte) error { return bodyError(k.gvk, js) }

// BindingBodyError is BodyError for the body of a v1 Binding
// (pods/{name}/binding, bindings).
func BindingBodyError(js []byte) error { return bodyError(bindingKind, js) }

func bodyError(want schema.GroupVersionKind, js []byte) error {
	gvk, err := decodeAs(want, js)
	switch {
	case err == nil:
		return nil
	case gvk != nil && gvk.Kind != "":
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, want.Kind, err))
	}
	return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", want.Kind, err, summarizeData(js, 30)))
}

// summarizeData is how kube-apiserver's handlers quote a body they cannot
// read: its first maxLength bytes, as text when it looks like a JSON
// object, in hex otherwise.
func summarizeData(data []byte, maxLength int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		if len(data) > maxLength {
			return string(data[:maxLength]) + " ..."
		}
		return string(data)
	default:
		if len(data) > maxLength {
			return hex.EncodeToString(data[:maxLength]) + " ..."
		}
		return hex.EncodeToString(data)
	}
}

// DecodeError is the error kube-apiserver's decoder gives for the JSON of
// an object of the resource (a patched object), nil when it decodes.
func (k *Rules) DecodeError(js []byte) error {
	_, err := k.decode(js)
	return err
}

// EncodeJSON returns obj (its Go type at the served version, or a map)
// as kube-apiserver's codec encodes it in JSON, defaulted as its decoder
// leaves it: the document a JSON or merge patch of the stored object is
// applied to. obj is not changed.
func (k *Rules) EncodeJSON(obj runtime.Object) ([]byte, error) {
	var ext runtime.Object
	if u, isMap := obj.(*unstructured.Unstructured); isMap {
		var err error
		if ext, err = k.External(u); err != nil {
			return nil, err
		}
	} else {
		ext = obj.DeepCopyObject()
		scheme.Default(ext)
	}
	ext.GetObjectKind().SetGroupVersionKind(k.gvk)
	var buf bytes.Buffer
	if err := jsonSerializer.Encode(ext, &buf); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode %v: %w", k.gvk, err))
	}
	return buf.Bytes(), nil
}
