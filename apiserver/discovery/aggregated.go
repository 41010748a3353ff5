package discovery

import (
	"fmt"
	"net/http"
	"slices"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"

	"github.com/listwatch/listwatch/apiserver/internal/respond"
)

// Aggregated discovery: GET /api and /apis with
// Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList
// answer an apidiscovery.k8s.io/v2 APIGroupDiscoveryList, as
// kube-apiserver v1.37 does, through k8s.io/apiserver's own aggregated
// discovery handler (its content negotiation, the ETag and 304 of
// If-None-Match, Vary: Accept). v2beta1 is not served: kube-apiserver
// v1.37 locks AggregatedDiscoveryRemoveBetaType on, so such a request is
// answered by the legacy documents. Built-in groups are listed once;
// custom resources are brought up to date with those Config.Custom
// returns on the first request that sees a change, with the priorities
// apiextensions-apiserver gives their groups.

// Group priorities: kube-apiserver's aggregator orders the groups of /apis
// by their APIServices' priorities, those of built-in groups all above
// those of custom resource groups (crdGroupPriority). Config.Groups lists
// the built-in groups in that order, so they are given decreasing
// priorities from builtinGroupPriority.
const (
	builtinGroupPriority = 20000
	crdGroupPriority     = 1000
	crdVersionPriority   = 100
)

// aggregatedState is the state of the aggregated discovery documents.
type aggregatedState struct {
	once sync.Once
	// api and apis wrap the legacy /api and /apis handlers with the
	// aggregated ones.
	api, apis http.Handler
	apisRM    aggregated.ResourceManager

	// mu guards custom and published: the custom resource set last put
	// into apisRM and the group versions it holds of it.
	mu        sync.Mutex
	custom    any
	published map[metav1.GroupVersion]bool
}

// serveRoot serves /api (core true) or /apis: the aggregated document
// when the Accept header asks for it, else the legacy one.
func (d *Discovery) serveRoot(w http.ResponseWriter, r *http.Request, core bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		respond.Status(w, respond.MethodNotAllowed())
		return
	}
	a := &d.aggregated
	a.once.Do(d.initAggregated)
	if core {
		a.api.ServeHTTP(w, r)
		return
	}
	d.syncAggregatedCustom()
	a.apis.ServeHTTP(w, r)
}

// initAggregated lists the built-in group versions: core/v1 in the
// document of /api, the others in that of /apis.
func (d *Discovery) initAggregated() {
	a := &d.aggregated
	apiRM := aggregated.NewResourceManager("api")
	apiRM.AddGroupVersion("", d.builtinVersion(schema.GroupVersion{Version: "v1"}))
	a.api = aggregated.WrapAggregatedDiscoveryToHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveDocument(w, r, apiVersions)
	}), apiRM, nil)

	a.apisRM = aggregated.NewResourceManager("apis")
	i := 0
	for _, g := range d.groups() {
		if !g.Builtin {
			continue
		}
		for j, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v}
			a.apisRM.AddGroupVersion(g.Name, d.builtinVersion(gv))
			a.apisRM.SetGroupVersionPriority(metav1.GroupVersion{Group: g.Name, Version: v}, builtinGroupPriority-10*i, len(g.Versions)-j)
		}
		i++
	}
	a.apis = aggregated.WrapAggregatedDiscoveryToHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveDocument(w, r, d.apiGroupList)
	}), a.apisRM, nil)
	a.published = map[metav1.GroupVersion]bool{}
}

// builtinVersion is the aggregated form of gv's built-in resources, made
// from their legacy list as kube-apiserver's installer makes it.
func (d *Discovery) builtinVersion(gv schema.GroupVersion) apidiscoveryv2.APIVersionDiscovery {
	rs, err := d.resources(gv)
	if err != nil {
		d.cfg.Log.Error("aggregated discovery", "groupVersion", gv.String(), "err", fmt.Errorf("discovery: %w", err))
	}
	rs = slices.DeleteFunc(rs, func(r Resource) bool { return r.Custom })
	list, err := endpoints.ConvertGroupVersionIntoToDiscovery(legacyResources(rs))
	if err != nil {
		// A subresource whose scope is not its parent's: a registry bug,
		// logged, and the group version listed without resources.
		d.cfg.Log.Error("aggregated discovery", "groupVersion", gv.String(), "err", fmt.Errorf("discovery: %w", err))
	}
	return apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Resources: list, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
}

// syncAggregatedCustom puts the custom resources served now into the
// aggregated document of /apis, if they changed since it was last done.
func (d *Discovery) syncAggregatedCustom() {
	a := &d.aggregated
	key, rs := d.cfg.Custom()
	a.mu.Lock()
	defer a.mu.Unlock()
	if key == a.custom {
		return
	}
	a.custom = key
	rm := a.apisRM.WithSource(aggregated.CRDSource)
	now := customVersions(rs)
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

// customVersions is the aggregated form of the custom resources rs by
// group version, as apiextensions-apiserver's discovery controller makes
// it.
func customVersions(rs []Resource) map[metav1.GroupVersion]apidiscoveryv2.APIVersionDiscovery {
	byGV := map[metav1.GroupVersion][]Resource{}
	for _, r := range rs {
		gv := metav1.GroupVersion{Group: r.GVK.Group, Version: r.GVK.Version}
		byGV[gv] = append(byGV[gv], r)
	}
	out := map[metav1.GroupVersion]apidiscoveryv2.APIVersionDiscovery{}
	for gv, rs := range byGV {
		slices.SortFunc(rs, byPlural)
		v := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		for _, r := range rs {
			v.Resources = append(v.Resources, customResource(r))
		}
		out[gv] = v
	}
	return out
}

// customResource is one custom resource's entry: apiextensions-apiserver
// lists its status subresource before its scale.
func customResource(r Resource) apidiscoveryv2.APIResourceDiscovery {
	scope := apidiscoveryv2.ScopeCluster
	if r.Namespaced {
		scope = apidiscoveryv2.ScopeNamespace
	}
	d := apidiscoveryv2.APIResourceDiscovery{
		Resource:         r.Plural,
		SingularResource: r.Singular,
		Scope:            scope,
		ResponseKind:     &metav1.GroupVersionKind{Group: r.GVK.Group, Version: r.GVK.Version, Kind: r.GVK.Kind},
		Verbs:            slices.Clone(r.Verbs),
		ShortNames:       slices.Clone(r.ShortNames),
		Categories:       slices.Clone(r.Categories),
	}
	for _, name := range []string{"status", "scale"} {
		i := slices.IndexFunc(r.Subresources, func(s Subresource) bool { return s.Name == name })
		if i < 0 {
			continue
		}
		sub := r.Subresources[i]
		kind := &metav1.GroupVersionKind{Group: sub.Group, Version: sub.Version, Kind: sub.Kind}
		if sub.Group == "" && sub.Version == "" {
			kind.Group, kind.Version = r.GVK.Group, r.GVK.Version
		}
		d.Subresources = append(d.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource: name, ResponseKind: kind, Verbs: slices.Clone(sub.Verbs),
		})
	}
	return d
}
