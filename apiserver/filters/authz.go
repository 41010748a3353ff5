package filters

import (
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	kubefilters "k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/filters/impersonation"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes/scheme"
)

// statusCodecs encode the Status objects kube's filters answer with.
var statusCodecs runtime.NegotiatedSerializer = serializer.NewCodecFactory(scheme.Scheme).WithoutConversion()

// WithAuthorization asks a about every request and answers those it does
// not allow with kube-apiserver's 403 Status (`pods is forbidden: User
// "alice" cannot list resource "pods" in API group "" in the namespace
// "default"`), after honouring the Impersonate-User, -Group, -Uid and
// -Extra-* headers when a allows the requestor to impersonate them. Both
// are kube-apiserver's own filters (k8s.io/apiserver's WithAuthorization,
// and WithConstrainedImpersonation, on by default since 1.36), reading the
// user WithAuthentication stored and the request info WithRequestInfo
// parsed; a request with neither (a filter used on its own) gets its
// request info parsed here, and is decided as system:anonymous.
func WithAuthorization(h http.Handler, a authorizer.Authorizer) http.Handler {
	h = kubefilters.WithAuthorization(h, a, statusCodecs)
	h = impersonation.WithConstrainedImpersonation(h, a, statusCodecs)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := request.UserFrom(r.Context()); !ok {
			// No authentication ran: the request is nobody's, and is
			// decided as an anonymous one (kube's authorizers expect a
			// user on every request).
			r = r.WithContext(WithUser(r.Context(), User{Name: AnonymousUser, Groups: []string{GroupUnauthenticated}}))
		}
		if _, ok := RequestInfoFrom(r.Context()); !ok {
			WithRequestInfo(h).ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}
