package apiserver

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	acceptAggregated       = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	acceptAggregatedBeta   = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
	aggregatedContentTypeJ = acceptAggregated
)

// aggregatedDoc fetches the aggregated discovery document of path.
func (c *client) aggregatedDoc(path string) (apidiscoveryv2.APIGroupDiscoveryList, response) {
	c.t.Helper()
	r := c.do("GET", path, "", "", "Accept", acceptAggregated+",application/json")
	var list apidiscoveryv2.APIGroupDiscoveryList
	if r.code != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", path, r.code, r.body)
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	return list, r
}

// findResource returns the entry of group/version/plural in list.
func findResource(list apidiscoveryv2.APIGroupDiscoveryList, group, version, plural string) (apidiscoveryv2.APIResourceDiscovery, bool) {
	for _, g := range list.Items {
		if g.Name != group {
			continue
		}
		for _, v := range g.Versions {
			if v.Version != version {
				continue
			}
			for _, r := range v.Resources {
				if r.Resource == plural {
					return r, true
				}
			}
		}
	}
	return apidiscoveryv2.APIResourceDiscovery{}, false
}

func TestAggregatedDiscoveryHeaders(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	_, first := c.aggregatedDoc("/apis")
	etag := first.hdr.Get("ETag")
	tests := []struct {
		name            string
		path            string
		hdr             []string
		code            int
		contentType     string
		kind            string
		vary, cacheCtrl string
	}{
		{"apis v2", "/apis", []string{"Accept", acceptAggregated}, 200, aggregatedContentTypeJ, "APIGroupDiscoveryList", "Accept", "public"},
		{"api v2", "/api", []string{"Accept", acceptAggregated}, 200, aggregatedContentTypeJ, "APIGroupDiscoveryList", "Accept", "public"},
		{"apis v2 as client-go asks", "/apis", []string{"Accept", acceptAggregated + ",application/json"}, 200, aggregatedContentTypeJ, "APIGroupDiscoveryList", "Accept", "public"},
		{"apis v2 no peer", "/apis", []string{"Accept", acceptAggregated + ";profile=nopeer,application/json"}, 200, aggregatedContentTypeJ, "APIGroupDiscoveryList", "Accept", "public"},
		{"apis v2 not modified", "/apis", []string{"Accept", acceptAggregated, "If-None-Match", etag}, http.StatusNotModified, "", "", "Accept", "public"},
		{"apis v2 stale etag", "/apis", []string{"Accept", acceptAggregated, "If-None-Match", `"0"`}, 200, aggregatedContentTypeJ, "APIGroupDiscoveryList", "Accept", "public"},
		// kube-apiserver v1.37 no longer serves v2beta1: legacy document.
		{"apis v2beta1 falls back", "/apis", []string{"Accept", acceptAggregatedBeta + ",application/json"}, 200, "application/json", "APIGroupList", "", ""},
		{"apis legacy", "/apis", nil, 200, "application/json", "APIGroupList", "", ""},
		{"api legacy", "/api", []string{"Accept", "application/json"}, 200, "application/json", "APIVersions", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.do("GET", tt.path, "", "", tt.hdr...)
			if r.code != tt.code {
				t.Fatalf("code %d, want %d: %s", r.code, tt.code, r.body)
			}
			if got := r.hdr.Get("Content-Type"); tt.contentType != "" && got != tt.contentType {
				t.Errorf("Content-Type %q, want %q", got, tt.contentType)
			}
			if got := r.hdr.Get("Vary"); got != tt.vary {
				t.Errorf("Vary %q, want %q", got, tt.vary)
			}
			if got := r.hdr.Get("Cache-Control"); got != tt.cacheCtrl {
				t.Errorf("Cache-Control %q, want %q", got, tt.cacheCtrl)
			}
			if tt.vary != "" && r.hdr.Get("ETag") == "" {
				t.Error("no ETag")
			}
			if tt.kind != "" {
				var tm metav1.TypeMeta
				if err := json.Unmarshal(r.body, &tm); err != nil {
					t.Fatal(err)
				}
				if tm.Kind != tt.kind {
					t.Errorf("kind %q, want %q", tm.Kind, tt.kind)
				}
			}
		})
	}
	if r := c.do("POST", "/apis", "", "{}", "Accept", acceptAggregated); r.code != http.StatusMethodNotAllowed {
		t.Errorf("POST /apis: %d, want 405", r.code)
	}
}

