package crdcontroller

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestCalculateNames checks the naming decisions against the names other
// definitions of the group hold: stored, or accepted by the controller
// before their status write is seen.
func TestCalculateNames(t *testing.T) {
	def := func(name, group, plural, kind string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: group,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: plural[:len(plural)-1], Kind: kind, ListKind: kind + "List"},
			},
		}
	}
	stored := func(name, group, plural, kind string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"group": group},
			"status":   map[string]any{"acceptedNames": map[string]any{"plural": plural, "kind": kind}},
		}}
	}
	tests := []struct {
		name       string
		others     []*unstructured.Unstructured
		accepted   map[string]acceptedNames
		wantStatus apiextensionsv1.ConditionStatus
		wantReason string
		wantPlural string
	}{
		{name: "no other definition", wantStatus: apiextensionsv1.ConditionTrue, wantReason: "NoConflicts", wantPlural: "widgets"},
		{
			name:       "plural stored by another of the group",
			others:     []*unstructured.Unstructured{stored("widgets.b.example.com", "example.com", "widgets", "Other")},
			wantStatus: apiextensionsv1.ConditionFalse, wantReason: "PluralConflict",
		},
		{
			name:       "plural of another group",
			others:     []*unstructured.Unstructured{stored("widgets.other.io", "other.io", "widgets", "Widget")},
			wantStatus: apiextensionsv1.ConditionTrue, wantReason: "NoConflicts", wantPlural: "widgets",
		},
		{
			name: "kind accepted for another, not yet stored",
			accepted: map[string]acceptedNames{"gadgets.example.com": {group: "example.com", names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "gadgets", Kind: "Widget",
			}}},
			wantStatus: apiextensionsv1.ConditionFalse, wantReason: "KindConflict", wantPlural: "widgets",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Controller{accepted: tt.accepted}
			if c.accepted == nil {
				c.accepted = map[string]acceptedNames{}
			}
			names, cond, _ := c.calculateNames(def("widgets.example.com", "example.com", "widgets", "Widget"), tt.others)
			if cond.Status != tt.wantStatus || cond.Reason != tt.wantReason {
				t.Errorf("NamesAccepted %s (%s: %s), want %s (%s)", cond.Status, cond.Reason, cond.Message, tt.wantStatus, tt.wantReason)
			}
			if names.Plural != tt.wantPlural {
				t.Errorf("accepted plural %q, want %q", names.Plural, tt.wantPlural)
			}
		})
	}
}
