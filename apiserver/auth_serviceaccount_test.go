package apiserver

import (
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/utils/ptr"
)

// TestServiceAccountTokens issues tokens through the TokenRequest
// subresource and checks them as kube-apiserver does: the token is the
// service account's user, a request kube's validation refuses is a 422, a
// missing account a 404, and a token stops authenticating once its
// account is gone or when another server's key signed it.
func TestServiceAccountTokens(t *testing.T) {
	srv, c := startServer(t, backends[0].New(t), Config{})
	ctx := t.Context()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ServiceAccounts("ns1").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	tr, err := c.CoreV1().ServiceAccounts("ns1").CreateToken(ctx, "robot", req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Status.Token == "" || tr.Status.ExpirationTimestamp.IsZero() || len(tr.Spec.Audiences) != 1 || tr.Spec.Audiences[0] != DefaultServiceAccountIssuer {
		t.Fatalf("token request answered %+v", tr)
	}
	u, ok := srv.ServiceAccountTokens().AuthenticateToken(tr.Status.Token)
	if !ok || u.Name != "system:serviceaccount:ns1:robot" || len(u.Groups) != 2 ||
		u.Groups[0] != "system:serviceaccounts" || u.Groups[1] != "system:serviceaccounts:ns1" || u.UID == "" {
		t.Errorf("token authenticates %+v %v", u, ok)
	}

	refused := []struct {
		name, sa string
		req      *authenticationv1.TokenRequest
		want     func(error) bool
	}{
		{name: "too short", sa: "robot", req: &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](60)}}, want: apierrors.IsInvalid},
		{name: "name mismatch", sa: "robot", req: &authenticationv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, want: apierrors.IsInvalid},
		{name: "no such account", sa: "ghost", req: &authenticationv1.TokenRequest{}, want: apierrors.IsNotFound},
		{name: "bound to a missing pod", sa: "robot", req: &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "nope"}}}, want: apierrors.IsNotFound},
		{name: "bound to a kind kube does not bind", sa: "robot", req: &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "ConfigMap", APIVersion: "v1", Name: "x"}}}, want: apierrors.IsBadRequest},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.CoreV1().ServiceAccounts("ns1").CreateToken(ctx, tt.sa, tt.req, metav1.CreateOptions{})
			if !tt.want(err) {
				t.Errorf("got %v", err)
			}
		})
	}

	other, _ := startServer(t, backends[0].New(t), Config{})
	if _, ok := other.ServiceAccountTokens().AuthenticateToken(tr.Status.Token); ok {
		t.Error("a token another server signed authenticates")
	}
	if err := c.CoreV1().ServiceAccounts("ns1").Delete(ctx, "robot", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.ServiceAccountTokens().AuthenticateToken(tr.Status.Token); ok {
		t.Error("the token of a deleted service account authenticates")
	}
}

// TestAuthorizer asks the server's authorizer: system:masters may do
// anything, others what RBAC grants them, a binding being seen at once by
// the next decision; the reviews answer through the same authorizer.
func TestAuthorizer(t *testing.T) {
	srv, c := startServer(t, backends[0].New(t), Config{})
	ctx := t.Context()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := srv.Authorizer()
	list := func(u user.Info, ns string) authorizer.Decision {
		d, _, err := a.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: "list", Resource: "configmaps", Namespace: ns, ResourceRequest: true, APIVersion: "v1"})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	master := &user.DefaultInfo{Name: "root", Groups: []string{user.SystemPrivilegedGroup}}
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	if list(master, "ns1") != authorizer.DecisionAllow {
		t.Error("system:masters denied")
	}
	if list(alice, "ns1") == authorizer.DecisionAllow {
		t.Error("alice allowed with no binding")
	}
	if _, err := c.RbacV1().RoleBindings("ns1").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:aggregate-to-view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if list(alice, "ns1") != authorizer.DecisionAllow {
		t.Error("alice denied right after her binding was stored")
	}
	if list(alice, "kube-system") == authorizer.DecisionAllow {
		t.Error("alice allowed outside the binding's namespace")
	}
	sar, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "ns1", Verb: "list", Resource: "configmaps"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !sar.Status.Allowed || sar.Status.Reason == "" {
		t.Errorf("SubjectAccessReview: %+v", sar.Status)
	}
	rules, err := c.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "ns1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The loopback client is in system:masters, which RBAC's bootstrap
	// cluster-admin binding grants everything (the rules come in the
	// order the informer lists the bindings).
	if !slices.ContainsFunc(rules.Status.ResourceRules, func(r authorizationv1.ResourceRule) bool {
		return slices.Equal(r.Verbs, []string{"*"}) && slices.Equal(r.APIGroups, []string{"*"}) && slices.Equal(r.Resources, []string{"*"})
	}) {
		t.Errorf("SelfSubjectRulesReview of a master: %+v", rules.Status)
	}
	who, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if who.Status.UserInfo.Username != "system:apiserver" {
		t.Errorf("SelfSubjectReview: %+v", who.Status)
	}
}