func TestAggregatedDiscoveryResources(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	group := "agg.example.com"
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"widgets.` + group + `"},
"spec":{"group":"` + group + `","scope":"Cluster",
 "names":{"kind":"Widget","plural":"widgets","singular":"widget","shortNames":["wd"],"categories":["all"]},
 "versions":[{"name":"v1","served":true,"storage":true,
  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}},
  "subresources":{"status":{},"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}}},
  {"name":"v1beta1","served":true,"storage":false,
  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
	_, before := c.aggregatedDoc("/apis")

	type want struct {
		scope        apidiscoveryv2.ResourceScope
		singular     string
		kind         metav1.GroupVersionKind
		verbs        []string
		shortNames   []string
		categories   []string
		subresources map[string]metav1.GroupVersionKind
		subVerbs     map[string][]string
	}
	tests := []struct {
		name                    string
		setup                   func(t *testing.T)
		path                    string
		group, version, plural  string
		want                    *want // nil: not listed
		etagChanged, etagSameAs bool
	}{
		{
			name: "core pods", path: "/api", version: "v1", plural: "pods",
			want: &want{
				scope: apidiscoveryv2.ScopeNamespace, singular: "pod", kind: metav1.GroupVersionKind{Kind: "Pod"},
				verbs:      []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
				shortNames: []string{"po"}, categories: []string{"all"},
				subresources: map[string]metav1.GroupVersionKind{"status": {Kind: "Pod"}, "binding": {Kind: "Binding"}},
				subVerbs:     map[string][]string{"status": {"get", "patch", "update"}, "binding": {"create"}},
			},
		},
		{
			name: "core namespaces", path: "/api", version: "v1", plural: "namespaces",
			want: &want{
				scope: apidiscoveryv2.ScopeCluster, singular: "namespace", kind: metav1.GroupVersionKind{Kind: "Namespace"},
				verbs:        []string{"create", "delete", "get", "list", "patch", "update", "watch"},
				shortNames:   []string{"ns"},
				subresources: map[string]metav1.GroupVersionKind{"status": {Kind: "Namespace"}, "finalize": {Kind: "Namespace"}},
				subVerbs:     map[string][]string{"finalize": {"update"}},
			},
		},
		{name: "no core group under /apis", path: "/apis", version: "v1", plural: "pods"},
		{
			name: "apps deployments", path: "/apis", group: "apps", version: "v1", plural: "deployments",
			want: &want{
				scope: apidiscoveryv2.ScopeNamespace, singular: "deployment", kind: metav1.GroupVersionKind{Kind: "Deployment"},
				verbs:      []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
				shortNames: []string{"deploy"}, categories: []string{"all"},
				subresources: map[string]metav1.GroupVersionKind{
					"status": {Kind: "Deployment"},
					"scale":  {Group: "autoscaling", Version: "v1", Kind: "Scale"},
				},
			},
		},
		{name: "custom resource before its CRD", path: "/apis", group: group, version: "v1", plural: "widgets"},
		{
			name: "custom resource added", path: "/apis", group: group, version: "v1", plural: "widgets",
			setup: func(t *testing.T) { c.createCRD(crd) },
			want: &want{
				scope: apidiscoveryv2.ScopeCluster, singular: "widget", kind: metav1.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"},
				verbs:      []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"},
				shortNames: []string{"wd"}, categories: []string{"all"},
				subresources: map[string]metav1.GroupVersionKind{
					"status": {Group: group, Version: "v1", Kind: "Widget"},
					"scale":  {Group: "autoscaling", Version: "v1", Kind: "Scale"},
				},
				subVerbs: map[string][]string{"status": {"get", "patch", "update"}, "scale": {"get", "patch", "update"}},
			},
			etagChanged: true,
		},
		{
			name: "custom resource second version", path: "/apis", group: group, version: "v1beta1", plural: "widgets",
			want: &want{
				scope: apidiscoveryv2.ScopeCluster, singular: "widget", kind: metav1.GroupVersionKind{Group: group, Version: "v1beta1", Kind: "Widget"},
				verbs:      []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"},
				shortNames: []string{"wd"}, categories: []string{"all"},
				subresources: map[string]metav1.GroupVersionKind{},
			},
			etagChanged: true,
		},
		{
			name: "custom resource removed", path: "/apis", group: group, version: "v1", plural: "widgets",
			setup: func(t *testing.T) {
				c.mustDo("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets."+group, "", "", http.StatusOK)
				c.waitFor(func() bool {
					list, _ := c.aggregatedDoc("/apis")
					_, ok := findResource(list, group, "v1", "widgets")
					return !ok
				})
			},
			etagSameAs: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup(t)
			}
			list, r := c.aggregatedDoc(tt.path)
			if list.Kind != "APIGroupDiscoveryList" || list.APIVersion != "apidiscovery.k8s.io/v2" {
				t.Errorf("kind %s %s", list.APIVersion, list.Kind)
			}
			if tt.etagChanged && r.hdr.Get("ETag") == before.hdr.Get("ETag") {
				t.Error("ETag did not change")
			}
			if tt.etagSameAs && r.hdr.Get("ETag") != before.hdr.Get("ETag") {
				t.Errorf("ETag %s, want the one before the CRD %s", r.hdr.Get("ETag"), before.hdr.Get("ETag"))
			}
			got, ok := findResource(list, tt.group, tt.version, tt.plural)
			if tt.want == nil {
				if ok {
					t.Fatalf("%s/%s %s listed", tt.group, tt.version, tt.plural)
				}
				for _, g := range list.Items {
					if g.Name == tt.group && tt.group != "" {
						t.Errorf("group %s listed", tt.group)
					}
				}
				return
			}
			if !ok {
				t.Fatalf("%s/%s %s not listed", tt.group, tt.version, tt.plural)
			}
			w := tt.want
			if got.Scope != w.scope || got.SingularResource != w.singular || got.ResponseKind == nil || *got.ResponseKind != w.kind {
				t.Errorf("scope %s singular %s kind %v, want %s %s %v", got.Scope, got.SingularResource, got.ResponseKind, w.scope, w.singular, w.kind)
			}
			if !slices.Equal(got.Verbs, w.verbs) || !slices.Equal(got.ShortNames, w.shortNames) || !slices.Equal(got.Categories, w.categories) {
				t.Errorf("verbs %v shortNames %v categories %v, want %v %v %v", got.Verbs, got.ShortNames, got.Categories, w.verbs, w.shortNames, w.categories)
			}
			subs := map[string]metav1.GroupVersionKind{}
			for _, s := range got.Subresources {
				if s.ResponseKind != nil {
					subs[s.Subresource] = *s.ResponseKind
				}
				if v, ok := w.subVerbs[s.Subresource]; ok && !slices.Equal(s.Verbs, v) {
					t.Errorf("%s verbs %v, want %v", s.Subresource, s.Verbs, v)
				}
			}
			for name, kind := range w.subresources {
				if subs[name] != kind {
					t.Errorf("subresource %s: %v, want %v", name, subs[name], kind)
				}
			}
			if len(w.subresources) == 0 && len(got.Subresources) != 0 {
				t.Errorf("subresources %v, want none", got.Subresources)
			}
			for _, g := range list.Items {
				for _, v := range g.Versions {
					if v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
						t.Errorf("%s/%s freshness %q", g.Name, v.Version, v.Freshness)
					}
				}
			}
		})
	}
}

