package apiserver

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/listwatch/listwatch/apiserver/auth"
	"github.com/listwatch/listwatch/apiserver/filters"
)

// The server's side of package auth: what it reads through the loopback
// client, and the server's methods that hand its work on.

// DefaultServiceAccountIssuer is kube-apiserver's issuer in a kubeadm
// cluster (--service-account-issuer), and the tokens' default audience.
const DefaultServiceAccountIssuer = auth.DefaultServiceAccountIssuer

// authLoopback is the server's loopback client as package auth reads it.
type authLoopback struct{ s *Server }

func (l authLoopback) Client() kubernetes.Interface               { return l.s.self.client }
func (l authLoopback) Informers() informers.SharedInformerFactory { return l.s.self.informers }
func (l authLoopback) Fresh(ctx context.Context)                  { l.s.fresh(ctx) }

// initAuth builds the authorizer, the reviews and the service account
// tokens; New calls it after initSelf and before the informers start, so
// that the informer start-up task waits for the RBAC informers too.
func (s *Server) initAuth() error {
	a, err := auth.New(auth.Config{
		Loopback:     authLoopback{s},
		SigningKey:   s.cfg.ServiceAccountSigningKey,
		Issuer:       s.cfg.ServiceAccountIssuer,
		Context:      s.ctx,
		FieldManager: createFieldManager,
	})
	if err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	s.auth = a
	return nil
}

// createFieldManager is the field manager of a create request.
func createFieldManager(r *http.Request) (string, error) {
	fm, _, err := writeOptions(r, "create", "")
	if err != nil {
		return "", err
	}
	return fm.manager, nil
}

// Authorizer is the server's authorizer, for the filters in front of it
// (filters.Options.Authorizer): kube-apiserver's for a kubeadm cluster
// without the Node authorizer (package auth).
func (s *Server) Authorizer() authorizer.Authorizer { return s.auth.Authorizer() }

// ServiceAccountTokens authenticates the service account tokens the server
// issued, for the filters (filters.Options.Authenticator, with a token
// file: filters.Tokens).
func (s *Server) ServiceAccountTokens() filters.TokenAuthenticator {
	return s.auth.ServiceAccountTokens()
}

// SetTokenAuthenticator gives the TokenReviews the bearer tokens the
// filters in front of the server accept besides its service account
// tokens (filters.Options.Authenticator): a TokenReview of a token the
// server would accept says who it is. Without it only service account
// tokens are reviewed as authenticated.
func (s *Server) SetTokenAuthenticator(a filters.TokenAuthenticator) {
	s.auth.SetTokenAuthenticator(a)
}

// escalationCheck is package auth's check of a role or binding written,
// nil for other resources.
func (s *Server) escalationCheck(gr schema.GroupResource) func(ctx context.Context, obj, old runtime.Object) error {
	if s.auth == nil {
		return nil
	}
	return s.auth.EscalationCheck(gr)
}

// serveReview and serveTokenRequest answer the paths of package auth
// (true), or do nothing (false) for any other.
func (s *Server) serveReview(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion, rest []string) bool {
	return s.auth != nil && s.auth.ServeReview(w, r, gv, rest)
}

func (s *Server) serveTokenRequest(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion, rest []string) bool {
	return s.auth != nil && s.auth.ServeTokenRequest(w, r, gv, rest)
}
