package apiserver

import (
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
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
			return f, respond.BadRequest("unable to parse requirement: %v", err)
		}
	}
	if fieldSel != "" {
		if f.fields, err = fields.ParseSelector(fieldSel); err != nil {
			return f, respond.BadRequest("invalid field selector: %v", err)
		}
		for _, req := range f.fields.Requirements() {
			if registry.FieldPath(r, req.Field) == nil {
				return f, respond.BadRequest("field label not supported: %s", req.Field)
			}
		}
	}
	return f, nil
}
