package crd

import (
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// ResetFields are the fields a write to subresource sub ("" for the main
// resource, "status") may not set, by API version, as the custom resource
// strategies state them: server-side apply's field manager leaves them out
// of what the writer owns. nil when there are none.
func (r *Rules) ResetFields(sub string) (map[fieldpath.APIVersion]*fieldpath.Set, error) {
	b, err := r.build()
	if err != nil {
		return nil, err
	}
	var s any = b.main
	if sub == "status" {
		s = b.status
	}
	if rf, ok := s.(rest.ResetFieldsStrategy); ok {
		return rf.GetResetFields(), nil
	}
	return nil, nil
}
