package discovery

import (
	"net/http"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
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
// OpenAPI v2 is what kubectl falls back to, and what its client-side
// validation reads: with --validate=strict, a manifest of `kind: List`
// (the output of `kubectl get -o yaml`) is checked against these
// definitions rather than by the server. It is one Swagger 2.0 document
// of the whole API (the built-in one merged with the custom resources' as
// kube-apiserver merges them), served as JSON, or in protobuf when asked
// for by either of its names
// (application/com.github.proto-openapi.spec.v2@v1.0+protobuf or
// ...spec.v2.v1.0+protobuf).
//
// Nothing is built before the first request for a document: they are big
// (BenchmarkOpenAPIBuild in package kube measures them), and most clients
// never ask. The built-in API's documents, once built, are shared by every
// server of the process.

const openAPIPrefix = "/openapi/v3"

// openAPIState holds the OpenAPI documents, made on first use.
type openAPIState struct {
	once sync.Once
	docs *kube.OpenAPI
}

// openAPIDocs returns the OpenAPI documents (built lazily themselves),
// with the custom resources served when they were first asked for.
func (d *Discovery) openAPIDocs() *kube.OpenAPI {
	st := &d.openAPI
	st.once.Do(func() {
		docs := kube.NewOpenAPI(KubernetesVersion, d.cfg.OpenAPIResources())
		for _, crd := range d.cfg.CRDs() {
			if err := docs.SetCustomResourceDefinition(crd); err != nil {
				d.cfg.Log.Warn("crd: OpenAPI", "crd", crd.Name, "err", err)
			}
		}
		st.docs = docs
	})
	return st.docs
}

// SetCustomResourceOpenAPI publishes crd in the OpenAPI documents as
// kube-apiserver publishes an established CustomResourceDefinition; see
// apiserver.Server.SetCustomResourceOpenAPI for the contract.
func (d *Discovery) SetCustomResourceOpenAPI(crd *apiextensionsv1.CustomResourceDefinition) error {
	return d.openAPIDocs().SetCustomResourceDefinition(crd)
}

// RemoveCustomResourceOpenAPI withdraws what SetCustomResourceOpenAPI
// published for the definition named name; an unknown name is ignored.
func (d *Discovery) RemoveCustomResourceOpenAPI(name string) {
	d.openAPIDocs().RemoveCustomResourceDefinition(name)
}

// serveOpenAPI answers GET (and HEAD) of an OpenAPI path with kube's
// handlers.
func (d *Discovery) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		respond.Status(w, respond.MethodNotAllowed())
		return
	}
	docs := d.openAPIDocs()
	// kube-apiserver's default, which the handlers override for a URL
	// with its document's hash.
	w.Header().Set("Cache-Control", "no-cache, private")
	docs.ServeHTTP(w, r)
}
