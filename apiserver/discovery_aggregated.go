package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
)

// Aggregated discovery: GET /api and /apis with
// Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList
// answer an apidiscovery.k8s.io/v2 APIGroupDiscoveryList, as
// kube-apiserver v1.37 does, through k8s.io/apiserver's own aggregated
// discovery handler (its content negotiation, the ETag and 304 of
// If-None-Match, Vary: Accept). v2beta1 is not served: kube-apiserver
// v1.37 locks AggregatedDiscoveryRemoveBetaType on, so such a request is
// answered by the legacy documents. Built-in groups are listed once;
// custom resources are brought up to date with the set the CRD controller
// publishes (crd.go) on the first request that sees a new one, with the
// priorities apiextensions-apiserver gives their groups.

// Group priorities: kube-apiserver's aggregator orders the groups of /apis
// by their APIServices' priorities, those of built-in groups all above
// those of custom resource groups (crdGroupPriority). The registry keeps
// the built-in groups in that order, so they are given decreasing
// priorities from builtinGroupPriority.
const (
	builtinGroupPriority = 20000
	crdGroupPriority     = 1000
	crdVersionPriority   = 100
)

// aggregatedDiscovery is the state of the aggregated discovery documents
// of one server.
type aggregatedDiscovery struct {
	once sync.Once
	// api and apis wrap the legacy /api and /apis handlers with the
	// aggregated ones.
	api, apis http.Handler
	apisRM    aggregated.ResourceManager

	// mu guards custom and published: the custom resource set last put
	// into apisRM and the group versions it holds of it.
	mu        sync.Mutex
	custom    *registry.CustomSet
	published map[metav1.GroupVersion]bool
}

// serveDiscoveryRoot serves /api (core true) or /apis: the aggregated
// document when the Accept header asks for it, else the legacy one.
func (s *Server) serveDiscoveryRoot(w http.ResponseWriter, r *http.Request, core bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		WriteStatus(w, methodNotAllowedPath(r))
		return
	}
	a := &s.aggDiscovery
	a.once.Do(s.initAggregatedDiscovery)
	if core {
		a.api.ServeHTTP(w, r)
		return
	}
	s.syncAggregatedCustom()
	a.apis.ServeHTTP(w, r)
}

// initAggregatedDiscovery lists the built-in group versions: core/v1 in
// the document of /api, the others in that of /apis.
func (s *Server) initAggregatedDiscovery() {
	a := &s.aggDiscovery
	apiRM := aggregated.NewResourceManager("api")
	apiRM.AddGroupVersion("", s.builtinVersionDiscovery(schema.GroupVersion{Version: "v1"}))
	a.api = aggregated.WrapAggregatedDiscoveryToHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serveDiscovery(w, r, s.apiVersions)
	}), apiRM, nil)

	a.apisRM = aggregated.NewResourceManager("apis")
	for i, group := range s.builtinGroups() {
		versions := s.reg.Versions[group]
		if s.isReviewGroup(group) {
			versions = []string{"v1"}
		}
		for j, v := range versions {
			gv := schema.GroupVersion{Group: group, Version: v}
			a.apisRM.AddGroupVersion(group, s.builtinVersionDiscovery(gv))
			a.apisRM.SetGroupVersionPriority(metav1.GroupVersion{Group: group, Version: v}, builtinGroupPriority-10*i, len(versions)-j)
		}
	}
	a.apis = aggregated.WrapAggregatedDiscoveryToHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serveDiscovery(w, r, s.apiGroupList)
	}), a.apisRM, nil)
	a.published = map[metav1.GroupVersion]bool{}
}

