package filters

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// Groups kube-apiserver adds to every request's user.
const (
	GroupAuthenticated   = "system:authenticated"
	GroupUnauthenticated = "system:unauthenticated"
	AnonymousUser        = "system:anonymous"
)

// User is the identity a request was authenticated as.
type User struct {
	Name   string
	UID    string
	Groups []string
	// Extra is what the authenticator adds (a service account token's pod
	// and credential id, a certificate's fingerprint); nil for none.
	Extra map[string][]string
}

// info is u as kube's user.Info, which kube's filters and authorizers read.
func (u User) info() *user.DefaultInfo {
	return &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
}

// userOf is the User of kube's user.Info.
func userOf(i user.Info) User {
	return User{Name: i.GetName(), UID: i.GetUID(), Groups: i.GetGroups(), Extra: i.GetExtra()}
}

// Tokens tries each authenticator in turn: a token is the user of the first
// that knows it (a static token file, then service account tokens).
type Tokens []TokenAuthenticator

// AuthenticateToken implements TokenAuthenticator.
func (ts Tokens) AuthenticateToken(token string) (User, bool) {
	for _, t := range ts {
		if t == nil {
			continue
		}
		if u, ok := t.AuthenticateToken(token); ok {
			return u, true
		}
	}
	return User{}, false
}

// Authentication says how WithAuthentication identifies a request's user.
// The zero value knows nobody: every request but the public reads is 401.
type Authentication struct {
	// Tokens checks bearer tokens; nil accepts none.
	Tokens TokenAuthenticator
	// ClientCA, when set, authenticates TLS client certificates it signed
	// (for client authentication), as kube-apiserver's --client-ca-file:
	// the subject's common name is the user, its organizations the groups.
	ClientCA *x509.CertPool
	// Anonymous serves requests without credentials as system:anonymous in
	// system:unauthenticated on every path (kube-apiserver's
	// --anonymous-auth), for the authorizer to decide on. When false such
	// requests are 401 except the public reads (health checks, /version).
	Anonymous bool
}

// TokenAuthenticator maps a bearer token to its user.
type TokenAuthenticator interface {
	// AuthenticateToken returns the token's user and true, or false when the
	// token is unknown.
	AuthenticateToken(token string) (User, bool)
}

// TokenFile is a fixed set of tokens: kube-apiserver's --token-auth-file.
// The zero value knows no token.
type TokenFile struct {
	// Tokens are keyed by their SHA-256 so that a lookup's timing does not
	// depend on how much of a guessed token matches a real one.
	users map[[sha256.Size]byte]User
}

// AuthenticateToken implements TokenAuthenticator.
func (f *TokenFile) AuthenticateToken(token string) (User, bool) {
	u, ok := f.users[sha256.Sum256([]byte(token))]
	return u, ok
}

// Add registers token for user (programmatic users such as the one
// `listwatch up` generates); a token already present is an error.
func (f *TokenFile) Add(token string, u User) error {
	if token == "" || u.Name == "" {
		return errors.New("token file: empty token or user name")
	}
	if f.users == nil {
		f.users = make(map[[sha256.Size]byte]User)
	}
	sum := sha256.Sum256([]byte(token))
	if _, dup := f.users[sum]; dup {
		return fmt.Errorf("token file: duplicate token for user %q", u.Name)
	}
	f.users[sum] = u
	return nil
}

// LoadTokenFile reads a static token file; see ParseTokenFile.
func LoadTokenFile(path string) (*TokenFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	tf, err := ParseTokenFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tf, nil
}

