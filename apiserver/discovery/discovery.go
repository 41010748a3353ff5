package discovery

import (
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
)

// KubernetesVersion is the Kubernetes release whose API this server speaks
// (that of the k8s.io/api types it serves).
const KubernetesVersion = "v1.37.2"

// Resource is one resource as discovery lists it.
type Resource struct {
	GVK        schema.GroupVersionKind
	Plural     string
	Singular   string
	Namespaced bool
	Verbs      metav1.Verbs
	ShortNames []string
	Categories []string
	// Subresources are listed after the resource, in the order given
	// (kube-apiserver's is by name).
	Subresources []Subresource
	// Custom marks a resource served from a CustomResourceDefinition.
	Custom bool
}

// Subresource is one subresource of a Resource.
type Subresource struct {
	Name string
	// Group and Version are those of the kind it answers when they are
	// not the resource's (autoscaling/v1 for a scale), else "".
	Group, Version string
	Kind           string
	Verbs          metav1.Verbs
}

// Group is one API group and its versions, the preferred first.
type Group struct {
	Name     string
	Versions []string
	// Builtin marks a group that built-in resources (or the reviews)
	// serve, as opposed to custom resources alone.
	Builtin bool
}

// Config describes what the server serves; every func is called at each
// request that needs it, and must be safe for concurrent use.
type Config struct {
	// Log receives the errors a client does not see.
	Log *slog.Logger
	// Groups are the groups of /apis in kube-apiserver's order: the
	// built-in ones first, then those of custom resources by name.
	Groups func() []Group
	// Resources are the resources served under gv, sorted by plural, or
	// the error that answers a group version serving none.
	Resources func(gv schema.GroupVersion) ([]Resource, error)
	// Unstored are built-in resources that Groups and Resources do not
	// list: create-only, answered and never stored (the reviews). Their
	// groups that no other built-in resource serves are listed after
	// events.k8s.io, where kube-apiserver's group priorities put them,
	// in the order of their first resource here.
	Unstored []Resource
	// Custom returns the custom resources served now, and a comparable
	// value that is equal (==) between two calls exactly when they
	// return the same resources.
	Custom func() (any, []Resource)
	// OpenAPIResources are the built-in resources as the OpenAPI
	// documents publish them.
	OpenAPIResources func() []kube.OpenAPIResource
	// CRDs are the definitions served when the OpenAPI documents are
	// first made; the server publishes later changes with
	// SetCustomResourceOpenAPI and RemoveCustomResourceOpenAPI.
	CRDs func() []*apiextensionsv1.CustomResourceDefinition
}

// Discovery serves the discovery and OpenAPI documents of one server.
type Discovery struct {
	cfg        Config
	aggregated aggregatedState
	openAPI    openAPIState
}

// New returns the documents cfg describes; nothing is built before a
// request asks for it.
func New(cfg Config) *Discovery {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Discovery{cfg: cfg}
}

// Serve answers path (the request's, without a trailing slash) and
// reports true when it is one of this package's; it does nothing and
// reports false for any other.
func (d *Discovery) Serve(w http.ResponseWriter, r *http.Request, path string) bool {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case path == "/openapi/v2", path == openAPIPrefix || strings.HasPrefix(path, openAPIPrefix+"/"):
		d.serveOpenAPI(w, r)
	case path == "/version":
		serveDocument(w, r, versionInfo)
	case path == "/api":
		d.serveRoot(w, r, true)
	case path == "/apis":
		d.serveRoot(w, r, false)
	case len(parts) == 2 && parts[0] == "api":
		serveDocument(w, r, func(*http.Request) (any, error) { return d.resourceList(schema.GroupVersion{Version: parts[1]}) })
	case len(parts) == 2 && parts[0] == "apis":
		serveDocument(w, r, func(*http.Request) (any, error) { return d.apiGroup(parts[1]) })
	case len(parts) == 3 && parts[0] == "apis":
		serveDocument(w, r, func(*http.Request) (any, error) {
			return d.resourceList(schema.GroupVersion{Group: parts[1], Version: parts[2]})
		})
	default:
		return false
	}
	return true
}

// serveDocument answers GET (and HEAD) with the JSON document doc makes.
func serveDocument(w http.ResponseWriter, r *http.Request, doc func(*http.Request) (any, error)) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		respond.Status(w, respond.MethodNotAllowed())
		return
	}
	v, err := doc(r)
	if err != nil {
		respond.Status(w, err)
		return
	}
	respond.JSON(w, http.StatusOK, v)
}

func versionInfo(*http.Request) (any, error) {
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

// The legacy discovery documents, in JSON; /api and /apis also answer
// aggregated discovery to clients that ask for it (aggregated.go).

func apiVersions(r *http.Request) (any, error) {
	return &metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{
			ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host,
		}},
	}, nil
}

