package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdopenapi "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apiextensionsfeatures "k8s.io/apiextensions-apiserver/pkg/features"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The OpenAPI documents of kube-apiserver, made by kube-apiserver's own
// machinery: the schemas are Kubernetes' generated definitions
// (k8s.io/kubernetes/pkg/generated/openapi, with their descriptions, formats
// and x-kubernetes-* extensions), named by k8s.io/apiserver's
// DefinitionNamer; the paths and operations are those k8s.io/apiserver's
// endpoint installer registers for each resource (openapi_builtin.go),
// turned into documents by k8s.io/kube-openapi's builders and served by its
// handlers; custom resources are described by
// k8s.io/apiextensions-apiserver's builder and merged in as kube-apiserver
// merges those of CustomResourceDefinitions (its aggregator joins the v3
// indexes, apiextensions' MergeSpecs the v2 documents).

// OpenAPIResource is a built-in resource as the OpenAPI documents describe
// it.
type OpenAPIResource struct {
	GVK        schema.GroupVersionKind
	Plural     string
	Singular   string
	Namespaced bool
	// Verbs are the verbs discovery lists for the resource: all eight of a
	// stored resource, or all but deletecollection.
	Verbs []string
	// Subresources are among status, scale, binding, finalize and approval.
	Subresources []string
}

// OpenAPI serves /openapi/v2 and /openapi/v3 as kube-apiserver v1.37 does,
// for a set of built-in resources fixed at NewOpenAPI and custom resources
// published and withdrawn at run time. Nothing is built before the first
// request for a document; what is built is kept (the built-in documents
// for the life of the process, shared by every OpenAPI of the same version
// and resources) until the custom resources it depends on change. It is
// safe for concurrent use.
type OpenAPI struct {
	builtin  *builtinAPI
	builtinP sets.Set[string]

	// custom serves the v3 documents of the custom resources, v2 the v2
	// document (built-in and custom), as served by v2Handler.
	custom    *handler3.OpenAPIService
	v2        *handler.OpenAPIService
	v2Handler http.Handler

	mu sync.Mutex
	// crds are the custom resources published, by CRD name.
	crds map[string]*apiextensionsv1.CustomResourceDefinition
	// generation tells the lazily built documents apart (kube-openapi's
	// caches recompute what depends on a value whose etag changed).
	generation uint64
}

// NewOpenAPI returns the OpenAPI documents of a server of the given
// Kubernetes version (as /version states it, "v1.37.2") serving resources;
// it builds nothing. The documents' info.version is the version's major
// and minor ("1.37"), as kube-apiserver states its emulation version.
func NewOpenAPI(version string, resources []OpenAPIResource) *OpenAPI {
	return newOpenAPI(builtinFor(infoVersion(version), resources), resources)
}

// newOpenAPI returns the OpenAPI documents of a server serving resources,
// whose built-in documents are builtin's.
func newOpenAPI(builtin *builtinAPI, resources []OpenAPIResource) *OpenAPI {
	o := &OpenAPI{
		builtin:  builtin,
		builtinP: builtinV3Paths(resources),
		custom:   handler3.NewOpenAPIService(),
		crds:     map[string]*apiextensionsv1.CustomResourceDefinition{},
	}
	o.v2 = handler.NewOpenAPIServiceLazy(o.mergedV2Locked())
	o.v2.RegisterOpenAPIVersionedService("/openapi/v2", handlerOf(func(h http.Handler) { o.v2Handler = h }))
	return o
}

// handlerOf is a kube-openapi PathHandler that hands the handler
// registered to a function.
type handlerOf func(http.Handler)

func (f handlerOf) Handle(_ string, h http.Handler) { f(h) }

// infoVersion is "1.37" for "v1.37.2"; a version that does not parse is
// kept as it is.
func infoVersion(v string) string {
	parsed, err := utilversion.ParseGeneric(v)
	if err != nil {
		return v
	}
	return fmt.Sprintf("%d.%d", parsed.Major(), parsed.Minor())
}

