package apiserver

import (
	"net/http"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/resources"
)

// OpenAPI v2 (/openapi/v2) and v3 (/openapi/v3, an index of one document
// per API path with its hash, and /openapi/v3/<path>), as kube-apiserver
// v1.37 serves them. The documents are made by package kube with
// Kubernetes' own machinery: the generated definitions of the built-in
// types (descriptions, formats, x-kubernetes-group-version-kind,
// list types and map keys, patch strategies and merge keys), the paths and
// operations k8s.io/apiserver's endpoint installer makes for each resource
// this server serves, k8s.io/apiextensions-apiserver's builder for custom
// resources, and k8s.io/kube-openapi's handlers (JSON and protobuf, ETags,
// immutable caching of hashed URLs).
//
// kubectl reads them for `kubectl explain`, to decide whether a PATCH
// accepts fieldValidation (then it leaves validation to the server), for
// the merge keys of the strategic merge patches of `kubectl apply`, and
// (v2) for client-side validation of `kind: List` manifests.
//
// Nothing is built before the first request for a document: they are big
// (BenchmarkOpenAPIBuild in package kube measures them), and most clients
// never ask. The built-in API's documents, once built, are shared by every
// server of the process.

const openAPIPrefix = "/openapi/v3"

// openAPIState holds the server's OpenAPI documents, made on first use.
type openAPIState struct {
	once sync.Once
	docs *kube.OpenAPI
	err  error
}

// openAPIDocs returns the server's OpenAPI documents (built lazily
// themselves), with the custom resources the CRD controller published.
func (s *Server) openAPIDocs() (*kube.OpenAPI, error) {
	st := &s.openAPI
	st.once.Do(func() {
		// The reviews too: published, never stored (no list kind, no
		// field management of their own).
		docs := kube.NewOpenAPI(KubernetesVersion, append(openAPIResources(), reviewOpenAPIResources()...))
		for _, crd := range s.openAPICRDs() {
			if err := docs.SetCustomResourceDefinition(crd); err != nil {
				s.log.Warn("crd: OpenAPI", "crd", crd.Name, "err", err)
			}
		}
		st.docs = docs
	})
	return st.docs, st.err
}

// openAPIResources are the built-in resources as the OpenAPI documents
// state them.
func openAPIResources() []kube.OpenAPIResource {
	var out []kube.OpenAPIResource
	for _, def := range resources.Builtin.All() {
		out = append(out, kube.OpenAPIResource{
			GVK:          def.GVK,
			Plural:       def.Plural,
			Singular:     def.Singular,
			Namespaced:   def.Namespaced,
			Verbs:        def.DiscoveryVerbs(),
			Subresources: def.Subresources,
		})
	}
	return out
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
	docs, err := s.openAPIDocs()
	if err != nil {
		return err
	}
	return docs.SetCustomResourceDefinition(crd)
}

// RemoveCustomResourceOpenAPI withdraws from the OpenAPI documents what
// SetCustomResourceOpenAPI published for the CustomResourceDefinition named
// name (<plural>.<group>); an unknown name is ignored.
func (s *Server) RemoveCustomResourceOpenAPI(name string) {
	if docs, err := s.openAPIDocs(); err == nil {
		docs.RemoveCustomResourceDefinition(name)
	}
}

// serveOpenAPI answers /openapi/v3 and /openapi/v3/<path>.
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	s.serveOpenAPIDocs(w, r)
}

// serveOpenAPIDocs answers GET (and HEAD) of an OpenAPI path with kube's
// handlers.
func (s *Server) serveOpenAPIDocs(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		WriteStatus(w, methodNotAllowedPath(r))
		return
	}
	docs, err := s.openAPIDocs()
	if err != nil {
		WriteStatus(w, err)
		return
	}
	// kube-apiserver's default, which the handlers override for a URL
	// with its document's hash.
	w.Header().Set("Cache-Control", "no-cache, private")
	docs.ServeHTTP(w, r)
}
