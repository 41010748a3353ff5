package apiserver

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// filter is a request's label and field selectors.
type filter struct {
	labels labels.Selector
	fields fields.Selector
}

// parseFilter parses labelSelector and fieldSelector, rejecting field
// labels the resource does not support (400, as kube-apiserver does).
func parseFilter(r *resource, labelSel, fieldSel string) (filter, error) {
	f := filter{labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if labelSel != "" {
		if f.labels, err = labels.Parse(labelSel); err != nil {
			return f, badRequest("unable to parse requirement: %v", err)
		}
	}
	if fieldSel != "" {
		if f.fields, err = fields.ParseSelector(fieldSel); err != nil {
			return f, badRequest("invalid field selector: %v", err)
		}
		for _, req := range f.fields.Requirements() {
			if fieldPath(r, req.Field) == nil {
				return f, badRequest("field label not supported: %s", req.Field)
			}
		}
	}
	return f, nil
}

// fieldPath is the path in the object of a field selector label, or nil
// when the resource does not support the label.
func fieldPath(r *resource, label string) []string {
	switch label {
	case "metadata.name":
		return []string{"metadata", "name"}
	case "metadata.namespace":
		if r.namespaced {
			return []string{"metadata", "namespace"}
		}
		return nil
	}
	for _, f := range r.fields {
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

// fieldSet is the set of field labels the selector matches against.
func fieldSet(r *resource, obj map[string]any) fields.Set {
	set := fields.Set{"metadata.name": nestedString(obj, "metadata", "name")}
	if r.namespaced {
		set["metadata.namespace"] = nestedString(obj, "metadata", "namespace")
	}
	for _, f := range r.fields {
		set[f] = nestedString(obj, fieldPath(r, f)...)
	}
	return set
}

// nestedString renders a scalar at path as a field selector value.
func nestedString(obj map[string]any, path ...string) string {
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
