package filters

import (
	"context"
	"net/http"
	"strings"
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
		ri := ParseRequestInfo(r)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, ri)))
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

// ParseRequestInfo parses r's method, path and watch parameter.
func ParseRequestInfo(r *http.Request) RequestInfo {
	ri := RequestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var group, version string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, version, parts = parts[1], parts[2], parts[3:]
	default:
		return ri
	}
	watchPrefix := false
	if parts[0] == "watch" {
		// The deprecated /api/v1/watch/... form of a watch.
		watchPrefix, parts = true, parts[1:]
		if len(parts) == 0 {
			return ri
		}
	}
	// namespaces/{ns}/{resource}... is a resource in a namespace, except for
	// the namespace's own subresources.
	if parts[0] == "namespaces" && len(parts) >= 2 {
		ri.Namespace = parts[1]
		if len(parts) >= 3 && parts[2] != "status" && parts[2] != "finalize" {
			parts = parts[2:]
		}
	}
	ri.IsResourceRequest = true
	ri.APIGroup, ri.APIVersion = group, version
	ri.Resource = parts[0]
	if len(parts) >= 2 {
		ri.Name = parts[1]
	}
	if len(parts) >= 3 {
		ri.Subresource = parts[2]
	}
	q := r.URL.Query().Get("watch")
	isWatch := watchPrefix || q == "true" || q == "1"
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case isWatch:
			ri.Verb = "watch"
		case ri.Name == "":
			ri.Verb = "list"
		default:
			ri.Verb = "get"
		}
	case http.MethodPost:
		ri.Verb = "create"
	case http.MethodPut:
		ri.Verb = "update"
	case http.MethodPatch:
		ri.Verb = "patch"
	case http.MethodDelete:
		if ri.Name == "" {
			ri.Verb = "deletecollection"
		} else {
			ri.Verb = "delete"
		}
	}
	return ri
}
