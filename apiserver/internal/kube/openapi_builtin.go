package kube

import (
	"context"
	"fmt"
	policyv1 "k8s.io/api/policy/v1"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	restful "github.com/emicklei/go-restful/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/version"
	genericapi "k8s.io/apiserver/pkg/endpoints"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/routes"
	utilopenapi "k8s.io/apiserver/pkg/util/openapi"
	apiregistrationinstall "k8s.io/kube-aggregator/pkg/apis/apiregistration/install"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	openapiutil "k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/admission/install"
	_ "k8s.io/kubernetes/pkg/apis/imagepolicy/install"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"
)

// The documents of the built-in API: kube-apiserver's routes for the
// resources served (k8s.io/apiserver's endpoint installer over stand-in
// storage, openapi_stubs.go), turned into documents with Kubernetes'
// generated definitions by kube-apiserver's own calls (InstallV3, the v2
// builder and default pruning). They depend only on the version and the
// resources, so they are made once per process for each and shared by
// every server (tests start many).

// builtinAPI is the built-in API's documents, each made on first use.
type builtinAPI struct {
	// routes makes the go-restful web services the documents are made
	// from, anew for each build (about 45 ms): kept, they held 7.2 MiB of
	// live heap (their paths' compiled regular expressions mostly), a
	// sixth of the server's with 10,000 pods (hack/memory.sh, note of
	// issue 41), for builds that are rare.
	routes func() (*restful.Container, error)
	// v2 is the Swagger 2.0 document of the whole built-in API.
	v2 func() (*spec.Swagger, error)
	// v3 serves one document per web service, at the paths
	// builtinV3Paths states, built when asked for and kept a while
	// (heldV3).
	v3 func() (*handler3.OpenAPIService, error)
	// v3Index is the index of the v3 documents, made once and kept.
	v3Index func() (*handler3.OpenAPIV3Discovery, error)
	held    *heldV3 // what v3 serves from
}

// v3Hold is how long built v3 documents are kept after their last use.
const v3Hold = 10 * time.Second

// heldV3 keeps the built v3 documents for v3Hold after their last use.
// The index needs every document's hash, so it builds them all
// (InstallV3), and kube's MutatingAdmissionPolicy plugin reads the index
// every 5 seconds: kept for good, what the first index built held 18.3 MiB
// of live heap (a third of the server's with 10,000 pods, hack/memory.sh,
// note of issue 41), 5.7 MiB once the documents are let go and the index
// is kept on its own. Building them again takes about 0.1 s. A document's
// hash is that of its JSON, built the same way each time, so documents
// built again are served under the hashes the index gave
// (TestOpenAPIV3BuiltAgain).
type heldV3 struct {
	build func() (*handler3.OpenAPIService, error)

	mu    sync.Mutex
	svc   *handler3.OpenAPIService
	timer *time.Timer
}

// get returns the documents, built if they are not held, and holds them
// for v3Hold more.
func (h *heldV3) get() (*handler3.OpenAPIService, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.svc == nil {
		svc, err := h.build()
		if err != nil {
			return nil, err
		}
		h.svc = svc
	}
	if h.timer == nil {
		h.timer = time.AfterFunc(v3Hold, h.drop)
	} else {
		h.timer.Reset(v3Hold)
	}
	return h.svc, nil
}

// drop lets the documents go.
func (h *heldV3) drop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.svc = nil
}

var builtinAPIs = struct {
	sync.Mutex
	byKey map[string]*builtinAPI
}{byKey: map[string]*builtinAPI{}}

// builtinFor returns the built-in documents of a server of version (the
// documents' info.version) serving resources.
func builtinFor(version string, resources []OpenAPIResource) *builtinAPI {
	resources = slices.Clone(resources)
	sort.Slice(resources, func(i, j int) bool {
		return resources[i].GVK.String()+resources[i].Plural < resources[j].GVK.String()+resources[j].Plural
	})
	key := fmt.Sprintf("%s %+v", version, resources)
	builtinAPIs.Lock()
	defer builtinAPIs.Unlock()
	if b, ok := builtinAPIs.byKey[key]; ok {
		return b
	}
	b := newBuiltinAPI(version, resources)
	builtinAPIs.byKey[key] = b
	return b
}

