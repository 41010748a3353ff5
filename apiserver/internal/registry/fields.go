package registry

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
)

// FieldPath is the path in the object of a field selector label, or nil
// when the resource does not support the label.
func FieldPath(r *Resource, label string) []string {
	switch label {
	case "metadata.name":
		return []string{"metadata", "name"}
	case "metadata.namespace":
		if r.Namespaced {
			return []string{"metadata", "namespace"}
		}
		return nil
	}
	for _, f := range r.Fields {
		if f == label {
			if label == "source" {
				// events: "source" selects on source.component.
				return []string{"source", "component"}
			}
			return strings.Split(label, ".")
		}
	}
	return nil
}

// FieldSet is the set of field labels a field selector matches obj, an
// object of r, against.
func FieldSet(r *Resource, obj map[string]any) fields.Set {
	set := fields.Set{"metadata.name": NestedString(obj, "metadata", "name")}
	if r.Namespaced {
		set["metadata.namespace"] = NestedString(obj, "metadata", "namespace")
	}
	for _, f := range r.Fields {
		set[f] = NestedString(obj, FieldPath(r, f)...)
	}
	return set
}

// NestedString renders a scalar at path as a field selector value.
func NestedString(obj map[string]any, path ...string) string {
	v, ok, err := unstructured.NestedFieldNoCopy(obj, path...)
	if !ok || err != nil || v == nil {
		return ""
	}
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

// FieldLabelError is kube-apiserver's refusal of a field selector on
// label=value, a label r does not select on (FieldPath is nil): for a
// built-in resource its scheme's words, for a custom resource
// apiextensions-apiserver's.
func FieldLabelError(r *Resource, label, value string) error {
	if r.Kube != nil {
		if err := r.Kube.FieldLabelError(label, value); err != nil {
			return err
		}
	}
	return fmt.Errorf("field label not supported: %s", label)
}
