// Package filters holds the HTTP middleware in front of the API server's
// routes: authentication, request body and in-flight caps, panic recovery,
// request logging and metrics. Each filter answers the requests it rejects
// with a Kubernetes Status, as kube-apiserver does, so that clients see the
// errors they expect (401, 413, 429, 500).
package filters

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Defaults of kube-apiserver for the limits in Options.
const (
	// DefaultMaxRequestBodyBytes is kube-apiserver's cap on a request body.
	DefaultMaxRequestBodyBytes = 3 << 20
	// DefaultMaxRequestsInFlight is kube-apiserver's --max-requests-inflight.
	DefaultMaxRequestsInFlight = 400
	// DefaultMaxMutatingRequestsInFlight is kube-apiserver's
	// --max-mutating-requests-inflight.
	DefaultMaxMutatingRequestsInFlight = 200
	// DefaultRequestTimeout is kube-apiserver's --request-timeout.
	DefaultRequestTimeout = time.Minute
)

// Options configures Chain; the zero value authenticates nobody (no
// authentication), caps bodies at DefaultMaxRequestBodyBytes, does not cap
// in-flight requests, records no metrics and logs nothing.
type Options struct {
	// Authenticator checks bearer tokens; nil, with no ClientCA and no
	// Anonymous, turns authentication off and every request is served.
	Authenticator TokenAuthenticator
	// ClientCA authenticates client certificates it signed; nil: none.
	ClientCA *x509.CertPool
	// Anonymous serves requests without credentials as system:anonymous
	// for Authorizer to decide on (see Authentication).
	Anonymous bool
	// Authorizer decides every authenticated request, and impersonation
	// (Impersonate-* headers), as kube-apiserver's --authorization-mode;
	// nil authorizes everything and ignores the Impersonate-* headers.
	Authorizer authorizer.Authorizer
	// MaxRequestBodyBytes caps request bodies (413 above it); 0 means
	// DefaultMaxRequestBodyBytes, a negative value no cap.
	MaxRequestBodyBytes int64
	// MaxRequestsInFlight caps concurrent read-only requests and
	// MaxMutatingRequestsInFlight concurrent writes (429 above them); 0
	// means no cap. Watches are not counted.
	MaxRequestsInFlight         int
	MaxMutatingRequestsInFlight int
	// InFlightQueue, when its Length is set, makes requests over those
	// caps wait for a seat, as kube-apiserver's API Priority and Fairness
	// queues them, rather than be refused at once.
	InFlightQueue InFlightQueue
	// MaxRequestMemory bounds what the writes being served at once are
	// estimated to hold together (WithMemoryBudget): writes over it wait
	// for one another as InFlightQueue says, or, with no queue, are
	// refused. 0 means DefaultMaxRequestMemory, a negative value no bound.
	MaxRequestMemory int64
	// Metrics records request metrics; nil records none.
	Metrics *Metrics
	// Logger receives a debug record per request and an error per panic;
	// nil discards them.
	Logger *slog.Logger
	// RequestTimeout bounds every request but watches, the reading of its
	// body included (a body not received in time is a 408 and frees what
	// the request held; a request refused before its body is read, such as
	// a 401, is answered when the body has come or at the deadline, and its
	// connection then closed); 0 means DefaultRequestTimeout, a negative value
	// no bound. A request's timeout parameter may shorten it.
	RequestTimeout time.Duration
	// Shutdown, when it ends, cancels the contexts of long-running requests
	// (watches) so that a graceful http.Server.Shutdown, which waits for
	// active requests, does not wait for them forever. Nil: never.
	Shutdown context.Context
}

// Chain wraps h in every filter, outermost first: request info, metrics and
// logging (so that rejected requests are counted and logged too), panic
// recovery, authentication, impersonation and authorization (before the
// body is read, as in kube-apiserver), the request timeout, the body cap, the
// in-flight cap, the memory budget of writes and the cancellation of
// long-running requests on shutdown.
// The body is read before the request takes an in-flight slot, so that
// clients that announce a body and never send it hold none; and a body
// nobody reads (a request refused before it is read) is waited for no
// longer than the request timeout (WithBodyDeadline), so that every
// request is answered or its connection closed by then, authenticated or
// not.
func Chain(h http.Handler, o Options) http.Handler {
	timeout := o.RequestTimeout
	if timeout == 0 {
		timeout = DefaultRequestTimeout
	}
	if o.Shutdown != nil {
		h = WithLongRunningShutdown(h, o.Shutdown)
	}
	h = WithMemoryBudget(h, o.MaxRequestMemory, o.InFlightQueue)
	h = WithMaxInFlightQueue(h, o.MaxRequestsInFlight, o.MaxMutatingRequestsInFlight, o.InFlightQueue, o.Metrics)
	h = WithMaxRequestBody(h, o.MaxRequestBodyBytes)
	if timeout > 0 {
		h = WithRequestTimeout(h, timeout)
	}
	if o.Authorizer != nil {
		h = WithAuthorization(h, o.Authorizer)
	}
	if o.Authenticator != nil || o.ClientCA != nil || o.Anonymous {
		h = WithAuthentication(h, Authentication{Tokens: o.Authenticator, ClientCA: o.ClientCA, Anonymous: o.Anonymous})
	}
	h = WithPanicRecovery(h, o.Logger)
	h = WithInstrumentation(h, o.Metrics, o.Logger)
	if timeout > 0 {
		h = WithBodyDeadline(h, timeout)
	}
	return WithRequestInfo(h)
}