// newBuiltinAPI returns the built-in documents of a server of version
// serving resources, not shared.
func newBuiltinAPI(version string, resources []OpenAPIResource) *builtinAPI {
	b := &builtinAPI{}
	b.routes = func() (*restful.Container, error) { return installRoutes(version, resources) }
	b.v2 = sync.OnceValues(func() (*spec.Swagger, error) {
		c, err := b.routes()
		if err != nil {
			return nil, err
		}
		buildMu.Lock()
		defer buildMu.Unlock()
		sw, err := builder.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(c.RegisteredWebServices()), v2Config(version))
		if err != nil {
			return nil, fmt.Errorf("kube: OpenAPI v2: %w", err)
		}
		sw.Definitions = handler.PruneDefaults(sw.Definitions)
		return sw, nil
	})
	held := &heldV3{build: func() (*handler3.OpenAPIService, error) {
		c, err := b.routes()
		if err != nil {
			return nil, err
		}
		buildMu.Lock()
		defer buildMu.Unlock()
		// InstallV3 wants a mux to register on; the service's handlers
		// are called directly.
		return routes.OpenAPI{V3Config: v3Config(version)}.InstallV3(c, mux.NewPathRecorderMux("openapi")), nil
	}}
	b.v3, b.held = held.get, held
	b.v3Index = sync.OnceValues(func() (*handler3.OpenAPIV3Discovery, error) {
		svc, err := held.get()
		if err != nil {
			return nil, err
		}
		return v3Index(context.Background(), svc)
	})
	return b
}

// builtinV3Paths are the paths of the v3 documents of resources, known
// without building them: /version, the discovery of /api and /apis, and
// of each group and group/version.
func builtinV3Paths(resources []OpenAPIResource) sets.Set[string] {
	paths := sets.New("version", "api", "apis")
	for _, r := range resources {
		if r.GVK.Group == "" {
			paths.Insert("api/" + r.GVK.Version)
		} else {
			paths.Insert("apis/"+r.GVK.Group, "apis/"+r.GVK.Group+"/"+r.GVK.Version)
		}
	}
	return paths
}

// buildMu serialises the builders: kube-openapi's builders write the
// extensions of the definitions they are given.
var buildMu sync.Mutex

// definitions are Kubernetes' generated definitions less what disabled
// features add, as kube-apiserver uses them.
var definitions = utilopenapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedopenapi.GetOpenAPIDefinitions)

// namer names definitions as kube-apiserver does (io.k8s.api.core.v1.Pod)
// and gives those of kinds their x-kubernetes-group-version-kind, from the
// same schemes: Kubernetes' (with the admission and imagepolicy groups,
// whose kinds no resource serves but which register DeleteOptions and
// WatchEvent too), apiextensions' (installed into it by crd.go) and the
// aggregator's.
var namer = sync.OnceValue(func() *openapinamer.DefinitionNamer {
	aggregator := runtime.NewScheme()
	apiregistrationinstall.Install(aggregator)
	return openapinamer.NewDefinitionNamer(legacyscheme.Scheme, aggregator)
})

// securityScheme is kube-apiserver's, for its bearer tokens.
const securityScheme = "BearerToken"

