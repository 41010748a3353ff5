package apiserver

import (
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/apiserver/auth"
	"github.com/listwatch/listwatch/apiserver/discovery"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/resources"
)

// The server's side of package discovery: what it serves, described from
// the registry, the custom resources and the reviews of package auth.

// KubernetesVersion is the Kubernetes release whose API this server speaks
// (that of the k8s.io/api types it serves).
const KubernetesVersion = discovery.KubernetesVersion

// newDiscovery describes the server to package discovery.
func (s *Server) newDiscovery() *discovery.Discovery {
	return discovery.New(discovery.Config{
		Log:       s.log,
		Groups:    s.discoveryGroups,
		Resources: s.discoveryResources,
		Custom:    s.discoveryCustom,
		OpenAPIResources: func() []kube.OpenAPIResource {
			// The reviews too: published, never stored (no list kind,
			// no field management of their own).
			return append(registry.OpenAPIResources(), reviewOpenAPIResources()...)
		},
		CRDs:     s.openAPICRDs,
		Unstored: reviewResources(),
	})
}

// SetCustomResourceOpenAPI publishes a custom resource in /openapi/v2 and
// /openapi/v3 as kube-apiserver publishes a CustomResourceDefinition: for
// each served version of crd, its paths and operations (with its status
// and scale subresources) and its schema, which is the version's
// spec.versions[].schema.openAPIV3Schema (a JSON schema; a schema that is
// not structural is published without its properties, as kube-apiserver
// does). A later call for a CRD of the same name replaces what this one
// published; the documents concerned are rebuilt on their next request.
// crd is copied, and may be changed after the call.
//
// Call it when a definition is Established, and RemoveCustomResourceOpenAPI
// when it is deleted or no longer established: kube-apiserver publishes
// only established definitions. It fails, publishing nothing, when crd
// lacks its name, group, kind, plural or a served version, names a version
// twice, or serves a kind that another published CRD serves in the same
// group/version. The documents made first (on the first call or request)
// start with the definitions served then.
func (s *Server) SetCustomResourceOpenAPI(crd *apiextensionsv1.CustomResourceDefinition) error {
	return s.discovery.SetCustomResourceOpenAPI(crd)
}

// RemoveCustomResourceOpenAPI withdraws from the OpenAPI documents what
// SetCustomResourceOpenAPI published for the CustomResourceDefinition named
// name (<plural>.<group>); an unknown name is ignored.
func (s *Server) RemoveCustomResourceOpenAPI(name string) {
	s.discovery.RemoveCustomResourceOpenAPI(name)
}

// reviewOpenAPIResources are the reviews as the OpenAPI documents state
// them: create-only resources, as kube-apiserver publishes them.
func reviewOpenAPIResources() []kube.OpenAPIResource {
	var out []kube.OpenAPIResource
	for _, rv := range auth.Reviews() {
		out = append(out, kube.OpenAPIResource{GVK: rv.GVK, Plural: rv.Plural, Singular: strings.ToLower(rv.GVK.Kind),
			Namespaced: rv.Namespaced, Verbs: []string{"create"}})
	}
	return out
}

// discoveryGroups are the groups of /apis: the registry's, then those of
// custom resources alone.
func (s *Server) discoveryGroups() []discovery.Group {
	var out []discovery.Group
	for _, name := range s.reg.AllGroups() {
		_, builtin := s.reg.Versions[name]
		out = append(out, discovery.Group{Name: name, Versions: s.reg.GroupVersions(name), Builtin: builtin})
	}
	return out
}

// reviewResources are the reviews of package auth as discovery lists
// them: create-only resources kube-apiserver lists among the built-in ones.
func reviewResources() []discovery.Resource {
	var out []discovery.Resource
	for _, rv := range auth.Reviews() {
		out = append(out, discovery.Resource{GVK: rv.GVK, Plural: rv.Plural, Singular: strings.ToLower(rv.GVK.Kind),
			Namespaced: rv.Namespaced, Verbs: metav1.Verbs{"create"}})
	}
	return out
}