// group is the legacy document of g.
func group(g Group) metav1.APIGroup {
	out := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: g.Name}
	for _, v := range g.Versions {
		out.Versions = append(out.Versions, metav1.GroupVersionForDiscovery{
			GroupVersion: schema.GroupVersion{Group: g.Name, Version: v}.String(), Version: v,
		})
	}
	out.PreferredVersion = out.Versions[0]
	return out
}

// unstoredGroupsAfter is the group kube-apiserver lists the groups of the
// unstored resources after.
const unstoredGroupsAfter = "events.k8s.io"

// groups are Config.Groups with those of the unstored resources that no
// other built-in resource serves.
func (d *Discovery) groups() []Group {
	groups := d.cfg.Groups()
	builtin := 0
	for builtin < len(groups) && groups[builtin].Builtin {
		builtin++
	}
	var add []Group
	for _, r := range d.cfg.Unstored {
		name := r.GVK.Group
		if slices.ContainsFunc(groups[:builtin], func(g Group) bool { return g.Name == name }) {
			continue
		}
		i := slices.IndexFunc(add, func(g Group) bool { return g.Name == name })
		if i < 0 {
			add = append(add, Group{Name: name, Builtin: true})
			i = len(add) - 1
		}
		if !slices.Contains(add[i].Versions, r.GVK.Version) {
			add[i].Versions = append(add[i].Versions, r.GVK.Version)
		}
	}
	at := 0
	if i := slices.IndexFunc(groups[:builtin], func(g Group) bool { return g.Name == unstoredGroupsAfter }); i >= 0 {
		at = i + 1
	}
	// A group of custom resources alone gives way to the built-in one.
	groups = slices.DeleteFunc(groups, func(g Group) bool {
		return !g.Builtin && slices.ContainsFunc(add, func(a Group) bool { return a.Name == g.Name })
	})
	return slices.Insert(groups, at, add...)
}

// resources are the resources served under gv: the unstored ones of a
// group only they serve, else Config.Resources'.
func (d *Discovery) resources(gv schema.GroupVersion) ([]Resource, error) {
	if len(d.cfg.Unstored) > 0 && !slices.ContainsFunc(d.cfg.Groups(), func(g Group) bool { return g.Builtin && g.Name == gv.Group }) {
		var out []Resource
		for _, r := range d.cfg.Unstored {
			if r.GVK.GroupVersion() == gv {
				out = append(out, r)
			}
		}
		if out != nil {
			slices.SortFunc(out, byPlural)
			return out, nil
		}
	}
	return d.cfg.Resources(gv)
}

// byPlural orders resources by their plural.
func byPlural(a, b Resource) int { return strings.Compare(a.Plural, b.Plural) }

func (d *Discovery) apiGroupList(*http.Request) (any, error) {
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range d.groups() {
		if len(g.Versions) == 0 {
			continue
		}
		doc := group(g)
		doc.TypeMeta = metav1.TypeMeta{}
		list.Groups = append(list.Groups, doc)
	}
	return list, nil
}

func (d *Discovery) apiGroup(name string) (any, error) {
	for _, g := range d.groups() {
		if g.Name == name && len(g.Versions) > 0 {
			doc := group(g)
			return &doc, nil
		}
	}
	return nil, respond.ErrNoHandler
}

func (d *Discovery) resourceList(gv schema.GroupVersion) (any, error) {
	rs, err := d.resources(gv)
	if err != nil {
		return nil, err
	}
	list := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv.String(),
		APIResources: legacyResources(rs),
	}
	if gv.Group == "" {
		// kube-apiserver's list of the legacy group's resources has no
		// apiVersion.
		list.APIVersion = ""
	}
	return list, nil
}

// legacyResources is the legacy discovery list of rs, each followed by
// its subresources.
func legacyResources(rs []Resource) []metav1.APIResource {
	out := []metav1.APIResource{}
	for _, r := range rs {
		out = append(out, metav1.APIResource{
			Name:         r.Plural,
			SingularName: r.Singular,
			Namespaced:   r.Namespaced,
			Kind:         r.GVK.Kind,
			Verbs:        slices.Clone(r.Verbs),
			ShortNames:   slices.Clone(r.ShortNames),
			Categories:   slices.Clone(r.Categories),
		})
		for _, sub := range r.Subresources {
			out = append(out, metav1.APIResource{
				Name: r.Plural + "/" + sub.Name, Namespaced: r.Namespaced,
				Group: sub.Group, Version: sub.Version, Kind: sub.Kind, Verbs: slices.Clone(sub.Verbs),
			})
		}
	}
	return out
}

// CustomResourceVerbs are the verbs apiextensions-apiserver lists for a
// custom resource, in its order: fewer while its definition is
// terminating.
func CustomResourceVerbs(terminating bool) metav1.Verbs {
	if terminating {
		return metav1.Verbs{"delete", "deletecollection", "get", "list", "watch"}
	}
	return metav1.Verbs{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}
}