// v2Config is kube-apiserver's OpenAPI v2 configuration: the defaults of
// k8s.io/apiserver's server config, the title "Kubernetes", the bearer
// token security definition and its 401 response. Each build gets its own
// (the builder fills in some fields).
func v2Config(version string) *common.Config {
	return &common.Config{
		ProtocolList:    []string{"https"},
		IgnorePrefixes:  []string{},
		Info:            &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: version}},
		DefaultResponse: &spec.Response{ResponseProps: spec.ResponseProps{Description: "Default Response."}},
		//lint:ignore SA1019 kube-apiserver names operations through this hook; k8s.io/apiserver has no Route form of it.
		GetOperationIDAndTags: openapinamer.GetOperationIDAndTags,
		GetDefinitionName:     namer().GetDefinitionName,
		GetDefinitions:        definitions,
		SecurityDefinitions: &spec.SecurityDefinitions{securityScheme: &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
			Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
		}}},
		DefaultSecurity: []map[string][]string{{securityScheme: {}}},
		CommonResponses: map[int]spec.Response{http.StatusUnauthorized: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}}},
	}
}

// v3Config is v2Config's counterpart for OpenAPI v3, with the definitions
// made once for all the documents built from it.
func v3Config(version string) *common.OpenAPIV3Config {
	cfg := &common.OpenAPIV3Config{
		IgnorePrefixes:  []string{},
		Info:            &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: version}},
		DefaultResponse: &spec3.Response{ResponseProps: spec3.ResponseProps{Description: "Default Response."}},
		//lint:ignore SA1019 kube-apiserver names operations through this hook; k8s.io/apiserver has no Route form of it.
		GetOperationIDAndTags: openapinamer.GetOperationIDAndTags,
		GetDefinitionName:     namer().GetDefinitionName,
		GetDefinitions:        definitions,
		SecuritySchemes: spec3.SecuritySchemes{securityScheme: &spec3.SecurityScheme{SecuritySchemeProps: spec3.SecuritySchemeProps{
			Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
		}}},
		DefaultSecurity: []map[string][]string{{securityScheme: {}}},
		CommonResponses: map[int]*spec3.Response{http.StatusUnauthorized: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}}},
	}
	cfg.Definitions = definitions(func(name string) spec.Ref {
		defName, _ := cfg.GetDefinitionName(name)
		return spec.MustCreateRef("#/components/schemas/" + common.EscapeJsonPointer(defName))
	})
	return cfg
}

// OpenAPIModels returns the definitions of kinds and of every type they
// refer to, by definition name ("io.k8s.api.core.v1.Pod"), with references
// to #/components/schemas/: what kube-apiserver builds for its served kinds
// to give server-side apply their structure, and what
// managedfields.NewTypeConverter(models, false) takes. Each call builds
// anew (about as costly as one group's document); OpenAPIKinds lists the
// kinds of a set of resources.
func OpenAPIModels(kinds []schema.GroupVersionKind) (map[string]*spec.Schema, error) {
	names := make([]string, 0, len(kinds))
	for _, gvk := range kinds {
		obj, err := scheme.New(gvk)
		if err != nil {
			return nil, fmt.Errorf("kube: OpenAPI models: %w", err)
		}
		names = append(names, openapiutil.GetCanonicalTypeName(obj))
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	models, err := builder3.BuildOpenAPIDefinitionsForResources(v3Config(""), names...)
	if err != nil {
		return nil, fmt.Errorf("kube: OpenAPI models: %w", err)
	}
	return models, nil
}

// OpenAPIKinds returns the kinds the resources are served with, their
// lists', and those of their subresources (autoscaling/v1 Scale, v1
// Binding): the kinds to give OpenAPIModels for them.
func OpenAPIKinds(resources []OpenAPIResource) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	add := func(gvk schema.GroupVersionKind) {
		if !seen[gvk] {
			seen[gvk] = true
			out = append(out, gvk)
		}
	}
	for _, r := range resources {
		add(r.GVK)
		add(r.GVK.GroupVersion().WithKind(r.GVK.Kind + "List"))
		for _, sub := range r.Subresources {
			switch sub {
			case "scale":
				add(scaleKind)
			case "binding":
				add(bindingKind)
			case "eviction":
				add(evictionKind)
			}
		}
	}
	return out
}

