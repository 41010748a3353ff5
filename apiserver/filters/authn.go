package filters

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

type userKey struct{}

// UserFrom returns the user WithAuthentication stored in ctx.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
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

// WithAuthentication serves requests carrying a bearer token auth knows,
// with the token's user (plus system:authenticated) in the context and the
// Authorization header removed. A request without credentials is served as
// system:anonymous on the public paths (health checks, /version) and gets a
// 401 Status elsewhere; a request with a wrong token gets 401 everywhere,
// as in kube-apiserver, where bad credentials are never downgraded to
// anonymous.
func WithAuthentication(h http.Handler, auth TokenAuthenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Get("Authorization")
		if header == "" {
			if !isPublicPath(r.URL.Path) || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
				unauthorized(w)
				return
			}
			anon := User{Name: AnonymousUser, Groups: []string{GroupUnauthenticated}}
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, anon)))
			return
		}
		scheme, token, ok := strings.Cut(header, " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			unauthorized(w)
			return
		}
		u, ok := auth.AuthenticateToken(token)
		if !ok {
			unauthorized(w)
			return
		}
		u.Groups = append(u.Groups[:len(u.Groups):len(u.Groups)], GroupAuthenticated)
		if rec, ok := w.(*recorder); ok {
			rec.user = u.Name
		}
		r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
		r.Header.Del("Authorization")
		h.ServeHTTP(w, r)
	})
}

func unauthorized(w http.ResponseWriter) {
	writeStatus(w, apierrors.NewUnauthorized("Unauthorized"))
}
