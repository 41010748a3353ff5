package apiserver

import (
	"net/http"

	"github.com/listwatch/listwatch/apiserver/internal/respond"
)

// WriteStatus writes err as a Kubernetes Status object with the HTTP code
// the Status carries: errors built with k8s.io/apimachinery/pkg/api/errors
// keep theirs, storage errors map to 404/409/410/504, and anything else is
// a 500 InternalError.
func WriteStatus(w http.ResponseWriter, err error) { respond.Status(w, err) }

// The shared writers under the names the handlers use (package respond).
var (
	errNoHandler      = respond.ErrNoHandler
	writeStatusObject = respond.StatusObject
	writeStatusCode   = respond.StatusCode
	statusOf          = respond.StatusOf
	newStatus         = respond.NewStatus
	notFoundPath      = respond.NotFound
	readBody          = respond.ReadBody
)

// methodNotAllowedPath is the 405 of a path that does not serve r's method.
func methodNotAllowedPath(*http.Request) error { return respond.MethodNotAllowed() }
