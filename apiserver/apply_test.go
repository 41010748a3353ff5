package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const applyType = "application/apply-patch+yaml"

// managers lists an object's managedFields as manager/operation[/subresource].
func managers(t *testing.T, obj map[string]any) []string {
	t.Helper()
	var m struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	js, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range m.Metadata.ManagedFields {
		s := e.Manager + "/" + string(e.Operation)
		if e.Subresource != "" {
			s += "/" + e.Subresource
		}
		out = append(out, s)
	}
	return out
}

// fieldsOf returns the fieldsV1 of manager's entry, as JSON.
func fieldsOf(obj map[string]any, manager string) string {
	entries, _ := nested(obj, "metadata.managedFields").([]any)
	for _, e := range entries {
		m, _ := e.(map[string]any)
		if m["manager"] == manager {
			js, _ := json.Marshal(m["fieldsV1"])
			return string(js)
		}
	}
	return ""
}

// TestServerSideApply runs server-side apply's contract through the
// HTTP API on both backends: create by apply, two managers, a conflict
// (409 with the field manager's causes) and force, a field removed by
// leaving it out, list-map merges of containers and ports, Update entries
// of other writes, status through /status, a custom resource, and the
// parameter rules.
func TestServerSideApply(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		cms := "/api/v1/namespaces/default/configmaps"
		cm := func(data string) string {
			return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{` + data + `}}`
		}
		apply := func(path, manager, body string, code int) map[string]any {
			t.Helper()
			r := c.do("PATCH", path+"?fieldManager="+manager, applyType, body)
			if r.code != code {
				t.Fatalf("apply by %s: %d %s, want %d", manager, r.code, r.body, code)
			}
			return r.obj(t)
		}

		created := apply(cms+"/cm", "m1", cm(`"a":"1","b":"2"`), http.StatusCreated)
		if got := managers(t, created); strings.Join(got, " ") != "m1/Apply" {
			t.Errorf("created by apply: managers %v", got)
		}
		apply(cms+"/cm", "m2", cm(`"c":"3"`), http.StatusOK)

		r := c.do("PATCH", cms+"/cm?fieldManager=m2", applyType, cm(`"a":"9","c":"3"`))
		st := r.status(t)
		if r.code != http.StatusConflict || st.Reason != metav1.StatusReasonConflict ||
			st.Message != `Apply failed with 1 conflict: conflict with "m1": .data.a` ||
			len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict || st.Details.Causes[0].Field != ".data.a" {
			t.Errorf("conflict: %d %s", r.code, r.body)
		}
		forced := c.mustDo("PATCH", cms+"/cm?fieldManager=m2&force=true", applyType, cm(`"a":"9","c":"3"`), http.StatusOK)
		if str(forced, "data.a") != "9" || fieldsOf(forced, "m1") != `{"f:data":{"f:b":{}}}` {
			t.Errorf("forced: data %v, m1 owns %s", nested(forced, "data"), fieldsOf(forced, "m1"))
		}
		// m1 leaves b out: it is removed, as m1 was its only manager.
		removed := apply(cms+"/cm", "m1", cm(``), http.StatusOK)
		if _, ok := nested(removed, "data").(map[string]any)["b"]; ok {
			t.Errorf("b kept after m1 left it out: %v", nested(removed, "data"))
		}
		// An ordinary write records an Update entry for its manager.
		patched := c.mustDo("PATCH", cms+"/cm?fieldManager=editor", "application/merge-patch+json", `{"data":{"d":"4"}}`, http.StatusOK)
		if got := strings.Join(managers(t, patched), " "); !strings.Contains(got, "m2/Apply") || !strings.HasSuffix(got, "editor/Update") {
			t.Errorf("after a merge patch: managers %s", got)
		}
		// A list with one empty entry clears managedFields.
		cleared := c.mustDo("PATCH", cms+"/cm", "application/merge-patch+json", `{"metadata":{"managedFields":[{}]}}`, http.StatusOK)
		if got := managers(t, cleared); len(got) != 0 {
			t.Errorf("after clearing: managers %v", got)
		}

		// List-type maps: containers merged by name, ports by key.
		deps := "/apis/apps/v1/namespaces/default/deployments"
		dep := func(spec string) string {
			return `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":` + spec + `}`
		}
		apply(deps+"/d", "a", dep(`{"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"name":"main","image":"x","ports":[{"containerPort":80}]}]}}}`), http.StatusCreated)
		merged := apply(deps+"/d", "b", dep(`{"template":{"spec":{"containers":[{"name":"side","image":"y"},{"name":"main","ports":[{"containerPort":443}]}]}}}`), http.StatusOK)
		containers, _ := nested(merged, "spec.template.spec.containers").([]any)
		if len(containers) != 2 {
			t.Fatalf("containers after the merge: %v", containers)
		}
		for _, ct := range containers {
			if m, _ := ct.(map[string]any); m["name"] == "main" {
				if ports, _ := m["ports"].([]any); len(ports) != 2 {
					t.Errorf("ports of main after the merge: %v", ports)
				}
			}
		}
		// Status applied through /status is recorded with its subresource.
		st2 := c.mustDo("PATCH", deps+"/d/status?fieldManager=ctrl", applyType,
			`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"status":{"replicas":1}}`, http.StatusOK)
		if got := strings.Join(managers(t, st2), " "); !strings.Contains(got, "ctrl/Apply/status") {
			t.Errorf("status apply: managers %s", got)
		}

		// The scale subresource: applied as a Scale, recorded on the
		// Deployment with subresource scale.
		sc := c.mustDo("PATCH", deps+"/d/scale?fieldManager=scaler&force=true", applyType,
			`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"d"},"spec":{"replicas":4}}`, http.StatusOK)
		if nested(sc, "spec.replicas") != float64(4) {
			t.Errorf("scale apply answered %v", sc)
		}
		scaled := c.mustDo("GET", deps+"/d", "", "", http.StatusOK)
		if got := strings.Join(managers(t, scaled), " "); nested(scaled, "spec.replicas") != float64(4) || !strings.Contains(got, "scaler/Apply/scale") {
			t.Errorf("after the scale apply: replicas %v, managers %s", nested(scaled, "spec.replicas"), got)
		}

		// A custom resource.
		foos := fmt.Sprintf("/apis/%s/%s/namespaces/default/%s", fooResource.Group, fooResource.Version, fooResource.Plural)
		foo := func(spec string) string {
			return fmt.Sprintf(`{"apiVersion":"%s/%s","kind":"Foo","metadata":{"name":"f"},"spec":%s}`, fooResource.Group, fooResource.Version, spec)
		}
		apply(foos+"/f", "x", foo(`{"size":1}`), http.StatusCreated)
		if r := c.do("PATCH", foos+"/f?fieldManager=y", applyType, foo(`{"size":2}`)); r.code != http.StatusConflict {
			t.Errorf("custom resource conflict: %d %s", r.code, r.body)
		}
	})
}

