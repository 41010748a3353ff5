package filters

import (
	"context"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// RequestInfo is what a request's path and method say it does, parsed the
// way kube-apiserver does for its metrics and limits: it does not check
// that the resource exists.
type RequestInfo struct {
	// IsResourceRequest is true for /api/{version}/... and
	// /apis/{group}/{version}/... paths naming a resource; discovery and
	// other paths are non-resource requests.
	IsResourceRequest bool
	// Verb is the Kubernetes verb (get, list, watch, create, update, patch,
	// delete, deletecollection) for a resource request and the lower-case
	// HTTP method otherwise.
	Verb        string
	APIGroup    string
	APIVersion  string
	Namespace   string
	Resource    string
	Name        string
	Subresource string
	Path        string
}

// IsLongRunning reports whether the request may stay open indefinitely (a
// watch): such requests are not counted against the in-flight caps.
func (ri RequestInfo) IsLongRunning() bool { return ri.Verb == "watch" }

// IsReadOnly reports whether the request only reads.
func (ri RequestInfo) IsReadOnly() bool {
	switch ri.Verb {
	case "get", "list", "watch", "head", "options":
		return true
	}
	return false
}

type requestInfoKey struct{}

// RequestInfoFrom returns the RequestInfo WithRequestInfo stored in ctx.
func RequestInfoFrom(ctx context.Context) (RequestInfo, bool) {
	ri, ok := ctx.Value(requestInfoKey{}).(RequestInfo)
	return ri, ok
}

// WithRequestInfo parses each request and stores its RequestInfo in the
// request context for the filters after it.
func WithRequestInfo(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri, k := parseKubeRequestInfo(r)
		ctx := request.WithRequestInfo(context.WithValue(r.Context(), requestInfoKey{}, ri), k)
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// requestInfoOf returns the stored RequestInfo, parsing the request when no
// WithRequestInfo ran before (a filter used on its own).
func requestInfoOf(r *http.Request) RequestInfo {
	if ri, ok := RequestInfoFrom(r.Context()); ok {
		return ri
	}
	return ParseRequestInfo(r)
}

// kubeRequestInfo is kube-apiserver's own parser of request paths, with the
// prefixes it serves (/api without a group, /apis with one).
var kubeRequestInfo = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// ParseRequestInfo parses r's method, path and query with kube-apiserver's
// RequestInfoFactory, so that authorization sees the attributes
// kube-apiserver would give it (verb, subresource, name, namespace, and the
// non-resource path).
func ParseRequestInfo(r *http.Request) RequestInfo {
	ri, _ := parseKubeRequestInfo(r)
	return ri
}

// parseKubeRequestInfo returns both forms of r's info: ours and kube's (which
// kube's authorization and impersonation filters read from the context).
func parseKubeRequestInfo(r *http.Request) (RequestInfo, *request.RequestInfo) {
	k, err := kubeRequestInfo.NewRequestInfo(r)
	if err != nil {
		// NewRequestInfo fails only on a malformed query; the request is
		// then a non-resource one, as for kube-apiserver's filter, which
		// answers it with an error before anything else reads it.
		k = &request.RequestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	}
	return RequestInfo{
		IsResourceRequest: k.IsResourceRequest,
		Verb:              k.Verb,
		APIGroup:          k.APIGroup,
		APIVersion:        k.APIVersion,
		Namespace:         k.Namespace,
		Resource:          k.Resource,
		Name:              k.Name,
		Subresource:       k.Subresource,
		Path:              k.Path,
	}, k
}