// ParseTokenFile parses kube-apiserver's static token file format: CSV
// lines of token,user,uid and an optional quoted, comma-separated list of
// groups, e.g. `abc123,alice,1001,"dev,ops"`. Blank lines are skipped; a
// line with fewer than three fields, an empty token or user, or a token seen
// before is an error.
func ParseTokenFile(r io.Reader) (*TokenFile, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	tf := &TokenFile{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return tf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) < 3 {
			return nil, fmt.Errorf("token file: line %d: want token,user,uid[,groups], got %d fields", line, len(rec))
		}
		u := User{Name: strings.TrimSpace(rec[1]), UID: strings.TrimSpace(rec[2])}
		if len(rec) >= 4 {
			for g := range strings.SplitSeq(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		if err := tf.Add(strings.TrimSpace(rec[0]), u); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
	}
}

// UserFrom returns the user of the request: the one WithAuthentication
// stored in ctx, or the one impersonated (WithImpersonation).
func UserFrom(ctx context.Context) (User, bool) {
	i, ok := request.UserFrom(ctx)
	if !ok || i == nil {
		return User{}, false
	}
	return userOf(i), true
}

// WithUser returns ctx carrying u as the request's user, where UserFrom and
// kube's filters and authorizers find it.
func WithUser(ctx context.Context, u User) context.Context {
	return request.WithUser(ctx, u.info())
}

// isPublicPath reports whether path may be read without credentials. These
// are the paths kube-apiserver's default RBAC grants to everyone
// (system:public-info-viewer): health checks and /version, which clients
// and load balancers probe before they hold a token. Everything else,
// discovery and /metrics included, needs a valid token.
func isPublicPath(path string) bool {
	switch path {
	case "/healthz", "/livez", "/readyz", "/version", "/version/":
		return true
	}
	for _, p := range []string{"/healthz/", "/livez/", "/readyz/"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// WithAuthentication serves requests whose credentials auth knows, with
// their user (plus system:authenticated) in the context (UserFrom) and the
// Authorization header removed. A TLS client certificate signed by
// auth.ClientCA comes first, then a bearer token, as in kube-apiserver's
// authenticator union. A request without credentials is served as
// system:anonymous when auth.Anonymous is set or on the public reads
// (health checks, /version), and gets a 401 Status elsewhere; a request
// with a wrong token gets 401 everywhere, as in kube-apiserver, where bad
// credentials are never downgraded to anonymous.
func WithAuthentication(h http.Handler, auth Authentication) http.Handler {
	var certs *x509request.Authenticator
	if auth.ClientCA != nil {
		opts := x509request.DefaultVerifyOptions()
		opts.Roots = auth.ClientCA
		certs = x509request.New(opts, x509request.CommonNameUserConversion)
	}
	serve := func(w http.ResponseWriter, r *http.Request, u User) {
		if rec, ok := w.(*recorder); ok {
			rec.user = u.Name
		}
		h.ServeHTTP(w, r.WithContext(WithUser(r.Context(), u)))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if certs != nil && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			resp, ok, err := certs.AuthenticateRequest(r)
			if err != nil {
				unauthorized(w)
				return
			}
			if ok {
				u := userOf(resp.User)
				u.Groups = withGroup(u.Groups, GroupAuthenticated)
				serve(w, r, u)
				return
			}
		}
		header := r.Header.Get("Authorization")
		if header == "" {
			if !auth.Anonymous && (!isPublicPath(r.URL.Path) || (r.Method != http.MethodGet && r.Method != http.MethodHead)) {
				unauthorized(w)
				return
			}
			serve(w, r, User{Name: AnonymousUser, Groups: []string{GroupUnauthenticated}})
			return
		}
		scheme, token, ok := strings.Cut(header, " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || auth.Tokens == nil {
			unauthorized(w)
			return
		}
		u, ok := auth.Tokens.AuthenticateToken(token)
		if !ok {
			unauthorized(w)
			return
		}
		u.Groups = withGroup(u.Groups, GroupAuthenticated)
		r.Header.Del("Authorization")
		serve(w, r, u)
	})
}

// withGroup returns groups plus g, without changing groups' array and
// without a second g.
func withGroup(groups []string, g string) []string {
	if slices.Contains(groups, g) {
		return groups
	}
	return append(groups[:len(groups):len(groups)], g)
}

func unauthorized(w http.ResponseWriter) {
	writeStatus(w, apierrors.NewUnauthorized("Unauthorized"))
}