// TestApplyParameters checks the query parameters of writes as
// kube-apiserver validates them.
func TestApplyParameters(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	cms := "/api/v1/namespaces/default/configmaps"
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p"}}`
	cases := []struct {
		name, method, path, query, ct string
		code                          int
		msg                           string
	}{
		{"apply without manager", "PATCH", cms + "/p", "", applyType, 422, `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`},
		{"force on a merge patch", "PATCH", cms + "/p", "?fieldManager=m&force=true", "application/merge-patch+json", 422, `force: Forbidden: may not be specified for non-apply patch`},
		{"manager too long", "POST", cms, "?fieldManager=" + strings.Repeat("a", 129), "", 422, `CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long`},
		{"bad dryRun on update", "PUT", cms + "/p", "?dryRun=x", "", 422, `UpdateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value`},
		{"not yaml", "PATCH", cms + "/p", "?fieldManager=m", applyType, 400, "error decoding patch: error converting YAML to JSON"},
		{"managedFields in the apply", "PATCH", cms + "/p", "?fieldManager=m", applyType, 400, "metadata.managedFields must be nil"},
	}
	for _, tc := range cases {
		b := body
		switch tc.name {
		case "not yaml":
			b = "{a: [}"
		case "managedFields in the apply":
			b = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p","managedFields":[{"manager":"x"}]}}`
		}
		r := c.do(tc.method, tc.path+tc.query, tc.ct, b)
		if r.code != tc.code || !strings.Contains(r.status(t).Message, tc.msg) {
			t.Errorf("%s: %d %s, want %d %q", tc.name, r.code, r.body, tc.code, tc.msg)
		}
	}
}

// TestManagerFromUserAgent checks the default field manager: the
// User-Agent up to its first "/", printable characters only, at most 128
// bytes.
func TestManagerFromUserAgent(t *testing.T) {
	cases := []struct{ fieldManager, ua, want string }{
		{"explicit", "kubectl/v1.37", "explicit"},
		{"", "kubectl/v1.37.2 (linux/amd64)", "kubectl"},
		{"", "tab\there/1", "tabhere"},
		{"", strings.Repeat("x", 200), strings.Repeat("x", 128)},
		{"", "", ""},
	}
	for _, tc := range cases {
		r, err := http.NewRequest("GET", "/", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("User-Agent", tc.ua)
		if got := managerOf(r, tc.fieldManager); got != tc.want {
			t.Errorf("managerOf(%q, %q) = %q, want %q", tc.fieldManager, tc.ua, got, tc.want)
		}
	}
}

// TestApplyDryRunStoresNothing: an apply with dryRun=All is answered as
// applied, and neither stored nor seen by a watch.
func TestApplyDryRunStoresNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		cms := "/api/v1/namespaces/default/configmaps"
		c.mustDo("POST", cms, "", `{"metadata":{"name":"w"},"data":{"a":"1"}}`, http.StatusCreated)
		w := c.watch(cms + "?watch=true&fieldSelector=metadata.name%3Dw")
		w.expect("ADDED", "w")
		ans := c.mustDo("PATCH", cms+"/w?dryRun=All&fieldManager=dry", applyType,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w"},"data":{"b":"2"}}`, http.StatusOK)
		if str(ans, "data.b") != "2" {
			t.Errorf("dry apply answered %v", nested(ans, "data"))
		}
		c.mustDo("PATCH", cms+"/new?dryRun=All&fieldManager=dry", applyType,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new"}}`, http.StatusCreated)
		if r := c.do("GET", cms+"/new", "", ""); r.code != http.StatusNotFound {
			t.Errorf("dry apply created the object: %d", r.code)
		}
		// A real write after the dry runs is the next event the watch sees.
		c.mustDo("PATCH", cms+"/w", "application/merge-patch+json", `{"data":{"c":"3"}}`, http.StatusOK)
		ev := w.expect("MODIFIED", "w")
		if data, _ := nested(ev.Object, "data").(map[string]any); data["b"] != nil || data["c"] != "3" {
			t.Errorf("watch saw %v", data)
		}
	})
}
