package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// TestJobDeleteWarning: a delete or deletecollection of batch/v1 Jobs
// that states no propagation policy carries kube's Job storage warning,
// once however many Jobs it deletes, a missing Job's too; one that
// states a policy, or a delete of another resource, carries none.
func TestJobDeleteWarning(t *testing.T) {
	const warning = `299 - "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"`
	c := newClient(t, backends[0].New(t))
	jobs := "/apis/batch/v1/namespaces/default/jobs"
	for i := range 4 {
		c.mustDo("POST", jobs, "", fmt.Sprintf(`{"metadata":{"name":"j%d","labels":{"app":"w"}},"spec":{"template":{"spec":{"restartPolicy":"Never",%s}}}}`, i, testContainers), http.StatusCreated)
	}
	c.mustDo("POST", "/api/v1/namespaces/default/configmaps", "", `{"metadata":{"name":"cm"}}`, http.StatusCreated)
	for _, tc := range []struct {
		name, path, body string
		code             int
		warned           bool
	}{
		{"default", jobs + "/j0", "", http.StatusOK, true},
		{"missing", jobs + "/missing", "", http.StatusNotFound, true},
		{"background", jobs + "/j1?propagationPolicy=Background", "", http.StatusOK, false},
		{"orphanDependents", jobs + "/j2", `{"orphanDependents":true}`, http.StatusOK, false},
		{"invalid options", jobs + "/j2?propagationPolicy=Bogus", "", http.StatusUnprocessableEntity, false},
		{"collection", jobs + "?labelSelector=app%3Dw", "", http.StatusOK, true},
		{"empty collection", jobs + "?labelSelector=app%3Dnone", "", http.StatusOK, true},
		{"collection orphan", jobs + "?labelSelector=app%3Dw&propagationPolicy=Orphan", "", http.StatusOK, false},
		{"config map", "/api/v1/namespaces/default/configmaps/cm", "", http.StatusOK, false},
	} {
		r := c.do("DELETE", tc.path, "", tc.body)
		if r.code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, r.code, r.body, tc.code)
		}
		var want []string
		if tc.warned {
			want = []string{warning}
		}
		if got := r.hdr.Values("Warning"); !slices.Equal(got, want) {
			t.Errorf("%s: warnings %q, want %q", tc.name, got, want)
		}
	}
}