// TestAggregatedDiscoveryMatchesLegacy holds the aggregated document to
// the legacy one: the same groups in the same order, the same versions
// (preferred first) and the same resources.
func TestAggregatedDiscoveryMatchesLegacy(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	agg, _ := c.aggregatedDoc("/apis")
	var legacy metav1.APIGroupList
	if err := json.Unmarshal(c.do("GET", "/apis", "", "").body, &legacy); err != nil {
		t.Fatal(err)
	}
	var aggGroups, legacyGroups []string
	for _, g := range agg.Items {
		aggGroups = append(aggGroups, g.Name)
	}
	for _, g := range legacy.Groups {
		legacyGroups = append(legacyGroups, g.Name)
	}
	if !slices.Equal(aggGroups, legacyGroups) {
		t.Fatalf("groups\n aggregated %v\n legacy     %v", aggGroups, legacyGroups)
	}
	for i, g := range agg.Items {
		l := legacy.Groups[i]
		if len(g.Versions) != len(l.Versions) || g.Versions[0].Version != l.PreferredVersion.Version {
			t.Errorf("%s: versions %d, preferred %s; legacy %d, %s", g.Name, len(g.Versions), g.Versions[0].Version, len(l.Versions), l.PreferredVersion.Version)
		}
		for _, v := range g.Versions {
			var rl metav1.APIResourceList
			if err := json.Unmarshal(c.do("GET", "/apis/"+g.Name+"/"+v.Version, "", "").body, &rl); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range rl.APIResources {
				if _, ok := findResource(agg, g.Name, v.Version, r.Name); ok {
					n++
				}
			}
			if n != len(v.Resources) {
				t.Errorf("%s/%s: %d resources aggregated, %d of them legacy", g.Name, v.Version, len(v.Resources), n)
			}
		}
	}
}
