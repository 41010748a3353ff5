package registry

import (
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/internal/jsontree"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watchcache"
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
	if !ok || err != nil {
		return ""
	}
	return fieldValue(v)
}

// fieldValue renders v, a decoded JSON value, as a field selector value:
// nil (null, or nothing) as "".
func fieldValue(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
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

// attrsScanner reads the watch cache's Attributes of a resource's stored
// objects from their JSON (watchcache.Config.Scan), without decoding the
// rest: the values FieldSet, GetLabels, GetUID and GetNamespace read of
// the map DecodeStored makes.
type attrsScanner struct {
	picker *jsontree.Picker
	// fields are the field labels, in the order of the picker's paths
	// after the first three (labels, uid, namespace).
	fields []string
}

func newAttrsScanner(r *Resource) *attrsScanner {
	s := &attrsScanner{fields: []string{"metadata.name"}}
	if r.Namespaced {
		s.fields = append(s.fields, "metadata.namespace")
	}
	s.fields = append(s.fields, r.Fields...)
	paths := [][]string{{"metadata", "labels"}, {"metadata", "uid"}, {"metadata", "namespace"}}
	for _, f := range s.fields {
		paths = append(paths, FieldPath(r, f))
	}
	s.picker = jsontree.NewPicker(paths...)
	return s
}

// scan reads kv's attributes; it fails where DecodeStored fails.
func (s *attrsScanner) scan(kv storage.KeyValue) (watchcache.Attributes, error) {
	vals, err := s.picker.Pick(kv.Value, nil)
	if err != nil {
		return watchcache.Attributes{}, apierrors.NewInternalError(fmt.Errorf("decode stored object: %w", err))
	}
	// GetLabels' answer: nil unless a map of strings.
	ls, _, _ := unstructured.NestedStringMap(map[string]any{"labels": vals[0]}, "labels")
	uid, _ := vals[1].(string)
	ns, _ := vals[2].(string)
	fs := make(fields.Set, len(s.fields))
	for i, f := range s.fields {
		fs[f] = fieldValue(vals[3+i])
	}
	return watchcache.Attributes{Labels: labels.Set(ls), Fields: fs, UID: uid, Namespace: ns}, nil
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