// builtinVersionDiscovery is the aggregated form of gv's built-in
// resources, made from their legacy list as kube-apiserver's installer
// makes it.
func (s *Server) builtinVersionDiscovery(gv schema.GroupVersion) apidiscoveryv2.APIVersionDiscovery {
	var rs []*resource
	for _, r := range s.reg.ByGV[gv.String()] {
		if !r.Custom {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, byPlural)
	legacy := s.discoveryResources(rs)
	if reviews := s.reviewAPIResources(gv); reviews != nil {
		legacy = reviews
	}
	list, err := endpoints.ConvertGroupVersionIntoToDiscovery(legacy)
	if err != nil {
		// A subresource whose scope is not its parent's: a registry bug,
		// logged, and the group version listed without resources.
		s.log.Error("aggregated discovery", "groupVersion", gv.String(), "err", fmt.Errorf("apiserver: %w", err))
	}
	return apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Resources: list, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
}

// syncAggregatedCustom puts the custom resources served now into the
// aggregated document of /apis, if they changed since it was last done.
func (s *Server) syncAggregatedCustom() {
	a := &s.aggDiscovery
	cs := s.reg.Custom.Load()
	a.mu.Lock()
	defer a.mu.Unlock()
	if cs == a.custom {
		return
	}
	a.custom = cs
	rm := a.apisRM.WithSource(aggregated.CRDSource)
	now := customVersionDiscovery(cs)
	for gv := range a.published {
		if _, ok := now[gv]; !ok {
			rm.RemoveGroupVersion(gv)
			delete(a.published, gv)
		}
	}
	for gv, v := range now {
		rm.AddGroupVersion(gv.Group, v)
		if !a.published[gv] {
			rm.SetGroupVersionPriority(gv, crdGroupPriority, crdVersionPriority)
			a.published[gv] = true
		}
	}
}

// customVersionDiscovery is the aggregated form of the custom resources of
// cs by group version, as apiextensions-apiserver's discovery controller
// makes it.
func customVersionDiscovery(cs *registry.CustomSet) map[metav1.GroupVersion]apidiscoveryv2.APIVersionDiscovery {
	out := map[metav1.GroupVersion]apidiscoveryv2.APIVersionDiscovery{}
	if cs == nil {
		return out
	}
	for _, m := range cs.ByGV {
		var rs []*resource
		for _, r := range m {
			rs = append(rs, r)
		}
		if len(rs) == 0 {
			continue
		}
		slices.SortFunc(rs, byPlural)
		gv := rs[0].GVK.GroupVersion()
		v := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		for _, r := range rs {
			v.Resources = append(v.Resources, customResourceDiscovery(r))
		}
		out[metav1.GroupVersion{Group: gv.Group, Version: gv.Version}] = v
	}
	return out
}

// customResourceDiscovery is one custom resource's entry.
func customResourceDiscovery(r *resource) apidiscoveryv2.APIResourceDiscovery {
	scope := apidiscoveryv2.ScopeCluster
	if r.Namespaced {
		scope = apidiscoveryv2.ScopeNamespace
	}
	kind := &metav1.GroupVersionKind{Group: r.GVK.Group, Version: r.GVK.Version, Kind: r.GVK.Kind}
	d := apidiscoveryv2.APIResourceDiscovery{
		Resource:         r.Plural,
		SingularResource: r.Singular,
		Scope:            scope,
		ResponseKind:     kind,
		Verbs:            crdVerbs(r),
		ShortNames:       slices.Clone(r.ShortNames),
		Categories:       slices.Clone(r.Categories),
	}
	if r.HasStatus {
		d.Subresources = append(d.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource: "status", ResponseKind: kind, Verbs: slices.Clone(subVerbs),
		})
	}
	if r.Scale != nil {
		d.Subresources = append(d.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  "scale",
			ResponseKind: &metav1.GroupVersionKind{Group: autoscalingv1.GroupName, Version: "v1", Kind: "Scale"},
			Verbs:        slices.Clone(subVerbs),
		})
	}
	return d
}

// byPlural orders resources by their plural.
func byPlural(a, b *resource) int { return strings.Compare(a.Plural, b.Plural) }

// crdVerbs are the verbs apiextensions-apiserver lists for a custom
// resource, in its order: fewer while its definition is terminating.
func crdVerbs(r *resource) metav1.Verbs {
	if r.Terminating {
		return metav1.Verbs{"delete", "deletecollection", "get", "list", "watch"}
	}
	return metav1.Verbs{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}
}
