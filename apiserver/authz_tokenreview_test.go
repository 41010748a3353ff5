package apiserver

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/listwatch/listwatch/apiserver/filters"
)

// TestTokenReview: a TokenReview says who a token the server accepts is,
// as kube-apiserver's: a token of the token file for the API's audiences
// (and no other, such tokens knowing none), a service account token from
// TokenRequest for the audiences it was issued for, every user in
// system:authenticated; an unknown token is "invalid bearer token".
func TestTokenReview(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	var tf filters.TokenFile
	if err := tf.Add("alice-token", filters.User{Name: "alice", UID: "alice-uid", Groups: []string{"devs"}}); err != nil {
		t.Fatal(err)
	}
	c.srv.SetTokenAuthenticator(&tf)
	c.mustDo("POST", "/api/v1/namespaces/default/serviceaccounts", "", `{"metadata":{"name":"robot"}}`, http.StatusCreated)
	tr := c.mustDo("POST", "/api/v1/namespaces/default/serviceaccounts/robot/token", "",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"audiences":["vault"]}}`, http.StatusCreated)
	robotToken := str(tr, "status.token")
	apiToken := str(c.mustDo("POST", "/api/v1/namespaces/default/serviceaccounts/robot/token", "",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}`, http.StatusCreated), "status.token")

	for _, tc := range []struct {
		name, token string
		audiences   []string
		wantUser    string
		wantGroups  []string
		wantAuds    []string
		wantError   string
	}{
		{name: "token file", token: "alice-token", wantUser: "alice", wantGroups: []string{"devs", "system:authenticated"}, wantAuds: []string{DefaultServiceAccountIssuer}},
		{name: "token file, API audience asked", token: "alice-token", audiences: []string{DefaultServiceAccountIssuer}, wantUser: "alice",
			wantGroups: []string{"devs", "system:authenticated"}, wantAuds: []string{DefaultServiceAccountIssuer}},
		{name: "token file, other audience", token: "alice-token", audiences: []string{"vault"}, wantError: "invalid bearer token"},
		{name: "service account, its audience", token: robotToken, audiences: []string{"vault"}, wantUser: "system:serviceaccount:default:robot",
			wantGroups: []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"}, wantAuds: []string{"vault"}},
		{name: "service account, API audience", token: apiToken, wantUser: "system:serviceaccount:default:robot",
			wantGroups: []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"}, wantAuds: []string{DefaultServiceAccountIssuer}},
		// kube's JWT authenticator's own words.
		{name: "service account, not its audience", token: robotToken,
			wantError: `token audiences ["vault"] is invalid for the target audiences ["` + DefaultServiceAccountIssuer + `"]`},
		{name: "unknown", token: "nobody", wantError: "invalid bearer token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tc.token, Audiences: tc.audiences}})
			r := c.do("POST", "/apis/authentication.k8s.io/v1/tokenreviews", "", string(body))
			if r.code != http.StatusCreated {
				t.Fatalf("%d %s", r.code, r.body)
			}
			var got authenticationv1.TokenReview
			if err := json.Unmarshal(r.body, &got); err != nil {
				t.Fatal(err)
			}
			st := got.Status
			if st.Authenticated != (tc.wantUser != "") || st.User.Username != tc.wantUser || !slices.Equal(st.User.Groups, tc.wantGroups) ||
				!slices.Equal(st.Audiences, tc.wantAuds) || st.Error != tc.wantError {
				t.Errorf("status %+v, want user %q groups %v audiences %v error %q", st, tc.wantUser, tc.wantGroups, tc.wantAuds, tc.wantError)
			}
		})
	}
}