// ServeHTTP answers GET /openapi/v2 (JSON, or protobuf when asked for),
// /openapi/v3 (the index of the documents with their hashes) and
// /openapi/v3/<path> ("api/v1", "apis/apps/v1", ...) with kube-openapi's
// handlers, building the documents asked for on the way; an unknown
// document is 404 with no body, as kube-apiserver answers.
func (o *OpenAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "/openapi/v2":
		if _, err := o.builtin.v2(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		o.v2Handler.ServeHTTP(w, r)
	case path == "/openapi/v3":
		o.serveV3Index(w, r)
	case strings.HasPrefix(path, "/openapi/v3/"):
		doc := strings.TrimPrefix(path, "/openapi/v3/")
		switch {
		case o.builtinP.Has(doc):
			b, err := o.builtin.v3()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			b.HandleGroupVersion(w, r)
		case o.hasCustom(doc):
			o.custom.HandleGroupVersion(w, r)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// serveV3Index answers /openapi/v3 with the documents of the built-in API
// and of the custom resources, joined as kube-apiserver's aggregator joins
// the indexes of the servers behind it.
func (o *OpenAPI) serveV3Index(w http.ResponseWriter, r *http.Request) {
	builtin, err := o.builtin.v3Index()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	custom, err := v3Index(r.Context(), o.custom)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	merged := handler3.OpenAPIV3Discovery{Paths: map[string]handler3.OpenAPIV3DiscoveryGroupVersion{}}
	for _, index := range []*handler3.OpenAPIV3Discovery{custom, builtin} {
		for p, entry := range index.Paths {
			merged.Paths[p] = entry // the built-in documents, last, win
		}
	}
	body, err := json.Marshal(merged)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	http.ServeContent(w, r, "/openapi/v3", time.Now(), bytes.NewReader(body))
}

// v3Index is the index a v3 service serves.
func v3Index(ctx context.Context, svc *handler3.OpenAPIService) (*handler3.OpenAPIV3Discovery, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/openapi/v3", nil)
	if err != nil {
		return nil, fmt.Errorf("kube: OpenAPI v3 index: %w", err)
	}
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	svc.HandleDiscovery(rec, req)
	if rec.code != http.StatusOK {
		return nil, fmt.Errorf("kube: OpenAPI v3 index: status %d", rec.code)
	}
	var index handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(rec.body.Bytes(), &index); err != nil {
		return nil, fmt.Errorf("kube: OpenAPI v3 index: %w", err)
	}
	return &index, nil
}

// recorder is an http.ResponseWriter in memory.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(code int)        { r.code = code }

// SetCustomResourceDefinition publishes the OpenAPI of the served versions
// of crd in /openapi/v2 and /openapi/v3 (its paths, operations and the
// schema of each version, spec.versions[].schema.openAPIV3Schema), as
// kube-apiserver publishes a CustomResourceDefinition's; it replaces what
// an earlier call published for a CRD of the same name. A schema that is
// not structural is published without its properties, as kube-apiserver
// does. The documents concerned are rebuilt on their next request. crd is
// copied; an empty listKind is taken as <kind>List.
//
// It fails, publishing nothing, when crd lacks its name, group, kind,
// plural or a served version, names a version twice, or serves a kind
// another CRD serves in the same group/version. A version whose
// group/version is a built-in one is left out of /openapi/v3, where the
// built-in document wins, as in kube-apiserver.
func (o *OpenAPI) SetCustomResourceDefinition(crd *apiextensionsv1.CustomResourceDefinition) error {
	if err := checkCRD(crd); err != nil {
		return err
	}
	crd = crd.DeepCopy()
	if crd.Spec.Names.ListKind == "" {
		// As kube-apiserver's defaulting of CustomResourceDefinitions.
		crd.Spec.Names.ListKind = crd.Spec.Names.Kind + "List"
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, other := range o.crds {
		if name == crd.Name || other.Spec.Group != crd.Spec.Group || other.Spec.Names.Kind != crd.Spec.Names.Kind {
			continue
		}
		for _, v := range servedVersions(other) {
			if slices.Contains(servedVersions(crd), v) {
				return fmt.Errorf("kube: OpenAPI of CustomResourceDefinition %s: kind %s of %s/%s is served by %s",
					crd.Name, crd.Spec.Names.Kind, crd.Spec.Group, v, name)
			}
		}
	}
	affected := gvPaths(o.crds[crd.Name])
	o.crds[crd.Name] = crd
	for p := range gvPaths(crd) {
		affected[p] = true
	}
	o.refreshLocked(affected)
	return nil
}

// RemoveCustomResourceDefinition withdraws what SetCustomResourceDefinition
// published for the CRD named name; an unknown name is ignored.
func (o *OpenAPI) RemoveCustomResourceDefinition(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	crd, ok := o.crds[name]
	if !ok {
		return
	}
	delete(o.crds, name)
	o.refreshLocked(gvPaths(crd))
}

func checkCRD(crd *apiextensionsv1.CustomResourceDefinition) error {
	if crd == nil {
		return errors.New("kube: OpenAPI of a CustomResourceDefinition: nil")
	}
	if crd.Name == "" || crd.Spec.Group == "" || crd.Spec.Names.Kind == "" || crd.Spec.Names.Plural == "" {
		return fmt.Errorf("kube: OpenAPI of CustomResourceDefinition %q: name, group, kind and plural are required", crd.Name)
	}
	if len(servedVersions(crd)) == 0 {
		return fmt.Errorf("kube: OpenAPI of CustomResourceDefinition %s: no served version", crd.Name)
	}
	seen := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		if v.Name == "" || seen[v.Name] {
			return fmt.Errorf("kube: OpenAPI of CustomResourceDefinition %s: version %q is unnamed or stated twice", crd.Name, v.Name)
		}
		seen[v.Name] = true
	}
	return nil
}

func servedVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			out = append(out, v.Name)
		}
	}
	return out
}

