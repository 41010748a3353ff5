package kube

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// What server-side apply's field manager needs from a built-in resource
// (the server's managedfields.go builds the manager itself).

// DefaultTyped applies kube's defaults to obj, an object of the resource's
// Go type at its served version, in place: what kube-apiserver's decoder
// does before the field manager records who set which field, so that the
// writer of an object owns the fields defaulted in it.
func (k *Rules) DefaultTyped(obj runtime.Object) {
	scheme.Default(obj)
}

// ResetFields are the fields a write to subresource sub ("" for the main
// resource) may not set, by API version, as the resource's strategy states
// them (rest.ResetFieldsStrategy): kube-apiserver's field manager leaves
// them out of what the writer owns. nil when the strategy states none.
func (k *Rules) ResetFields(sub string) map[fieldpath.APIVersion]*fieldpath.Set {
	s, err := k.updateStrategy(Request{Subresource: sub})
	if err != nil {
		return nil
	}
	if r, ok := s.(rest.ResetFieldsStrategy); ok {
		return r.GetResetFields()
	}
	return nil
}

// ThroughHub returns obj, an object of the resource at its served version
// (its Go type or unstructured), converted to the internal version and
// back, as a new object of the Go type: kube-apiserver's handlers hold a
// request's object in the internal version, so the field manager sees it
// as that conversion leaves it (a Secret's stringData folded into data).
// obj is not changed.
func (k *Rules) ThroughHub(obj runtime.Object) (runtime.Object, error) {
	// Conversions share memory with their input and may change it: they
	// are given a copy.
	var ext runtime.Object
	if u, ok := obj.(*unstructured.Unstructured); !ok {
		ext = obj.DeepCopyObject()
	} else {
		typed, err := scheme.New(k.gvk)
		if err != nil {
			return nil, err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return nil, err
		}
		ext = typed
	}
	in, err := k.toInternal(ext)
	if err != nil {
		return nil, err
	}
	out, err := scheme.New(k.gvk)
	if err != nil {
		return nil, err
	}
	if err := scheme.Convert(in, out, nil); err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(k.gvk)
	return out, nil
}
