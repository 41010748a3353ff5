package apiserver

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/listwatch/listwatch/apiserver/filters"
)

// The cost of authorization: a create and a small list through the
// filters `listwatch apiserver` puts in front of the routes, in-process,
// without authorization ("off"), as a system:masters user (the privileged
// group decides at once), and as a user whom RBAC allows through a
// RoleBinding (RBAC walks the cluster role bindings of the bootstrap
// policy and the namespace's role bindings); and one RBAC decision alone.

// authzBench is a server behind the filters and the tokens of its users.
type authzBench struct {
	srv     *Server
	handler map[string]http.Handler
	// pods counts the pods created, which -count runs of a sub-benchmark
	// share.
	pods int
}

func newAuthzBench(b *testing.B) *authzBench {
	srv, _, _ := benchServer(b)
	benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"default"}}`, 0)
	benchDo(b, srv, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
		`{"metadata":{"name":"bench"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"system:aggregate-to-edit"},
"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"editor"}]}`, http.StatusCreated)
	benchDo(b, srv, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
		`{"metadata":{"name":"bench-view"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"system:aggregate-to-view"},
"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"editor"}]}`, http.StatusCreated)
	tokens, err := filters.ParseTokenFile(bytes.NewReader([]byte("master,root,1,system:masters\neditor,editor,2\n")))
	if err != nil {
		b.Fatal(err)
	}
	return &authzBench{srv: srv, handler: map[string]http.Handler{
		"off":  filters.Chain(srv.Handler(), filters.Options{Authenticator: tokens}),
		"with": filters.Chain(srv.Handler(), filters.Options{Authenticator: tokens, Authorizer: srv.Authorizer()}),
	}}
}

// cases are the handler and token of each sub-benchmark.
var authzBenchCases = []struct{ name, handler, token string }{
	{"off", "off", "editor"},
	{"masters", "with", "master"},
	{"rbac", "with", "editor"},
}

func (a *authzBench) do(b *testing.B, handler, token, method, path, body string, code int) {
	req := httptest.NewRequest(method, path, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	a.handler[handler].ServeHTTP(rec, req)
	if rec.Code != code {
		b.Fatalf("%s %s: %d %s, want %d", method, path, rec.Code, rec.Body.Bytes(), code)
	}
}

// BenchmarkCreatePodAuthorized is BenchmarkCreatePod through the filters,
// without and with authorization.
func BenchmarkCreatePodAuthorized(b *testing.B) {
	a := newAuthzBench(b)
	for _, c := range authzBenchCases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a.pods++
				a.do(b, c.handler, c.token, http.MethodPost, "/api/v1/namespaces/default/pods", benchPod(a.pods), http.StatusCreated)
			}
		})
	}
}

// BenchmarkListAuthorized lists ten pods (limit=10, from the watch cache)
// through the filters, without and with authorization: a small request,
// in which a decision's share shows.
func BenchmarkListAuthorized(b *testing.B) {
	a := newAuthzBench(b)
	for i := range 10 {
		benchDo(b, a.srv, http.MethodPost, "/api/v1/namespaces/default/pods", benchPod(i), http.StatusCreated)
	}
	for _, c := range authzBenchCases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a.do(b, c.handler, c.token, http.MethodGet, "/api/v1/namespaces/default/pods?limit=10", "", http.StatusOK)
			}
		})
	}
}

// BenchmarkRBACDecision is one decision of the server's authorizer for a
// user that RBAC allows through a RoleBinding, and for one it denies.
func BenchmarkRBACDecision(b *testing.B) {
	a := newAuthzBench(b)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		ns   string
		want authorizer.Decision
	}{{"allowed", "default", authorizer.DecisionAllow}, {"denied", "kube-system", authorizer.DecisionNoOpinion}} {
		attrs := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "editor", Groups: []string{user.AllAuthenticated}},
			Verb: "create", Resource: "pods", Namespace: c.ns, APIVersion: "v1", ResourceRequest: true}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d, _, _ := a.srv.Authorizer().Authorize(ctx, attrs); d != c.want {
					b.Fatalf("decision %v, want %v", d, c.want)
				}
			}
		})
	}
}
