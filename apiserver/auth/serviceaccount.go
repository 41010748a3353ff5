package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	authenticationapi "k8s.io/kubernetes/pkg/apis/authentication"
	authenticationvalidation "k8s.io/kubernetes/pkg/apis/authentication/validation"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // internal core types for the token claims
	token "k8s.io/kubernetes/pkg/serviceaccount"

	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
)

// Service account tokens as kube-apiserver issues and checks them: the
// TokenRequest subresource (POST .../serviceaccounts/{name}/token, what
// `kubectl create token` and the kubelet ask) signs a JWT with kube's own
// claims (k8s.io/kubernetes/pkg/serviceaccount.Claims: issuer, audiences,
// expiry, the service account and the object the token is bound to), and
// bearer tokens are checked by kube's JWT authenticator and bound-token
// validator: signature, issuer, audience, expiry, and the service account
// (and bound pod, secret or node) still existing with the same UID.

// DefaultServiceAccountIssuer is kube-apiserver's issuer in a kubeadm
// cluster (--service-account-issuer), and the tokens' default audience.
const DefaultServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// saTokens issues and checks service account tokens.
type saTokens struct {
	issuer    string
	audiences authenticator.Audiences
	generator token.TokenGenerator
	authn     authenticator.Token
	client    kubernetes.Interface
	// ctx bounds the lookups of the validator (the server's lifetime).
	ctx context.Context
}

// initServiceAccountTokens sets up the token issuer and authenticator with
// the configured signing key, or a key of the server's own lifetime.
func (a *Auth) initServiceAccountTokens() error {
	key := a.cfg.SigningKey
	if key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("auth: service account key: %w", err)
		}
		key = k
	}
	issuer := a.cfg.Issuer
	if issuer == "" {
		issuer = DefaultServiceAccountIssuer
	}
	gen, err := token.JWTTokenGenerator(issuer, key)
	if err != nil {
		return fmt.Errorf("auth: service account tokens: %w", err)
	}
	keys, err := token.StaticPublicKeysGetter([]any{key.Public()})
	if err != nil {
		return fmt.Errorf("auth: service account tokens: %w", err)
	}
	auds := authenticator.Audiences{issuer}
	client := a.cfg.Loopback.Client()
	a.tokens = &saTokens{
		issuer:    issuer,
		audiences: auds,
		generator: gen,
		authn:     token.JWTTokenAuthenticator([]string{issuer}, keys, auds, token.NewValidator(clientTokenGetter{client: client})),
		client:    client,
		ctx:       a.cfg.Context,
	}
	return nil
}

// ServiceAccountTokens authenticates the service account tokens the server
// issued, for the filters (filters.Options.Authenticator, with a token
// file: filters.Tokens).
func (a *Auth) ServiceAccountTokens() filters.TokenAuthenticator { return a.tokens }

// saLookupTimeout bounds the lookups of one token's check.
const saLookupTimeout = 10 * time.Second

// AuthenticateToken implements filters.TokenAuthenticator.
func (t *saTokens) AuthenticateToken(tok string) (filters.User, bool) {
	ctx, cancel := context.WithTimeout(t.ctx, saLookupTimeout)
	defer cancel()
	resp, ok, err := t.authn.AuthenticateToken(ctx, tok)
	if err != nil || !ok || resp.User == nil {
		return filters.User{}, false
	}
	u := resp.User
	return filters.User{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}, true
}

// clientTokenGetter is kube's ServiceAccountTokenGetter over the loopback
// client: what the bound-token validator checks still exists.
type clientTokenGetter struct{ client kubernetes.Interface }

func (g clientTokenGetter) GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	return g.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (g clientTokenGetter) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return g.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (g clientTokenGetter) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return g.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (g clientTokenGetter) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	return g.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

func (g clientTokenGetter) GetValidatingWebhookConfiguration(ctx context.Context, name string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return g.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
}

func (g clientTokenGetter) GetMutatingWebhookConfiguration(ctx context.Context, name string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return g.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
}

// ServeTokenRequest answers POST /api/v1/namespaces/{ns}/serviceaccounts/
// {name}/token (true), or does nothing (false) for another path. rest is
// the path after the group version.
func (a *Auth) ServeTokenRequest(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion, rest []string) bool {
	if gv != corev1.SchemeGroupVersion || len(rest) != 5 ||
		rest[0] != "namespaces" || rest[2] != "serviceaccounts" || rest[4] != "token" || rest[1] == "" || rest[3] == "" {
		return false
	}
	if r.Method != http.MethodPost {
		respond.Status(w, respond.MethodNotAllowed())
		return true
	}
	out, err := a.tokens.request(r.Context(), r, rest[1], rest[3])
	if err != nil {
		respond.Status(w, err)
		return true
	}
	responsewriters.WriteObjectNegotiated(legacyscheme.Codecs, negotiation.DefaultEndpointRestrictions, authenticationv1.SchemeGroupVersion, w, r, http.StatusCreated, out, false)
	return true
}

