package apiserver

import (
	"encoding/json"
	"net/http"
	"runtime"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/listwatch/listwatch/resources"
)

// The legacy discovery documents, in JSON; /api and /apis also answer
// aggregated discovery to clients that ask for it
// (discovery_aggregated.go).

// KubernetesVersion is the Kubernetes release whose API this server speaks
// (that of the k8s.io/api types it serves).
const KubernetesVersion = "v1.37.2"

func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request, doc func(*http.Request) (any, error)) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		WriteStatus(w, methodNotAllowedPath(r))
		return
	}
	v, err := doc(r)
	if err != nil {
		WriteStatus(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func methodNotAllowedPath(r *http.Request) error {
	return newStatus(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		"the server does not allow this method on the requested resource")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		WriteStatus(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

func (s *Server) versionInfo(*http.Request) (any, error) {
	return version.Info{
		Major:        "1",
		Minor:        "37",
		GitVersion:   KubernetesVersion,
		GitTreeState: "clean",
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
	}, nil
}

func (s *Server) apiVersions(r *http.Request) (any, error) {
	return &metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{
			ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host,
		}},
	}, nil
}

func (s *Server) group(name string) (metav1.APIGroup, bool) {
	versions := s.reg.GroupVersions(name)
	if s.isReviewGroup(name) {
		versions = []string{"v1"}
	}
	if len(versions) == 0 {
		return metav1.APIGroup{}, false
	}
	g := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: name}
	for _, v := range versions {
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{
			GroupVersion: schema.GroupVersion{Group: name, Version: v}.String(), Version: v,
		})
	}
	g.PreferredVersion = g.Versions[0]
	return g, true
}

func (s *Server) apiGroupList(*http.Request) (any, error) {
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	groups := s.builtinGroups()
	for _, name := range s.reg.AllGroups() {
		if !slices.Contains(groups, name) {
			groups = append(groups, name)
		}
	}
	for _, name := range groups {
		g, _ := s.group(name)
		g.TypeMeta = metav1.TypeMeta{}
		list.Groups = append(list.Groups, g)
	}
	return list, nil
}

func (s *Server) apiGroup(name string) (any, error) {
	g, ok := s.group(name)
	if !ok {
		return nil, errNoHandler
	}
	return &g, nil
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

var (
	collectionVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	subVerbs        = metav1.Verbs{"get", "patch", "update"}
)

func (s *Server) resourceList(gv schema.GroupVersion) (any, error) {
	if reviews := s.reviewAPIResources(gv); reviews != nil {
		return &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: gv.String(),
			APIResources: reviews,
		}, nil
	}
	if !s.reg.HasGroupVersion(gv.String()) {
		return nil, s.unknownResource(gv)
	}
	list := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv.String(),
		APIResources: []metav1.APIResource{},
	}
	if gv.Group == "" {
		// kube-apiserver's list of the legacy group's resources has no
		// apiVersion.
		list.APIVersion = ""
	}
	list.APIResources = s.discoveryResources(s.reg.Resources(gv.String()))
	return list, nil
}

// discoveryResources is the legacy discovery list of rs (sorted by
// plural), each followed by its subresources: those of its definition and,
// on a server that issues service account tokens, serviceaccounts/token
// (served by serveTokenRequest). Where pods are bound, the bindings
// resource (serveBindings) is listed in its place among them.
func (s *Server) discoveryResources(rs []*resource) []metav1.APIResource {
	out := []metav1.APIResource{}
	bindings := slices.ContainsFunc(rs, func(r *resource) bool { return r.Binding })
	for _, r := range rs {
		if bindings && r.Plural > bindingResource.Plural {
			out = append(out, metav1.APIResource{
				Name: bindingResource.Plural, SingularName: "binding", Namespaced: true,
				Kind: bindingResource.GVK.Kind, Verbs: metav1.Verbs{"create"},
			})
			bindings = false
		}
		verbs := collectionVerbs
		if r.Def != nil {
			verbs = r.Def.DiscoveryVerbs()
		} else if r.CR != nil {
			verbs = crdVerbs(r)
		}
		out = append(out, metav1.APIResource{
			Name:         r.Plural,
			SingularName: r.Singular,
			Namespaced:   r.Namespaced,
			Kind:         r.GVK.Kind,
			Verbs:        slices.Clone(verbs),
			ShortNames:   slices.Clone(r.ShortNames),
			Categories:   slices.Clone(r.Categories),
		})
		// Subresources in name order, as kube-apiserver lists them.
		sub := func(name, kind string, verbs metav1.Verbs) metav1.APIResource {
			return metav1.APIResource{Name: r.Plural + "/" + name, Namespaced: r.Namespaced, Kind: kind, Verbs: slices.Clone(verbs)}
		}
		if r.Binding {
			out = append(out, sub(resources.Binding, "Binding", metav1.Verbs{"create"}))
		}
		if r.Def != nil && r.Def.HasSubresource(resources.Approval) {
			out = append(out, sub(resources.Approval, r.GVK.Kind, subVerbs))
		}
		if r.Def != nil && r.Def.HasSubresource(resources.Finalize) {
			out = append(out, sub(resources.Finalize, r.GVK.Kind, metav1.Verbs{"update"}))
		}
		if r.Scale != nil {
			sc := sub(resources.Scale, "Scale", subVerbs)
			sc.Group, sc.Version = "autoscaling", "v1"
			out = append(out, sc)
		}
		if r.HasStatus {
			out = append(out, sub(resources.Status, r.GVK.Kind, subVerbs))
		}
		if s.saTokens != nil && r.GVK == serviceAccountKind {
			tr := sub("token", tokenRequestKind.Kind, metav1.Verbs{"create"})
			tr.Group, tr.Version = tokenRequestKind.Group, tokenRequestKind.Version
			out = append(out, tr)
		}
	}
	return out
}
