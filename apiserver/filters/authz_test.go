package filters

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/listwatch/listwatch/internal/pki"
)

// testAuthorizer allows alice to get and list pods in namespace "a", and
// admin (and only admin) to impersonate users and groups; it denies
// everything else with no opinion, as RBAC does.
var testAuthorizer = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	switch {
	case u == nil:
	case u.GetName() == "alice" && a.IsResourceRequest() && a.GetResource() == "pods" && a.GetNamespace() == "a" &&
		(a.GetVerb() == "get" || a.GetVerb() == "list"):
		return authorizer.DecisionAllow, "", nil
	case u.GetName() == "admin" && a.GetVerb() == "impersonate":
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
})

// TestAuthorization runs requests through authentication, impersonation
// and authorization with kube's filters: allowed requests reach the
// handler as their (impersonated) user, the others get kube-apiserver's
// 403 Status, worded by resource, scope and non-resource path.
func TestAuthorization(t *testing.T) {
	tf, err := ParseTokenFile(strings.NewReader("alice-token,alice,1\nadmin-token,admin,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := Chain(echo, Options{Authenticator: tf, Authorizer: testAuthorizer})
	tests := []struct {
		name, method, path, token string
		impersonate               http.Header
		wantCode                  int
		// wantBody is the echo of an allowed request; wantMessage and
		// wantDetails the 403's.
		wantBody, wantMessage string
		wantDetails           *metav1.StatusDetails
	}{
		{name: "allowed", method: "GET", path: "/api/v1/namespaces/a/pods/p", token: "alice-token", wantCode: 200,
			wantBody: `user=alice groups=system:authenticated auth="" body=0`},
		{name: "other namespace", method: "GET", path: "/api/v1/namespaces/b/pods", token: "alice-token", wantCode: 403,
			wantMessage: `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "b"`,
			wantDetails: &metav1.StatusDetails{Kind: "pods"}},
		{name: "named object and verb", method: "DELETE", path: "/api/v1/namespaces/a/pods/p", token: "alice-token", wantCode: 403,
			wantMessage: `pods "p" is forbidden: User "alice" cannot delete resource "pods" in API group "" in the namespace "a"`,
			wantDetails: &metav1.StatusDetails{Name: "p", Kind: "pods"}},
		{name: "subresource", method: "PUT", path: "/api/v1/namespaces/a/pods/p/status", token: "alice-token", wantCode: 403,
			wantMessage: `pods "p" is forbidden: User "alice" cannot update resource "pods/status" in API group "" in the namespace "a"`,
			wantDetails: &metav1.StatusDetails{Name: "p", Kind: "pods"}},
		{name: "cluster scope and group", method: "GET", path: "/apis/apps/v1/deployments", token: "alice-token", wantCode: 403,
			wantMessage: `deployments.apps is forbidden: User "alice" cannot list resource "deployments" in API group "apps" at the cluster scope`,
			wantDetails: &metav1.StatusDetails{Group: "apps", Kind: "deployments"}},
		{name: "watch", method: "GET", path: "/api/v1/namespaces/a/pods?watch=true", token: "alice-token", wantCode: 403,
			wantMessage: `pods is forbidden: User "alice" cannot watch resource "pods" in API group "" in the namespace "a"`,
			wantDetails: &metav1.StatusDetails{Kind: "pods"}},
		{name: "deletecollection", method: "DELETE", path: "/api/v1/namespaces/a/pods", token: "alice-token", wantCode: 403,
			wantMessage: `pods is forbidden: User "alice" cannot deletecollection resource "pods" in API group "" in the namespace "a"`,
			wantDetails: &metav1.StatusDetails{Kind: "pods"}},
		{name: "non-resource path", method: "GET", path: "/logs", token: "alice-token", wantCode: 403,
			wantMessage: `forbidden: User "alice" cannot get path "/logs"`, wantDetails: &metav1.StatusDetails{}},
		{name: "impersonated", method: "GET", path: "/api/v1/namespaces/a/pods", token: "admin-token",
			impersonate: http.Header{"Impersonate-User": {"alice"}}, wantCode: 200,
			wantBody: `user=alice groups=system:authenticated auth="" body=0`},
		{name: "impersonated user decided as itself", method: "GET", path: "/api/v1/namespaces/b/pods", token: "admin-token",
			impersonate: http.Header{"Impersonate-User": {"alice"}}, wantCode: 403,
			wantMessage: `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "b"`,
			wantDetails: &metav1.StatusDetails{Kind: "pods"}},
		{name: "impersonated groups", method: "GET", path: "/logs", token: "admin-token",
			impersonate: http.Header{"Impersonate-User": {"bob"}, "Impersonate-Group": {"g1", "g2"}}, wantCode: 403,
			wantMessage: `forbidden: User "bob" cannot get path "/logs"`, wantDetails: &metav1.StatusDetails{}},
		{name: "impersonation without the verb", method: "GET", path: "/api/v1/namespaces/a/pods", token: "alice-token",
			impersonate: http.Header{"Impersonate-User": {"admin"}}, wantCode: 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			req.Header.Set("Authorization", "Bearer "+tt.token)
			for k, v := range tt.impersonate {
				req.Header[k] = v
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if tt.wantCode == 200 {
				if rec.Code != 200 || rec.Body.String() != tt.wantBody {
					t.Errorf("got %d %q, want 200 %q", rec.Code, rec.Body.String(), tt.wantBody)
				}
				return
			}
			checkStatus(t, rec.Code, rec.Header(), rec.Body.Bytes(), 403, metav1.StatusReasonForbidden)
			if tt.wantMessage == "" {
				return
			}
			var st metav1.Status
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
				t.Fatal(err)
			}
			if st.Message != tt.wantMessage {
				t.Errorf("message %q\nwant    %q", st.Message, tt.wantMessage)
			}
			if st.Details == nil || !reflect.DeepEqual(*st.Details, *tt.wantDetails) {
				t.Errorf("details %+v, want %+v", st.Details, tt.wantDetails)
			}
		})
	}
}

// TestAnonymous: with Anonymous, a request without credentials is
// system:anonymous in system:unauthenticated on every path, for the
// authorizer to decide; a wrong token is still a 401.
func TestAnonymous(t *testing.T) {
	h := Chain(echo, Options{Anonymous: true, Authorizer: authorizer.AuthorizerFunc(
		func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			if a.GetPath() == "/version" || a.GetPath() == "/api/v1/namespaces" {
				return authorizer.DecisionAllow, "", nil
			}
			return authorizer.DecisionNoOpinion, "", nil
		})})
	tests := []struct {
		path, auth string
		wantCode   int
	}{
		{path: "/api/v1/namespaces", wantCode: 200},
		{path: "/version", wantCode: 200},
		{path: "/api/v1/pods", wantCode: 403},
		{path: "/api/v1/namespaces", auth: "Bearer nope", wantCode: 401},
	}
	for _, tt := range tests {
		t.Run(tt.path+tt.auth, func(t *testing.T) {
			req := httptest.NewRequest("GET", tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Fatalf("code %d, want %d: %s", rec.Code, tt.wantCode, rec.Body)
			}
			if tt.wantCode == 200 {
				if want := `user=system:anonymous groups=system:unauthenticated auth="" body=0`; rec.Body.String() != want {
					t.Errorf("got %q, want %q", rec.Body, want)
				}
			}
		})
	}
}

