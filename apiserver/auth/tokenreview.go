package auth

import (
	"context"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/listwatch/listwatch/apiserver/filters"
)

// TokenReviews (authentication.k8s.io/v1 tokenreviews) are answered by
// kube-apiserver's own REST storage (pkg/registry/authentication/
// tokenreview) over an authenticator assembled as kube-apiserver's: the
// service account tokens' JWT authenticator, which checks the audiences
// the review asks for, then the server's other bearer tokens (the token
// file, the admin token), which know no audience and are wrapped as kube
// wraps its token file (authenticator.WrapAudienceAgnosticToken: valid
// for the API's audiences only), every user put in system:authenticated.
// Client certificates play no part: a TokenReview carries a token alone.

// SetTokenAuthenticator gives the TokenReviews the bearer tokens the
// filters in front of the server accept besides its service account
// tokens (filters.Options.Authenticator): a TokenReview of a token the
// server would accept says who it is. Without it only service account
// tokens are reviewed as authenticated.
func (a *Auth) SetTokenAuthenticator(t filters.TokenAuthenticator) {
	if t == nil {
		a.others.Store(nil)
		return
	}
	a.others.Store(&t)
}

// tokenReviewRequest is the authenticator.Request kube's TokenReview
// storage calls.
func (a *Auth) tokenReviewRequest() authenticator.Request {
	others := authenticator.TokenFunc(func(_ context.Context, tok string) (*authenticator.Response, bool, error) {
		p := a.others.Load()
		if p == nil {
			return nil, false, nil
		}
		u, ok := (*p).AuthenticateToken(tok)
		if !ok {
			return nil, false, nil
		}
		return &authenticator.Response{User: &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}}, true, nil
	})
	// One bearer token reader over the union of the token
	// authenticators, as kube-apiserver's: an unknown token is "invalid
	// bearer token", once.
	return group.NewAuthenticatedGroupAdder(bearertoken.New(tokenunion.New(
		a.tokens.authn, authenticator.WrapAudienceAgnosticToken(a.tokens.audiences, others),
	)))
}