var (
	scaleKind   = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	bindingKind = schema.GroupVersionKind{Version: "v1", Kind: "Binding"}
	// evictionKind is what pods/eviction takes (kube's EvictionREST
	// accepts policy/v1beta1 too).
	evictionKind = policyv1.SchemeGroupVersion.WithKind("Eviction")
)

// installRoutes registers the built-in API in a go-restful container as
// kube-apiserver does (k8s.io/apiserver's endpoint installer for each
// group/version, the discovery web services, /version), with stand-in
// storage that only states what each resource answers: the handlers are
// never called, the container is only read by the OpenAPI builders.
func installRoutes(kubeVersion string, resources []OpenAPIResource) (*restful.Container, error) {
	c := restful.NewContainer()
	c.ServeMux = http.NewServeMux()
	info := version.Info{GitVersion: kubeVersion}
	routes.Version{Version: &info}.Install(c)
	c.Add(discovery.NewLegacyRootAPIHandler(discovery.DefaultAddresses{}, legacyscheme.Codecs, "/api").WebService())
	c.Add(discovery.NewRootAPIsHandler(discovery.DefaultAddresses{}, legacyscheme.Codecs).WebService())

	byGV := map[schema.GroupVersion][]OpenAPIResource{}
	var gvs []schema.GroupVersion
	for _, r := range resources {
		gv := r.GVK.GroupVersion()
		if _, ok := byGV[gv]; !ok {
			gvs = append(gvs, gv)
		}
		byGV[gv] = append(byGV[gv], r)
	}
	sort.Slice(gvs, func(i, j int) bool { return gvs[i].String() < gvs[j].String() })
	groups := map[string][]metav1.GroupVersionForDiscovery{}
	var groupNames []string
	for _, gv := range gvs {
		if gv.Group == "" {
			continue
		}
		if _, ok := groups[gv.Group]; !ok {
			groupNames = append(groupNames, gv.Group)
		}
		groups[gv.Group] = append(groups[gv.Group], metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version})
	}
	for _, g := range groupNames {
		c.Add(discovery.NewAPIGroupHandler(legacyscheme.Codecs, metav1.APIGroup{
			Name: g, Versions: groups[g], PreferredVersion: groups[g][0],
		}).WebService())
	}

	equivalent := runtime.NewEquivalentResourceRegistry()
	for _, gv := range gvs {
		storage := map[string]rest.Storage{}
		for _, r := range byGV[gv] {
			if err := addStubs(storage, r); err != nil {
				return nil, err
			}
		}
		root := "/apis"
		if gv.Group == "" {
			root = "/api"
		}
		agv := &genericapi.APIGroupVersion{
			Root:                       root,
			GroupVersion:               gv,
			Storage:                    storage,
			ParameterCodec:             legacyscheme.ParameterCodec,
			Serializer:                 legacyscheme.Codecs,
			Typer:                      scheme,
			Creater:                    scheme,
			Convertor:                  scheme,
			ConvertabilityChecker:      scheme,
			Defaulter:                  scheme,
			UnsafeConvertor:            runtime.UnsafeObjectConvertor(scheme),
			TypeConverter:              managedfields.NewDeducedTypeConverter(),
			EquivalentResourceRegistry: equivalent,
		}
		if _, _, err := agv.InstallREST(c); err != nil {
			return nil, fmt.Errorf("kube: OpenAPI routes of %s: %w", gv, err)
		}
	}
	dropWatchPaths(c)
	return c, nil
}

// dropWatchPaths removes the routes under .../watch/..., deprecated since
// Kubernetes 1.11: kube-apiserver still serves and documents them, this
// server serves only the watch parameter of list.
func dropWatchPaths(c *restful.Container) {
	for _, ws := range c.RegisteredWebServices() {
		ws.SetDynamicRoutes(true) // allows RemoveRoute
		for _, r := range ws.Routes() {
			if strings.HasPrefix(strings.TrimPrefix(r.Path, ws.RootPath()), "/watch/") {
				_ = ws.RemoveRoute(r.Path, r.Method)
			}
		}
	}
}