// TestAuthorizationWithoutAuthentication: the filter used on its own
// decides a request as system:anonymous.
func TestAuthorizationWithoutAuthentication(t *testing.T) {
	var seen string
	h := WithAuthorization(echo, authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		seen = a.GetUser().GetName() + " " + strings.Join(a.GetUser().GetGroups(), ",") + " " + a.GetVerb() + " " + a.GetResource()
		return authorizer.DecisionNoOpinion, "", nil
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/pods", nil))
	checkStatus(t, rec.Code, rec.Header(), rec.Body.Bytes(), 403, metav1.StatusReasonForbidden)
	if want := "system:anonymous system:unauthenticated list pods"; seen != want {
		t.Errorf("decided %q, want %q", seen, want)
	}
}

// TestClientCertificates serves TLS with a client CA: a certificate it
// signed authenticates its common name in its organizations; one another
// CA signed is a 401; none falls back to the token.
func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	serving, err := pki.EnsureServing(dir)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pki.CertPool(serving.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	good, err := pki.EnsureClient(dir, "carol", "carol", []string{"team-a", "system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	otherDir := t.TempDir()
	if _, err := pki.EnsureServing(otherDir); err != nil {
		t.Fatal(err)
	}
	stranger, err := pki.EnsureClient(otherDir, "mallory", "mallory", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(Chain(echo, Options{Authenticator: testTokens(t), ClientCA: pool}))
	hs.TLS = serving.TLSConfig()
	hs.TLS.ClientAuth = tls.RequestClientCert
	hs.StartTLS()
	defer hs.Close()

	get := func(t *testing.T, cert *pki.Client, token string) (int, string) {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
		defer tr.CloseIdleConnections()
		if cert != nil {
			pair, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			tr.TLSClientConfig.Certificates = []tls.Certificate{pair}
		}
		req, err := http.NewRequest("GET", hs.URL+"/api/v1/pods", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	tests := []struct {
		name     string
		cert     *pki.Client
		token    string
		wantCode int
		wantUser string
	}{
		{name: "signed by the CA", cert: good, wantCode: 200, wantUser: "user=carol groups=team-a,system:masters,system:authenticated"},
		{name: "certificate before token", cert: good, token: "good-token", wantCode: 200, wantUser: "user=carol "},
		{name: "signed by another CA", cert: stranger, wantCode: 401},
		{name: "no certificate, a token", token: "good-token", wantCode: 200, wantUser: "user=alice "},
		{name: "neither", wantCode: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(t, tt.cert, tt.token)
			if code != tt.wantCode || !strings.HasPrefix(body, tt.wantUser) {
				t.Errorf("got %d %q, want %d %q…", code, body, tt.wantCode, tt.wantUser)
			}
		})
	}
	// The certificate's key stays the owner's.
	info, err := os.Stat(filepath.Join(dir, "carol.key"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("client key: %v %v", info, err)
	}
}

// TestTokens tries each authenticator in order, skipping nil ones.
func TestTokens(t *testing.T) {
	first, err := ParseTokenFile(strings.NewReader("t1,alice,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := ParseTokenFile(strings.NewReader("t1,shadowed,9\nt2,bob,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	ts := Tokens{nil, first, second}
	for _, tt := range []struct{ token, want string }{{"t1", "alice"}, {"t2", "bob"}, {"t3", ""}} {
		u, ok := ts.AuthenticateToken(tt.token)
		if ok != (tt.want != "") || u.Name != tt.want {
			t.Errorf("%s: %+v %v, want %q", tt.token, u, ok, tt.want)
		}
	}
	if got := withGroup([]string{"a", GroupAuthenticated}, GroupAuthenticated); !slices.Equal(got, []string{"a", GroupAuthenticated}) {
		t.Errorf("withGroup added a second %s: %v", GroupAuthenticated, got)
	}
}
