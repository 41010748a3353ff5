package apiserver

import (
	"context"
	"net/http"
	"slices"
	"strings"
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

// review is one review resource.
type review struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	rest       reviewCreater
}

// reviewFieldManagers are the field managers of the reviews, by kind,
// made on first use: kube-apiserver's create handler records the request's
// manager in the managedFields of what it creates, reviews included (an
// answer that is a new object, as SelfSubjectRulesReview's, has none).
var reviewFieldManagers = sync.OnceValues(func() (map[schema.GroupVersionKind]*managedfields.FieldManager, error) {
	kinds := []schema.GroupVersionKind{
		authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview"),
		authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview"),
		authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview"),
		authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview"),
		authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview"),
		authenticationv1.SchemeGroupVersion.WithKind("TokenReview"),
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

// reviews returns the review resources by group version and plural.
func (s *Server) reviews() map[schema.GroupVersionResource]review {
	a := s.authz.authorizer
	authz := authorizationv1.SchemeGroupVersion
	authn := authenticationv1.SchemeGroupVersion
	return map[schema.GroupVersionResource]review{
		authz.WithResource("selfsubjectaccessreviews"): {gvk: authz.WithKind("SelfSubjectAccessReview"),
			rest: selfsubjectaccessreview.NewREST(a, legacyscheme.Scheme)},
		authz.WithResource("subjectaccessreviews"): {gvk: authz.WithKind("SubjectAccessReview"),
			rest: subjectaccessreview.NewREST(a, legacyscheme.Scheme)},
		authz.WithResource("localsubjectaccessreviews"): {gvk: authz.WithKind("LocalSubjectAccessReview"), namespaced: true,
			rest: localsubjectaccessreview.NewREST(a, legacyscheme.Scheme)},
		authz.WithResource("selfsubjectrulesreviews"): {gvk: authz.WithKind("SelfSubjectRulesReview"),
			rest: selfsubjectrulesreview.NewREST(s.authz.rules)},
		authn.WithResource("selfsubjectreviews"): {gvk: authn.WithKind("SelfSubjectReview"),
			rest: selfsubjectreview.NewREST()},
		authn.WithResource("tokenreviews"): {gvk: authn.WithKind("TokenReview"),
			rest: lazyTokenReview{s: s}},
	}
}

// serveReview answers a request for a review resource (true), or does
// nothing (false) for any other path. rest is the path after the group
// version.
func (s *Server) serveReview(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion, rest []string) bool {
	if s.authz == nil || (gv.Group != authorizationv1.GroupName && gv.Group != authenticationv1.GroupName) {
		return false
	}
	var namespace string
	if len(rest) == 3 && rest[0] == "namespaces" {
		namespace, rest = rest[1], rest[2:]
	}
	if len(rest) != 1 {
		return false
	}
	rv, ok := s.authz.reviews[gv.WithResource(rest[0])]
	if !ok || rv.namespaced != (namespace != "") {
		return false
	}
	if r.Method != http.MethodPost {
		WriteStatus(w, methodNotAllowedPath(r))
		return true
	}
	ctx := r.Context()
	if namespace != "" {
		ctx = genericapirequest.WithNamespace(ctx, namespace)
	}
	out, err := createReview(ctx, r, rv)
	if err != nil {
		WriteStatus(w, err)
		return true
	}
	responsewriters.WriteObjectNegotiated(legacyscheme.Codecs, negotiation.DefaultEndpointRestrictions, gv, w, r, http.StatusCreated, out, false)
	return true
}

// createReview decodes the review in r's body into its internal type and
// has kube's storage answer it.
func createReview(ctx context.Context, r *http.Request, rv review) (runtime.Object, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	info, err := negotiation.NegotiateInputSerializer(r, false, legacyscheme.Codecs)
	if err != nil {
		return nil, err
	}
	internal := schema.GroupVersion{Group: rv.gvk.Group, Version: runtime.APIVersionInternal}
	decoder := legacyscheme.Codecs.DecoderToVersion(info.Serializer, internal)
	defaultGVK := rv.gvk
	obj, gvk, err := decoder.Decode(body, &defaultGVK, nil)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if gvk.GroupKind() != rv.gvk.GroupKind() {
		return nil, apierrors.NewBadRequest("the API version in the data (" + gvk.GroupVersion().String() +
			") does not match the expected API version (" + rv.gvk.GroupVersion().String() + ")")
	}
	fm, _, err := writeOptions(r, "create", "")
	if err != nil {
		return nil, err
	}
	managers, err := reviewFieldManagers()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	live, err := legacyscheme.Scheme.New(internal.WithKind(rv.gvk.Kind))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	obj = managers[rv.gvk].UpdateNoErrors(live, obj, fm.manager)
	return rv.rest.Create(ctx, obj, nil, &metav1.CreateOptions{})
}

// lazyTokenReview is kube's TokenReview storage made at each review, for
// the API audiences are known only once the service account tokens are
// set up, after the reviews (New).
type lazyTokenReview struct{ s *Server }

func (l lazyTokenReview) Create(ctx context.Context, obj runtime.Object, v rest.ValidateObjectFunc, o *metav1.CreateOptions) (runtime.Object, error) {
	rt := &l.s.reviewTokens
	return tokenreview.NewREST(rt.request(), rt.apiAudiences()).Create(ctx, obj, v, o)
}

// Discovery of the reviews: kube-apiserver lists them as create-only
// resources of authentication.k8s.io/v1 and authorization.k8s.io/v1, two
// built-in groups placed, in /apis, after events.k8s.io (its group
// priorities). They are not in the registry, which holds stored
// resources; discovery.go asks these functions.

// reviewGroupsAfter is the group kube-apiserver lists the review groups
// after.
const reviewGroupsAfter = "events.k8s.io"

// reviewGroups are the review groups in kube-apiserver's order.
var reviewGroups = []string{authenticationv1.GroupName, authorizationv1.GroupName}

// isReviewGroup reports whether group holds reviews and no stored
// resource.
func (s *Server) isReviewGroup(group string) bool {
	return s.authz != nil && slices.Contains(reviewGroups, group) && len(s.reg.Versions[group]) == 0
}

// builtinGroups are the built-in groups of /apis in kube-apiserver's
// order: the registry's, with the review groups in their place.
func (s *Server) builtinGroups() []string {
	groups := slices.Clone(s.reg.Groups)
	if s.authz == nil {
		return groups
	}
	at := 0
	if i := slices.Index(groups, reviewGroupsAfter); i >= 0 {
		at = i + 1
	}
	var add []string
	for _, g := range reviewGroups {
		if s.isReviewGroup(g) {
			add = append(add, g)
		}
	}
	return slices.Insert(groups, at, add...)
}

// reviewAPIResources are the legacy discovery entries of the reviews of
// gv (sorted by name), nil for any other group version.
func (s *Server) reviewAPIResources(gv schema.GroupVersion) []metav1.APIResource {
	if !s.isReviewGroup(gv.Group) || s.authz == nil {
		return nil
	}
	var out []metav1.APIResource
	for rgv, rv := range s.authz.reviews {
		if rgv.GroupVersion() != gv {
			continue
		}
		out = append(out, metav1.APIResource{
			Name:         rgv.Resource,
			SingularName: strings.ToLower(rv.gvk.Kind),
			Namespaced:   rv.namespaced,
			Kind:         rv.gvk.Kind,
			Verbs:        metav1.Verbs{"create"},
		})
	}
	slices.SortFunc(out, func(a, b metav1.APIResource) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// reviewOpenAPIResources are the reviews as the OpenAPI documents state
// them: create-only resources, as kube-apiserver publishes them.
func reviewOpenAPIResources() []kube.OpenAPIResource {
	authz := authorizationv1.SchemeGroupVersion
	authn := authenticationv1.SchemeGroupVersion
	var out []kube.OpenAPIResource
	for _, r := range []struct {
		gvk        schema.GroupVersionKind
		plural     string
		namespaced bool
	}{
		{authn.WithKind("SelfSubjectReview"), "selfsubjectreviews", false},
		{authn.WithKind("TokenReview"), "tokenreviews", false},
		{authz.WithKind("LocalSubjectAccessReview"), "localsubjectaccessreviews", true},
		{authz.WithKind("SelfSubjectAccessReview"), "selfsubjectaccessreviews", false},
		{authz.WithKind("SelfSubjectRulesReview"), "selfsubjectrulesreviews", false},
		{authz.WithKind("SubjectAccessReview"), "subjectaccessreviews", false},
	} {
		out = append(out, kube.OpenAPIResource{GVK: r.gvk, Plural: r.plural, Singular: strings.ToLower(r.gvk.Kind),
			Namespaced: r.namespaced, Verbs: []string{"create"}})
	}
	return out
}
