package apiserver

import (
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/resources"
)

// request is a parsed resource path.
type request struct {
	res       *resource
	namespace string
	name      string
	// sub is the subresource: "", "status", "scale", "binding" or
	// "eviction".
	sub string
	// dryRun: validate and answer as if written, but write nothing.
	dryRun bool
	// warn sends a warning to the client (a Warning header), as
	// kube-apiserver does with the warnings of its strategies; nil drops it.
	warn func(text string)
	// manage records the write in metadata.managedFields under a field
	// manager (managedfields.go); nil for the server's own writes, which
	// keep what is stored.
	manage *fieldManagement
	// internal: the write is one the server's storage makes as part of
	// another (an eviction's), which kube runs under no admission.
	internal bool
}

func (s *Server) routes() http.Handler {
	return http.HandlerFunc(s.serve)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if s.discovery.Serve(w, r, path) {
		return
	}
	var gv schema.GroupVersion
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		gv, rest = schema.GroupVersion{Version: parts[1]}, parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gv, rest = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		WriteStatus(w, errNoHandler)
		return
	}
	if !s.awaitCachesFor(r.Context()) {
		// kube-apiserver's answer while a watch cache initializes.
		WriteStatus(w, apierrors.NewTooManyRequests("storage is (re)initializing", 1))
		return
	}
	if s.serveReview(w, r, gv, rest) || s.serveTokenRequest(w, r, gv, rest) || s.serveBindings(w, r, gv, rest) {
		return
	}
	req, err := s.parseResourcePath(gv, rest)
	if err != nil {
		WriteStatus(w, err)
		return
	}
	s.serveResource(w, r, req)
}

// parseResourcePath resolves [namespaces/{ns}/]{plural}[/{name}[/{sub}]]
// the way kube-apiserver does: namespaces/{name}/status is the namespace's
// subresource, namespaces/{ns}/{plural} a resource in the namespace.
func (s *Server) parseResourcePath(gv schema.GroupVersion, p []string) (request, error) {
	var req request
	for _, seg := range p {
		if seg == "" {
			return req, notFoundPath()
		}
	}
	if p[0] == "namespaces" && len(p) >= 3 && p[2] != "status" && p[2] != "finalize" {
		req.namespace = p[1]
		p = p[2:]
	}
	res := s.reg.Lookup(gv, p[0])
	if res == nil {
		return req, s.unknownResource(gv)
	}
	if len(p) > 3 {
		return req, notFoundPath()
	}
	req.res = res
	if len(p) >= 2 {
		req.name = p[1]
	}
	if len(p) == 3 {
		req.sub = p[2]
		switch {
		case req.sub == "status" && res.HasStatus:
		case req.sub == "scale" && res.Scale != nil:
		case req.sub == "binding" && res.Binding:
		case req.sub == resources.Eviction && res.Def != nil && res.Def.HasSubresource(resources.Eviction):
		case (req.sub == resources.Finalize || req.sub == resources.Approval) && res.Def != nil && res.Def.HasSubresource(req.sub):
		case isKubeletSubresource(res.GR(), req.sub):
		case res.UnknownSubresourceNotFound():
			// The custom resource handler answers an unknown subresource
			// as a missing object.
			return req, apierrors.NewNotFound(res.GR(), req.name)
		default:
			return req, notFoundPath()
		}
	}
	if req.namespace != "" && !res.Namespaced {
		return req, notFoundPath()
	}
	return req, nil
}

func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, req request) {
	var err error
	req.warn = func(text string) { respond.Warning(w, text) }
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if req.dryRun, err = decode.DryRun(r); err != nil {
			WriteStatus(w, err)
			return
		}
	}
	if isKubeletSubresource(req.res.GR(), req.sub) {
		WriteStatus(w, s.handleKubelet(r, req))
		return
	}
	if req.sub == resources.Finalize && r.Method != http.MethodPut {
		// A namespace's finalize subresource only takes updates.
		WriteStatus(w, methodNotAllowed(r, req))
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case req.sub == "binding":
			err = methodNotAllowed(r, req)
		case req.sub == resources.Eviction:
			err = methodNotAllowedPath(r)
		case req.name != "":
			err = s.handleGet(w, r, req)
		case isWatch(r):
			err = s.handleWatch(w, r, req)
		default:
			err = s.handleList(w, r, req)
		}
	case http.MethodPost:
		switch {
		case req.sub == "binding":
			err = s.handleBinding(w, r, req)
		case req.sub == resources.Eviction:
			err = s.handleEviction(w, r, req)
		case req.name != "":
			err = methodNotAllowed(r, req)
		default:
			err = s.handleCreate(w, r, req)
		}
	case http.MethodPut:
		if req.sub == resources.Eviction {
			err = methodNotAllowedPath(r)
			break
		}
		if req.name == "" || req.sub == "binding" {
			err = methodNotAllowed(r, req)
			break
		}
		err = s.handleUpdate(w, r, req)
	case http.MethodPatch:
		if req.sub == resources.Eviction {
			err = methodNotAllowedPath(r)
			break
		}
		if req.name == "" || req.sub == "binding" {
			err = methodNotAllowed(r, req)
			break
		}
		err = s.handlePatch(w, r, req)
	case http.MethodDelete:
		if req.sub == resources.Eviction {
			err = methodNotAllowedPath(r)
			break
		}
		if req.name == "" || req.sub != "" {
			if req.name == "" && req.sub == "" && (req.res.Def == nil || slices.Contains(req.res.Def.DiscoveryVerbs(), "deletecollection")) {
				err = s.handleDeleteCollection(w, r, req)
				break
			}
			err = methodNotAllowed(r, req)
			break
		}
		err = s.handleDelete(w, r, req)
	default:
		err = methodNotAllowed(r, req)
	}
	if err != nil {
		s.log.Debug("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		WriteStatus(w, err)
	}
}

func methodNotAllowed(r *http.Request, req request) error {
	return apierrors.NewMethodNotSupported(req.res.GR(), strings.ToLower(r.Method))
}

func isWatch(r *http.Request) bool {
	v := r.URL.Query().Get("watch")
	return v == "true" || v == "1"
}
