package auth

import (
	"context"
	"net/http"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/authentication/install" // internal types of the reviews
	_ "k8s.io/kubernetes/pkg/apis/authorization/install"
	"k8s.io/kubernetes/pkg/registry/authentication/selfsubjectreview"
	"k8s.io/kubernetes/pkg/registry/authentication/tokenreview"
	"k8s.io/kubernetes/pkg/registry/authorization/localsubjectaccessreview"
	"k8s.io/kubernetes/pkg/registry/authorization/selfsubjectaccessreview"
	"k8s.io/kubernetes/pkg/registry/authorization/selfsubjectrulesreview"
	"k8s.io/kubernetes/pkg/registry/authorization/subjectaccessreview"

	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
)

// The reviews: create-only resources whose answer is computed, never
// stored, served by kube-apiserver's own REST storages
// (k8s.io/kubernetes/pkg/registry/authorization/... and
// .../authentication/selfsubjectreview) over the server's authorizer, so
// that `kubectl auth can-i` (SelfSubjectAccessReview, and
// SelfSubjectRulesReview for --list) and `kubectl auth whoami`
// (SelfSubjectReview) work: the body is decoded and defaulted into the
// internal type, the storage's Create decides, and its answer is encoded
// at the requested version with 201 Created, as kube-apiserver's create
// handler does.

// reviewCreater is the Create of a kube REST storage of a review.
type reviewCreater interface {
	Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error)
}

// Review is one review resource.
type Review struct {
	GVK        schema.GroupVersionKind
	Plural     string
	Namespaced bool
}

// Reviews are the review resources, in the order of kube-apiserver's
// OpenAPI documents.
func Reviews() []Review {
	authz := authorizationv1.SchemeGroupVersion
	authn := authenticationv1.SchemeGroupVersion
	return []Review{
		{authn.WithKind("SelfSubjectReview"), "selfsubjectreviews", false},
		{authn.WithKind("TokenReview"), "tokenreviews", false},
		{authz.WithKind("LocalSubjectAccessReview"), "localsubjectaccessreviews", true},
		{authz.WithKind("SelfSubjectAccessReview"), "selfsubjectaccessreviews", false},
		{authz.WithKind("SelfSubjectRulesReview"), "selfsubjectrulesreviews", false},
		{authz.WithKind("SubjectAccessReview"), "subjectaccessreviews", false},
	}
}

// review is one review resource and the kube storage that answers it.
type review struct {
	Review
	rest reviewCreater
}

// reviewFieldManagers are the field managers of the reviews, by kind,
// made on first use: kube-apiserver's create handler records the request's
// manager in the managedFields of what it creates, reviews included (an
// answer that is a new object, as SelfSubjectRulesReview's, has none).
var reviewFieldManagers = sync.OnceValues(func() (map[schema.GroupVersionKind]*managedfields.FieldManager, error) {
	var kinds []schema.GroupVersionKind
	for _, rv := range Reviews() {
		kinds = append(kinds, rv.GVK)
	}
	models, err := kube.OpenAPIModels(kinds)
	if err != nil {
		return nil, err
	}
	tc, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		return nil, err
	}
	out := make(map[schema.GroupVersionKind]*managedfields.FieldManager, len(kinds))
	for _, gvk := range kinds {
		hub := schema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal}
		fm, err := managedfields.NewDefaultFieldManager(tc, legacyscheme.Scheme, legacyscheme.Scheme, legacyscheme.Scheme, gvk, hub, "", nil)
		if err != nil {
			return nil, err
		}
		out[gvk] = fm
	}
	return out, nil
})

