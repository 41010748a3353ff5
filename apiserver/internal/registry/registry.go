// Package registry holds what the API server knows of each resource it
// serves (Resource) and the index of them (Registry), with what every
// write path shares below the resources' own rules: storage keys, the
// stored form of objects and the watch caches.
//
// It imports nothing of the server's handlers: they, and the rules of
// each resource, build on it.
package registry

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/listwatch/listwatch/apiserver/internal/crd"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/resources"
)

// Registry indexes resources by group/version and plural.
type Registry struct {
	// ByGV maps "group/version" ("v1" for core) to plural to resource.
	ByGV map[string]map[string]*Resource
	// Groups in discovery order, core excluded.
	Groups []string
	// Versions of each group.
	Versions map[string][]string
	// Custom are the custom resources served from
	// CustomResourceDefinitions, replaced whole on every change so that
	// requests read them without a lock.
	Custom atomic.Pointer[CustomSet]
}

// New returns the registry of the built-in resources.
func New() (*Registry, error) {
	g := &Registry{ByGV: map[string]map[string]*Resource{}, Versions: map[string][]string{}}
	for _, r := range Builtins() {
		if err := g.add(r); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Lookup returns the resource plural of gv, built-in or custom; nil when
// none is served.
func (g *Registry) Lookup(gv schema.GroupVersion, plural string) *Resource {
	if r := g.ByGV[gv.String()][plural]; r != nil {
		return r
	}
	if cs := g.Custom.Load(); cs != nil {
		return cs.ByGV[gv.String()][plural]
	}
	return nil
}

// BindingTarget is the resource of gv that the bindings resource binds
// (pods), or nil.
func (g *Registry) BindingTarget(gv schema.GroupVersion) *Resource {
	for _, r := range g.ByGV[gv.String()] {
		if r.Binding {
			return r
		}
	}
	return nil
}

func (g *Registry) add(r *Resource) error {
	if r.Kube == nil {
		// Custom resources come from CustomResourceDefinitions, with
		// their own rules, not through the registry.
		return fmt.Errorf("apiserver: resource %s has no Kubernetes rules", r.GVR())
	}
	gv := r.GVK.GroupVersion()
	m := g.ByGV[gv.String()]
	if m == nil {
		m = map[string]*Resource{}
		g.ByGV[gv.String()] = m
		if r.GVK.Group != "" {
			if _, ok := g.Versions[r.GVK.Group]; !ok {
				g.Groups = append(g.Groups, r.GVK.Group)
			}
			g.Versions[r.GVK.Group] = append(g.Versions[r.GVK.Group], gv.Version)
		}
	}
	if _, dup := m[r.Plural]; dup {
		return fmt.Errorf("apiserver: resource %s declared twice", r.GVR())
	}
	for _, other := range m {
		if other.GVK.Kind == r.GVK.Kind {
			return fmt.Errorf("apiserver: kind %s declared twice in %s", r.GVK.Kind, gv)
		}
	}
	m[r.Plural] = r
	return nil
}

// Resources returns the resources of group/version gv, by plural.
func (g *Registry) Resources(gv string) []*Resource {
	var out []*Resource
	for _, r := range g.ByGV[gv] {
		out = append(out, r)
	}
	if cs := g.Custom.Load(); cs != nil {
		for plural, r := range cs.ByGV[gv] {
			if g.ByGV[gv][plural] == nil {
				out = append(out, r)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Plural < out[j].Plural })
	return out
}

// Builtins are the resources of the registry's table (package resources),
// each with kube-apiserver's own rules for it (package kube): what the
// table states about a resource is read from there, and how its writes
// behave from Kubernetes' strategies.
func Builtins() []*Resource {
	var out []*Resource
	for _, def := range resources.Builtin.All() {
		rules, ok := kube.For(def.GVR(), def.GVK)
		if !ok {
			panic(fmt.Sprintf("apiserver: no Kubernetes strategy for built-in resource %v", def.GVR()))
		}
		r := &Resource{
			GVK:                 def.GVK,
			Plural:              def.Plural,
			Singular:            def.Singular,
			ShortNames:          def.ShortNames,
			Categories:          def.Categories,
			Namespaced:          def.Namespaced,
			Def:                 def,
			Kube:                rules,
			HasStatus:           def.HasSubresource(resources.Status),
			Binding:             def.HasSubresource(resources.Binding),
			UnconditionalUpdate: rules.AllowUnconditionalUpdate(),
			CreateOnUpdate:      rules.AllowCreateOnUpdate(),
			ReturnDeleted:       rules.ReturnDeleted(),
			OrphanByDefault:     rules.OrphanByDefault(),
			Graceful:            rules.Graceful(),
			Fields:              def.Fields,
		}
		if def.HasSubresource(resources.Scale) {
			r.Scale = &ScaleSpec{Selector: LabelSelectorSelector}
			if def.GVK.Group == "" {
				// core/v1's replication controllers keep a map selector.
				r.Scale.Selector = MapSelector
			}
		}
		if special := specialRules[def.GVR()]; special != nil {
			r.Rules = special(r)
		}
		out = append(out, r)
	}
	for _, r := range out {
		if r.Def.StoredAs.Empty() {
			continue
		}
		for _, other := range out {
			if other.GVK == r.Def.StoredAs {
				r.StoredAs = other
			}
		}
		if r.StoredAs == nil {
			panic(fmt.Sprintf("apiserver: %v is stored as %v, which is not served", r.GVK, r.Def.StoredAs))
		}
	}
	equivalents := equivalentResources(out)
	for _, r := range out {
		r.Kube.SetEquivalents(equivalents)
	}
	return out
}

// equivalentResources are the resources of out that are one storage's
// objects at different versions, with the kind of each resource and
// subresource: kube-apiserver's registry of equivalent resources, which
// buckets its resources by storage too.
func equivalentResources(out []*Resource) runtime.EquivalentResourceMapper {
	storageOf := map[schema.GroupResource]string{}
	for _, r := range out {
		storageOf[r.GR()] = r.Storage().GR().String()
	}
	m := runtime.NewEquivalentResourceRegistryWithIdentity(func(gr schema.GroupResource) string {
		if s, ok := storageOf[gr]; ok {
			return s
		}
		return gr.String()
	})
	for _, r := range out {
		m.RegisterKindFor(r.GVR(), "", r.GVK)
		for _, sub := range r.Def.Subresources {
			kind := r.GVK
			switch sub {
			case resources.Scale:
				kind = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
			case resources.Binding:
				kind = schema.GroupVersionKind{Version: "v1", Kind: "Binding"}
			case resources.Eviction:
				kind = schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}
			}
			m.RegisterKindFor(r.GVR(), sub, kind)
		}
	}
	return m
}

// specialRules are the built-in resources whose rules do more than their
// strategies (see Rules); services' are set by the server, which holds
// their allocators.
var specialRules = map[schema.GroupVersionResource]func(r *Resource) Rules{
	{Version: "v1", Resource: "namespaces"}:           func(r *Resource) Rules { return NamespaceRules{BuiltinRules{r.Kube}, r} },
	{Version: "v1", Resource: "pods"}:                 func(r *Resource) Rules { return PodRules{BuiltinRules{r.Kube}, r} },
	{Group: "batch", Version: "v1", Resource: "jobs"}: func(r *Resource) Rules { return JobRules{BuiltinRules{r.Kube}, r} },
	{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}: func(r *Resource) Rules {
		return CRDRules{BuiltinRules{r.Kube}, r}
	},
}

// CustomSet is the custom resources served at one moment.
type CustomSet struct {
	// ByGV maps "group/version" to plural to resource.
	ByGV map[string]map[string]*Resource
	// Groups are the groups of custom resources, sorted, and Versions
	// their served versions, the preferred first.
	Groups   []string
	Versions map[string][]string
	// ByCRD holds each definition's resources, one per served version.
	ByCRD map[string][]*Resource
}

// NewCustomSet indexes byCRD.
func NewCustomSet(byCRD map[string][]*Resource) *CustomSet {
	cs := &CustomSet{ByGV: map[string]map[string]*Resource{}, Versions: map[string][]string{}, ByCRD: byCRD}
	// versionPriority orders a group's versions as kube-apiserver's
	// discovery does for custom resources: by Kubernetes version order.
	seen := map[string]map[string]bool{}
	for _, rs := range byCRD {
		for _, r := range rs {
			gv := r.GVK.GroupVersion()
			m := cs.ByGV[gv.String()]
			if m == nil {
				m = map[string]*Resource{}
				cs.ByGV[gv.String()] = m
			}
			m[r.Plural] = r
			if seen[gv.Group] == nil {
				seen[gv.Group] = map[string]bool{}
				cs.Groups = append(cs.Groups, gv.Group)
			}
			if !seen[gv.Group][gv.Version] {
				seen[gv.Group][gv.Version] = true
				cs.Versions[gv.Group] = append(cs.Versions[gv.Group], gv.Version)
			}
		}
	}
	sort.Strings(cs.Groups)
	for _, vs := range cs.Versions {
		sort.Slice(vs, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(vs[i], vs[j]) > 0 })
	}
	return cs
}

// CustomResources is the registry's current set of custom resources.
func (g *Registry) CustomResources() *CustomSet {
	if cs := g.Custom.Load(); cs != nil {
		return cs
	}
	return &CustomSet{}
}

// GroupVersions returns the versions of group, built-in or custom, the
// preferred first.
func (g *Registry) GroupVersions(group string) []string {
	if vs, ok := g.Versions[group]; ok {
		return vs
	}
	return g.CustomResources().Versions[group]
}

// AllGroups returns every group, built-in ones first in their order, then
// those of custom resources by name, as kube-apiserver lists them.
func (g *Registry) AllGroups() []string {
	out := slices.Clone(g.Groups)
	for _, name := range g.CustomResources().Groups {
		if _, builtin := g.Versions[name]; !builtin {
			out = append(out, name)
		}
	}
	return out
}

// HasGroupVersion reports whether anything is served under gv.
func (g *Registry) HasGroupVersion(gv string) bool {
	if _, ok := g.ByGV[gv]; ok {
		return true
	}
	_, ok := g.CustomResources().ByGV[gv]
	return ok
}

// NewCustom is the resource of version of the custom resource defined by
// def (its definition as installed, shared and not to be changed), with
// the rules of kube-apiserver's custom resource handler; structural is
// the definition's structural schemas (crd.Structural) and fingerprint its
// Fingerprint; conv makes its converter (nil: converters reaching URL
// webhooks only). Its Cache is left to the caller.
func NewCustom(def *apiextensionsv1.CustomResourceDefinition, version string, structural map[string]*structuralschema.Structural, fingerprint string, conv *crd.Converters) (*Resource, error) {
	rules, err := crd.New(def, version, structural, conv)
	if err != nil {
		return nil, err
	}
	names := def.Status.AcceptedNames
	r := &Resource{
		GVK:            schema.GroupVersionKind{Group: def.Spec.Group, Version: version, Kind: names.Kind},
		Plural:         names.Plural,
		Singular:       names.Singular,
		ShortNames:     slices.Clone(names.ShortNames),
		Categories:     slices.Clone(names.Categories),
		Namespaced:     def.Spec.Scope == apiextensionsv1.NamespaceScoped,
		Custom:         true,
		HasStatus:      rules.HasStatus(),
		Fields:         rules.SelectableFields(),
		CR:             rules,
		CRDName:        def.Name,
		CRDFingerprint: fingerprint,
		CRD:            def,
		Terminating:    def.DeletionTimestamp != nil,
	}
	if sc := rules.Scale(); sc != nil {
		r.Scale = &ScaleSpec{
			SpecReplicas:   jsonPath(sc.SpecReplicasPath),
			StatusReplicas: jsonPath(sc.StatusReplicasPath),
			Selector: func(obj map[string]any) (string, error) {
				if sc.LabelSelectorPath == nil {
					return "", nil
				}
				return NestedString(obj, jsonPath(*sc.LabelSelectorPath)...), nil
			},
		}
	}
	return r, nil
}

// Fingerprint identifies what a definition's installation depends on: the
// definition (its uid), its spec (generation), its accepted names and
// whether it is being deleted.
func Fingerprint(c *apiextensionsv1.CustomResourceDefinition) string {
	return fmt.Sprintf("%s/%d/%t/%+v", c.UID, c.Generation, c.DeletionTimestamp != nil, c.Status.AcceptedNames)
}

// jsonPath turns a scale subresource's path (".spec.replicas") into its
// fields.
func jsonPath(p string) []string {
	p = strings.TrimPrefix(p, ".")
	if p == "" {
		return nil
	}
	return strings.Split(p, ".")
}