// discoveryResources are the resources served under gv: those of the
// registry and the custom resources.
func (s *Server) discoveryResources(gv schema.GroupVersion) ([]discovery.Resource, error) {
	if !s.reg.HasGroupVersion(gv.String()) {
		return nil, s.unknownResource(gv)
	}
	var out []discovery.Resource
	bindings := false
	for _, r := range s.reg.Resources(gv.String()) {
		if r.Binding && !bindings {
			// Where pods are bound, the bindings resource
			// (serveBindings) is listed in its place among them.
			out = append(out, discovery.Resource{GVK: bindingResource.GVK, Plural: bindingResource.Plural,
				Singular: "binding", Namespaced: true, Verbs: metav1.Verbs{"create"}})
			bindings = true
		}
		out = append(out, s.discoveryResource(r))
	}
	slices.SortStableFunc(out, func(a, b discovery.Resource) int { return strings.Compare(a.Plural, b.Plural) })
	return out, nil
}

// discoveryCustom lists the custom resources served now; the set they
// come from changes whole with them.
func (s *Server) discoveryCustom() (any, []discovery.Resource) {
	cs := s.reg.Custom.Load()
	if cs == nil {
		return nil, nil
	}
	var out []discovery.Resource
	for _, m := range cs.ByGV {
		for _, r := range m {
			out = append(out, s.discoveryResource(r))
		}
	}
	return cs, out
}

var (
	collectionVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	subVerbs        = metav1.Verbs{"get", "patch", "update"}
)

// discoveryResource is r as discovery lists it, with its subresources in
// name order: those of its definition and, on a server that issues
// service account tokens, serviceaccounts/token (package auth).
func (s *Server) discoveryResource(r *resource) discovery.Resource {
	verbs := collectionVerbs
	if r.Def != nil {
		verbs = r.Def.DiscoveryVerbs()
	} else if r.CR != nil {
		verbs = discovery.CustomResourceVerbs(r.Terminating)
	}
	d := discovery.Resource{
		GVK: r.GVK, Plural: r.Plural, Singular: r.Singular, Namespaced: r.Namespaced,
		Verbs: verbs, ShortNames: r.ShortNames, Categories: r.Categories, Custom: r.Custom,
	}
	sub := func(name, kind string, verbs metav1.Verbs) {
		d.Subresources = append(d.Subresources, discovery.Subresource{Name: name, Kind: kind, Verbs: verbs})
	}
	if r.Binding {
		sub(resources.Binding, "Binding", metav1.Verbs{"create"})
	}
	if r.Def != nil && r.Def.HasSubresource(resources.Eviction) {
		d.Subresources = append(d.Subresources, discovery.Subresource{Name: resources.Eviction, Group: "policy", Version: "v1", Kind: "Eviction", Verbs: metav1.Verbs{"create"}})
	}
	if r.Def != nil && r.Def.HasSubresource(resources.Approval) {
		sub(resources.Approval, r.GVK.Kind, subVerbs)
	}
	if r.Def != nil && r.Def.HasSubresource(resources.Finalize) {
		sub(resources.Finalize, r.GVK.Kind, metav1.Verbs{"update"})
	}
	if r.Scale != nil {
		d.Subresources = append(d.Subresources, discovery.Subresource{Name: resources.Scale, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: subVerbs})
	}
	if r.HasStatus {
		sub(resources.Status, r.GVK.Kind, subVerbs)
	}
	if s.auth != nil && r.GVK == auth.ServiceAccountKind {
		d.Subresources = append(d.Subresources, discovery.Subresource{Name: "token",
			Group: auth.TokenRequestKind.Group, Version: auth.TokenRequestKind.Version, Kind: auth.TokenRequestKind.Kind, Verbs: metav1.Verbs{"create"}})
	}
	return d
}

// unknownResource is the answer to a path under gv that names no resource
// served: a NotFound Status under a built-in group version or the legacy
// /api, which kube-apiserver serves with its REST handlers (go-restful);
// Go's plain-text 404 under any other, which its REST handlers leave to
// the custom resource handler and that to its last handler.
func (s *Server) unknownResource(gv schema.GroupVersion) error {
	if gv.Group == "" {
		return notFoundPath()
	}
	for _, r := range s.reg.ByGV[gv.String()] {
		if !r.Custom {
			return notFoundPath()
		}
	}
	return errNoHandler
}