// gvPaths are the v3 document paths of crd's served versions; nil crd has
// none.
func gvPaths(crd *apiextensionsv1.CustomResourceDefinition) map[string]bool {
	out := map[string]bool{}
	if crd == nil {
		return out
	}
	for _, v := range servedVersions(crd) {
		out["apis/"+crd.Spec.Group+"/"+v] = true
	}
	return out
}

// hasCustom reports whether doc is the path of a custom resources' v3
// document.
func (o *OpenAPI) hasCustom(doc string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.customLocked(doc)) > 0
}

// customLocked returns the CRDs serving a version at the v3 document path
// gvPath, by name, unless a built-in document has that path.
func (o *OpenAPI) customLocked(gvPath string) []*apiextensionsv1.CustomResourceDefinition {
	if o.builtinP.Has(gvPath) {
		return nil
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range o.crds {
		if gvPaths(crd)[gvPath] {
			out = append(out, crd)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// refreshLocked replaces the documents at the given v3 paths and the v2
// document.
func (o *OpenAPI) refreshLocked(v3Paths map[string]bool) {
	for p := range v3Paths {
		o.refreshV3Locked(p)
	}
	o.v2.UpdateSpecLazy(o.mergedV2Locked())
}

// refreshV3Locked sets the v3 document at gvPath from the custom resources
// served there, lazily, or deletes it when there are none.
func (o *OpenAPI) refreshV3Locked(gvPath string) {
	crds := o.customLocked(gvPath)
	if len(crds) == 0 {
		o.custom.DeleteGroupVersion(gvPath)
		return
	}
	version := gvPath[strings.LastIndex(gvPath, "/")+1:]
	etag := o.nextETagLocked()
	o.custom.UpdateGroupVersionLazy(gvPath, cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
		specs := make([]*spec3.OpenAPI, 0, len(crds))
		for _, crd := range crds {
			s, err := crdopenapi.BuildOpenAPIV3(crd, version, crdopenapi.Options{V2: false, IncludeSelectableFields: selectableFields()})
			if err != nil {
				return nil, "", fmt.Errorf("kube: OpenAPI v3 of CustomResourceDefinition %s: %w", crd.Name, err)
			}
			specs = append(specs, s)
		}
		merged, err := crdopenapi.MergeSpecsV3(specs...)
		if err != nil {
			return nil, "", fmt.Errorf("kube: OpenAPI v3 of %s: %w", gvPath, err)
		}
		return merged, etag, nil
	})))
}

// mergedV2Locked is the v2 document of the built-in API and the custom
// resources published now, merged as kube-apiserver merges them
// (k8s.io/apiextensions-apiserver's MergeSpecs: built-in paths and
// definitions win), built on first use.
func (o *OpenAPI) mergedV2Locked() cached.Value[*spec.Swagger] {
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(o.crds))
	for _, crd := range o.crds {
		crds = append(crds, crd)
	}
	sort.Slice(crds, func(i, j int) bool { return crds[i].Name < crds[j].Name })
	etag := o.nextETagLocked()
	return cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		static, err := o.builtin.v2()
		if err != nil {
			return nil, "", err
		}
		var specs []*spec.Swagger
		for _, crd := range crds {
			for _, v := range servedVersions(crd) {
				s, err := crdopenapi.BuildOpenAPIV2(crd, v, crdopenapi.Options{V2: true, IncludeSelectableFields: selectableFields()})
				if err != nil {
					return nil, "", fmt.Errorf("kube: OpenAPI v2 of CustomResourceDefinition %s: %w", crd.Name, err)
				}
				s.Definitions = handler.PruneDefaults(s.Definitions)
				specs = append(specs, s)
			}
		}
		merged, err := crdopenapi.MergeSpecs(static, specs...)
		if err != nil {
			return nil, "", fmt.Errorf("kube: OpenAPI v2: %w", err)
		}
		return merged, etag, nil
	}))
}

// nextETagLocked returns a version of the documents not used before.
func (o *OpenAPI) nextETagLocked() string {
	o.generation++
	return strconv.FormatUint(o.generation, 10)
}

func selectableFields() bool {
	return utilfeature.DefaultFeatureGate.Enabled(apiextensionsfeatures.CustomResourceFieldSelectors)
}
