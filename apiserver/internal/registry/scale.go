package registry

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// MapSelector renders a map selector (replicationcontrollers).
func MapSelector(obj map[string]any) (string, error) {
	sel, _, err := unstructured.NestedStringMap(obj, "spec", "selector")
	if err != nil {
		return "", err
	}
	return labels.SelectorFromSet(sel).String(), nil
}

// LabelSelectorSelector renders a metav1.LabelSelector (deployments).
func LabelSelectorSelector(obj map[string]any) (string, error) {
	m, ok, err := unstructured.NestedMap(obj, "spec", "selector")
	if err != nil || !ok {
		return "", err
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ls); err != nil {
		return "", err
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return "", err
	}
	return sel.String(), nil
}

// ScaleResource describes autoscaling/v1 Scale, the objects of every
// /scale subresource, for decoding, encoding and the field manager.
var ScaleResource = &Resource{
	GVK:    autoscalingv1.SchemeGroupVersion.WithKind("Scale"),
	Plural: "scale",
}
