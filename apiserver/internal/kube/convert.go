package kube

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Convert returns obj, an object of a built-in Go type at a served
// version, as an object of kind to: defaulted as kube-apiserver's decoder
// defaults it, converted to the internal version and from it to to's, as
// kube-apiserver converts an object between two versions of a resource
// (events.k8s.io/v1 and core/v1 events, autoscaling/v1 and v2 horizontal
// pod autoscalers). obj may share memory with the result: it is spent.
func Convert(obj runtime.Object, to schema.GroupVersionKind) (runtime.Object, error) {
	scheme.Default(obj)
	from := obj.GetObjectKind().GroupVersionKind()
	if from.Empty() {
		kinds, _, err := scheme.ObjectKinds(obj)
		if err != nil || len(kinds) == 0 {
			return nil, apierrors.NewInternalError(fmt.Errorf("convert %T: no kind: %v", obj, err))
		}
		from = kinds[0]
	}
	in, err := scheme.New(from.GroupKind().WithVersion(runtime.APIVersionInternal))
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("no internal type for %v: %w", from, err))
	}
	if err := scheme.Convert(obj, in, nil); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("convert %v to internal: %w", from, err))
	}
	out, err := scheme.New(to)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("no Go type for %v: %w", to, err))
	}
	if err := scheme.Convert(in, out, nil); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("convert internal to %v: %w", to, err))
	}
	out.GetObjectKind().SetGroupVersionKind(to)
	return out, nil
}
