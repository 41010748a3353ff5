package discovery

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// testConfig serves apps and events.k8s.io, a custom group, and two
// unstored resources of a group of their own.
func testConfig() Config {
	review := func(kind, plural string) Resource {
		return Resource{GVK: schema.GroupVersionKind{Group: "authorization.k8s.io", Version: "v1", Kind: kind}, Plural: plural, Verbs: metav1.Verbs{"create"}}
	}
	return Config{
		Groups: func() []Group {
			return []Group{
				{Name: "apps", Versions: []string{"v1"}, Builtin: true},
				{Name: "events.k8s.io", Versions: []string{"v1"}, Builtin: true},
				{Name: "policy", Versions: []string{"v1"}, Builtin: true},
				{Name: "example.com", Versions: []string{"v1beta1", "v1alpha1"}},
			}
		},
		Resources: func(gv schema.GroupVersion) ([]Resource, error) { return nil, nil },
		Unstored:  []Resource{review("SubjectAccessReview", "subjectaccessreviews"), review("LocalSubjectAccessReview", "localsubjectaccessreviews")},
	}
}

func TestGroupsPlaceUnstoredAfterEvents(t *testing.T) {
	d := New(testConfig())
	var names []string
	for _, g := range d.groups() {
		names = append(names, g.Name)
	}
	want := []string{"apps", "events.k8s.io", "authorization.k8s.io", "policy", "example.com"}
	if !slices.Equal(names, want) {
		t.Errorf("groups = %v, want %v", names, want)
	}
	rs, err := d.resources(schema.GroupVersion{Group: "authorization.k8s.io", Version: "v1"})
	if err != nil || len(rs) != 2 || rs[0].Plural != "localsubjectaccessreviews" {
		t.Errorf("resources of the unstored group = %v, %v; want both, sorted by plural", rs, err)
	}
}

func TestLegacyResourcesListSubresourcesAfterTheirResource(t *testing.T) {
	r := Resource{
		GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Plural: "deployments", Namespaced: true,
		Verbs: metav1.Verbs{"get"},
		Subresources: []Subresource{
			{Name: "scale", Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: metav1.Verbs{"get"}},
			{Name: "status", Kind: "Deployment", Verbs: metav1.Verbs{"get"}},
		},
	}
	got := legacyResources([]Resource{r})
	var names []string
	for _, a := range got {
		names = append(names, a.Name)
	}
	if want := []string{"deployments", "deployments/scale", "deployments/status"}; !slices.Equal(names, want) {
		t.Fatalf("names = %v, want %v", names, want)
	}
	if got[1].Group != "autoscaling" || got[2].Group != "" || !got[2].Namespaced {
		t.Errorf("subresources = %+v", got[1:])
	}
	got[0].Verbs[0] = "changed"
	if r.Verbs[0] != "get" {
		t.Error("the document shares the resource's verbs")
	}
}

func TestCustomResourceListsStatusBeforeScale(t *testing.T) {
	r := Resource{
		GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, Plural: "widgets",
		Verbs: CustomResourceVerbs(false), Custom: true,
		Subresources: []Subresource{
			{Name: "scale", Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: metav1.Verbs{"get"}},
			{Name: "status", Kind: "Widget", Verbs: metav1.Verbs{"get"}},
		},
	}
	d := customResource(r)
	if len(d.Subresources) != 2 || d.Subresources[0].Subresource != "status" || d.Subresources[1].Subresource != "scale" {
		t.Fatalf("subresources = %+v, want status then scale", d.Subresources)
	}
	if k := d.Subresources[0].ResponseKind; k.Group != "example.com" || k.Version != "v1" || k.Kind != "Widget" {
		t.Errorf("status response kind = %+v", k)
	}
	if k := d.Subresources[1].ResponseKind; k.Group != "autoscaling" || k.Kind != "Scale" {
		t.Errorf("scale response kind = %+v", k)
	}
}
