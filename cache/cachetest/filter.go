package cachetest

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/cache"
)

// filter is the label and field selection of one request.
type filter[T cache.Object] struct {
	label  labels.Selector
	field  fields.Selector
	fields map[string]func(T) string // extractors of the fields field uses
	all    bool
}

// newFilter parses the selectors of opts. Unparsable selectors and field
// selectors on unsupported fields are 400 BadRequest, as on a real server.
func (s *Source[T]) newFilter(opts metav1.ListOptions) (*filter[T], error) {
	f := &filter[T]{label: labels.Everything(), field: fields.Everything()}
	if opts.LabelSelector != "" {
		sel, err := labels.Parse(opts.LabelSelector)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
		}
		f.label = sel
	}
	if opts.FieldSelector != "" {
		sel, err := fields.ParseSelector(opts.FieldSelector)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
		}
		f.field = sel
		f.fields = map[string]func(T) string{}
		for _, r := range sel.Requirements() {
			extract, ok := s.cfg.fields[r.Field]
			if !ok {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
			}
			f.fields[r.Field] = extract
		}
	}
	f.all = f.label.Empty() && f.field.Empty()
	return f, nil
}

// match reports whether obj is selected. A nil object is never selected.
func (f *filter[T]) match(obj T) bool {
	if f.all {
		return !isNil(obj)
	}
	if isNil(obj) {
		return false
	}
	if !f.label.Empty() && !f.label.Matches(labels.Set(obj.GetLabels())) {
		return false
	}
	if !f.field.Empty() {
		set := make(fields.Set, len(f.fields))
		for name, extract := range f.fields {
			set[name] = extract(obj)
		}
		if !f.field.Matches(set) {
			return false
		}
	}
	return true
}
