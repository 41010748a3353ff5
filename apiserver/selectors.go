package apiserver

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
)

// filter is a request's label and field selectors.
type filter struct {
	labels labels.Selector
	fields fields.Selector
}

// parseFilter parses labelSelector and fieldSelector, rejecting field
// labels the resource does not support: 400s in kube-apiserver's words.
func parseFilter(r *resource, labelSel, fieldSel string) (filter, error) {
	f := filter{labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if labelSel != "" {
		if f.labels, err = labels.Parse(labelSel); err != nil {
			return f, apierrors.NewBadRequest(err.Error())
		}
	}
	if fieldSel != "" {
		if f.fields, err = fields.ParseSelector(fieldSel); err != nil {
			return f, apierrors.NewBadRequest(err.Error())
		}
		for _, req := range f.fields.Requirements() {
			if registry.FieldPath(r, req.Field) == nil {
				return f, apierrors.NewBadRequest(registry.FieldLabelError(r, req.Field, req.Value).Error())
			}
		}
	}
	return f, nil
}
