package auth

import (
	"context"
	"crypto"
	"net/http"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/listwatch/listwatch/apiserver/filters"
)

// Loopback is what this package reads through the server's client of
// itself.
type Loopback interface {
	// Client is the server's client of itself.
	Client() kubernetes.Interface
	// Informers is the informer factory over Client; New registers the
	// RBAC informers in it, and the server starts them.
	Informers() informers.SharedInformerFactory
	// Fresh returns once the informers have seen the writes the server
	// had stored when it was called (or ctx ends, or a bound passes).
	Fresh(ctx context.Context)
}

// Config is what New needs; Loopback and FieldManager are required.
type Config struct {
	Loopback Loopback
	// SigningKey signs the service account tokens issued and checks
	// those presented (an *ecdsa.PrivateKey or *rsa.PrivateKey); nil: a
	// key made by New, so that tokens do not outlive the server.
	SigningKey crypto.Signer
	// Issuer is the tokens' issuer and default audience; "" is
	// DefaultServiceAccountIssuer.
	Issuer string
	// Context is the server's lifetime, which bounds the lookups of the
	// token checks; nil is context.Background().
	Context context.Context
	// FieldManager is the field manager a create request names (its
	// fieldManager parameter, else its User-Agent), or the error that
	// answers invalid create options.
	FieldManager func(*http.Request) (string, error)
}

// Auth is one server's authorization, reviews and service account tokens.
type Auth struct {
	cfg Config
	// authorizer is the union of the privileged group and RBAC.
	authorizer authorizer.Authorizer
	// rules resolves what a user may do (SelfSubjectRulesReview).
	rules authorizer.RuleResolver
	// policies are kube's RBAC registries' escalation checks, by resource.
	policies map[schema.GroupResource]policyStorage
	// reviews are the review resources (reviews.go).
	reviews map[schema.GroupVersionResource]review
	// tokens issues and checks service account tokens.
	tokens *saTokens
	// others are the bearer tokens besides the service accounts' (the
	// filters' authenticator) that TokenReviews accept; nil until
	// SetTokenAuthenticator.
	others atomic.Pointer[filters.TokenAuthenticator]
}

// New builds the authorizer on cfg's loopback informers, before they
// start (so that the server's wait for them covers the RBAC informers),
// the reviews over it, and the service account tokens.
func New(cfg Config) (*Auth, error) {
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	a := &Auth{cfg: cfg}
	a.initAuthorizer()
	if err := a.initServiceAccountTokens(); err != nil {
		return nil, err
	}
	a.reviews = a.newReviews()
	return a, nil
}
