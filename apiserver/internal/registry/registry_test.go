package registry

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The registry refuses a resource without Kubernetes' rules: custom
// resources, with their own rules, come from CustomResourceDefinitions.
func TestAddRefusesResourcesWithoutRules(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Kind: "Bar"}
	tests := []struct {
		name string
		r    *Resource
		ok   bool
	}{
		{"no rules", &Resource{GVK: gvk, Plural: "bars"}, false},
		{"status without rules", &Resource{GVK: gvk, Plural: "bars", HasStatus: true}, false},
		{"custom", &Resource{GVK: gvk, Plural: "bars", Custom: true}, false},
		{"built-in", Builtins()[0], true},
	}
	for _, tt := range tests {
		g := &Registry{ByGV: map[string]map[string]*Resource{}, Versions: map[string][]string{}}
		if err := g.add(tt.r); (err == nil) != tt.ok {
			t.Errorf("%s: add: %v", tt.name, err)
		}
	}
}