// newReviews returns the review resources by group version and plural,
// each with kube's storage over the authorizer.
func (a *Auth) newReviews() map[schema.GroupVersionResource]review {
	storages := map[string]reviewCreater{
		"SelfSubjectAccessReview":  selfsubjectaccessreview.NewREST(a.authorizer, legacyscheme.Scheme),
		"SubjectAccessReview":      subjectaccessreview.NewREST(a.authorizer, legacyscheme.Scheme),
		"LocalSubjectAccessReview": localsubjectaccessreview.NewREST(a.authorizer, legacyscheme.Scheme),
		"SelfSubjectRulesReview":   selfsubjectrulesreview.NewREST(a.rules),
		"SelfSubjectReview":        selfsubjectreview.NewREST(),
		"TokenReview":              tokenreview.NewREST(a.tokenReviewRequest(), a.tokens.audiences),
	}
	out := map[schema.GroupVersionResource]review{}
	for _, rv := range Reviews() {
		out[rv.GVK.GroupVersion().WithResource(rv.Plural)] = review{Review: rv, rest: storages[rv.GVK.Kind]}
	}
	return out
}

// ServeReview answers a request for a review resource (true), or does
// nothing (false) for any other path. rest is the path after the group
// version.
func (a *Auth) ServeReview(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion, rest []string) bool {
	if gv.Group != authorizationv1.GroupName && gv.Group != authenticationv1.GroupName {
		return false
	}
	var namespace string
	if len(rest) == 3 && rest[0] == "namespaces" {
		namespace, rest = rest[1], rest[2:]
	}
	if len(rest) != 1 {
		return false
	}
	rv, ok := a.reviews[gv.WithResource(rest[0])]
	if !ok || rv.Namespaced != (namespace != "") {
		return false
	}
	if r.Method != http.MethodPost {
		respond.Status(w, respond.MethodNotAllowed())
		return true
	}
	ctx := r.Context()
	if namespace != "" {
		ctx = genericapirequest.WithNamespace(ctx, namespace)
	}
	out, err := a.createReview(ctx, r, rv)
	if err != nil {
		respond.Status(w, err)
		return true
	}
	responsewriters.WriteObjectNegotiated(legacyscheme.Codecs, negotiation.DefaultEndpointRestrictions, gv, w, r, http.StatusCreated, out, false)
	return true
}

// createReview decodes the review in r's body into its internal type and
// has kube's storage answer it.
func (a *Auth) createReview(ctx context.Context, r *http.Request, rv review) (runtime.Object, error) {
	obj, gvk, err := decodeInternal(r, rv.GVK)
	if err != nil {
		return nil, err
	}
	internal := schema.GroupVersion{Group: rv.GVK.Group, Version: runtime.APIVersionInternal}
	if gvk.GroupKind() != rv.GVK.GroupKind() {
		return nil, apierrors.NewBadRequest("the API version in the data (" + gvk.GroupVersion().String() +
			") does not match the expected API version (" + rv.GVK.GroupVersion().String() + ")")
	}
	manager, err := a.cfg.FieldManager(r)
	if err != nil {
		return nil, err
	}
	managers, err := reviewFieldManagers()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	live, err := legacyscheme.Scheme.New(internal.WithKind(rv.GVK.Kind))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	obj = managers[rv.GVK].UpdateNoErrors(live, obj, manager)
	return rv.rest.Create(ctx, obj, nil, &metav1.CreateOptions{})
}

// decodeInternal decodes r's body, in the serializer its Content-Type
// names, into the internal type of its kind (gvk when the body names
// none), as kube's create handler does before a storage sees it; a body
// that cannot be decoded is a 400.
func decodeInternal(r *http.Request, gvk schema.GroupVersionKind) (runtime.Object, *schema.GroupVersionKind, error) {
	body, err := respond.ReadBody(r)
	if err != nil {
		return nil, nil, err
	}
	info, err := negotiation.NegotiateInputSerializer(r, false, legacyscheme.Codecs)
	if err != nil {
		return nil, nil, err
	}
	internal := schema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal}
	obj, got, err := legacyscheme.Codecs.DecoderToVersion(info.Serializer, internal).Decode(body, &gvk, nil)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	return obj, got, nil
}