// TokenRequestKind is the kind of the serviceaccounts/token subresource.
var TokenRequestKind = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")

// ServiceAccountKind is the kind whose resource has the token subresource.
var ServiceAccountKind = corev1.SchemeGroupVersion.WithKind("ServiceAccount")

// request issues the token r asks for service account name in namespace,
// with kube-apiserver's TokenRequest rules: the body's name and namespace
// must match the path's, audiences default to the API's, the request is
// validated as kube validates it (at least ten minutes), and a bound
// object (pod, secret or node) must exist with the UID given.
func (t *saTokens) request(ctx context.Context, r *http.Request, namespace, name string) (runtime.Object, error) {
	obj, _, err := decodeInternal(r, TokenRequestKind)
	if err != nil {
		return nil, err
	}
	req, ok := obj.(*authenticationapi.TokenRequest)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a TokenRequest: %T", obj))
	}
	gk := TokenRequestKind.GroupKind()
	if req.Name != "" && req.Name != name {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata").Child("name"), req.Name, "must match the service account name if specified")})
	}
	if req.Namespace != "" && req.Namespace != namespace {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata").Child("namespace"), req.Namespace, "must match the service account namespace if specified")})
	}
	sa, err := t.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = t.audiences
	}
	if req.Name == "" {
		req.Name = sa.Name
	}
	if req.Namespace == "" {
		req.Namespace = sa.Namespace
	}
	if req.UID == "" {
		req.UID = sa.UID
	} else if req.UID != sa.UID {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: gk.Group, Resource: gk.Kind}, name,
			fmt.Errorf("the UID in the token request (%s) does not match the UID of the service account (%s)", req.UID, sa.UID))
	}
	now := time.Now()
	req.CreationTimestamp = metav1.NewTime(now)
	req.Status = authenticationapi.TokenRequestStatus{}
	if errs := authenticationvalidation.ValidateTokenRequest(req); len(errs) != 0 {
		return nil, apierrors.NewInvalid(gk, "", errs)
	}
	var (
		pod    *api.Pod
		node   *api.Node
		secret *api.Secret
	)
	if ref := req.Spec.BoundObjectRef; ref != nil {
		var uid types.UID
		gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		switch {
		case gvk.Group == "" && gvk.Kind == "Pod":
			p, err := t.client.CoreV1().Pods(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			if name != p.Spec.ServiceAccountName {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", name))
			}
			if pod, err = toInternal[api.Pod](p); err != nil {
				return nil, err
			}
			uid = pod.UID
			if nodeName := p.Spec.NodeName; nodeName != "" {
				n, err := t.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
				switch {
				case apierrors.IsNotFound(err):
					// As kube: the node's name alone, so that the token
					// still says where its pod runs.
					node = &api.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
				case err != nil:
					return nil, apierrors.NewInternalError(err)
				default:
					if node, err = toInternal[api.Node](n); err != nil {
						return nil, err
					}
				}
			}
		case gvk.Group == "" && gvk.Kind == "Node":
			n, err := t.client.CoreV1().Nodes().Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			if node, err = toInternal[api.Node](n); err != nil {
				return nil, err
			}
			uid = node.UID
		case gvk.Group == "" && gvk.Kind == "Secret":
			sec, err := t.client.CoreV1().Secrets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			if secret, err = toInternal[api.Secret](sec); err != nil {
				return nil, err
			}
			uid = secret.UID
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
		}
		if ref.UID != "" && uid != ref.UID {
			return nil, apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
				fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
		}
	}
	internalSA, err := toInternal[api.ServiceAccount](sa)
	if err != nil {
		return nil, err
	}
	sc, pc, err := token.Claims(*internalSA, pod, secret, node, nil, nil, req.Spec.ExpirationSeconds, 0, req.Spec.Audiences, req.Spec.Attestations)
	if err != nil {
		return nil, err
	}
	tok, err := t.generator.GenerateToken(ctx, sc, pc)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to generate token: %w", err))
	}
	out := req.DeepCopy()
	out.Status = authenticationapi.TokenRequestStatus{
		Token:               tok,
		ExpirationTimestamp: metav1.Time{Time: now.Add(time.Duration(out.Spec.ExpirationSeconds) * time.Second)},
	}
	return out, nil
}

// toInternal converts a core/v1 object to kube's internal type T, which
// the token claims take.
func toInternal[T any, PT interface {
	*T
	runtime.Object
}](in runtime.Object) (PT, error) {
	out := PT(new(T))
	if err := legacyscheme.Scheme.Convert(in, out, nil); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}
