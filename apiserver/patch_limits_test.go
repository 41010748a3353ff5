package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestJSONDepth(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want int
	}{
		{`1`, 0},
		{`"{[{["`, 0},
		{`{}`, 1},
		{`[[],[[]]]`, 3},
		{`{"a":{"b":"}}}\"{{"},"c":[1,{"d":[]}]}`, 4},
		{`{"a":"\\"}`, 1},
		{strings.Repeat(`{"a":`, 500) + `1` + strings.Repeat(`}`, 500), 500},
	} {
		if !json.Valid([]byte(tc.doc)) {
			t.Fatalf("test document %q is not JSON", tc.doc)
		}
		if got := jsonDepth([]byte(tc.doc)); got != tc.want {
			t.Errorf("jsonDepth(%.40q) = %d, want %d", tc.doc, got, tc.want)
		}
	}
}

// FuzzJSONDepth: jsonDepth agrees with the depth of the decoded document.
func FuzzJSONDepth(f *testing.F) {
	for _, s := range []string{`{}`, `[1,[2,{"a":"]"}]]`, `{"\\"":[{}]}`, `"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var v any
		if json.Unmarshal([]byte(doc), &v) != nil {
			return
		}
		if got, want := jsonDepth([]byte(doc)), depthOf(v); got != want {
			t.Fatalf("jsonDepth(%q) = %d, decoded depth %d", doc, got, want)
		}
	})
}

func depthOf(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, depthOf(e))
		}
		return d + 1
	case []any:
		for _, e := range v {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}

// TestDeepPatchRefused: a patch nested deeper than maxPatchDepth is
// refused with a 400 that says why, for every patch type, before it is
// applied (kube-apiserver spends seconds and a gigabyte on a 10,000-level
// merge patch); one at the bound is applied.
func TestDeepPatchRefused(t *testing.T) {
	nest := func(depth int) string {
		return strings.Repeat(`{"a":`, depth) + `"v"` + strings.Repeat(`}`, depth)
	}
	forEachBackend(t, func(t *testing.T, c *client) {
		c.mustDo(http.MethodPost, "/api/v1/namespaces/default/configmaps", "", `{"metadata":{"name":"deep"}}`, http.StatusCreated)
		for _, tc := range []struct {
			name, contentType string
			body              func(depth int) string
		}{
			{"merge", "application/merge-patch+json", func(d int) string { return `{"data":{"x":"y"},"metadata":{"annotations":` + nest(d-3) + `}}` }},
			{"strategic", "application/strategic-merge-patch+json", func(d int) string { return `{"metadata":{"annotations":` + nest(d-2) + `}}` }},
			{"json", "application/json-patch+json", func(d int) string {
				return `[{"op":"add","path":"/metadata/labels","value":` + nest(d-2) + `}]`
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := c.do(http.MethodPatch, "/api/v1/namespaces/default/configmaps/deep", tc.contentType, tc.body(10000))
				if r.code != http.StatusBadRequest || !strings.Contains(r.status(t).Message, "levels deep, more than the 100") {
					t.Errorf("10,000 levels: %d %s, want 400 naming the depth", r.code, r.body)
				}
				// At the bound the patch is applied (and refused by
				// validation: annotations are strings).
				if r := c.do(http.MethodPatch, "/api/v1/namespaces/default/configmaps/deep", tc.contentType, tc.body(maxPatchDepth)); r.code == http.StatusBadRequest && strings.Contains(string(r.body), "levels deep") {
					t.Errorf("%d levels refused: %s", maxPatchDepth, r.body)
				}
			})
		}
	})
}

// TestObjectTooLarge: an object over the storage limit is refused alike on
// both backends, created or grown by an update, with a 413 that names the
// limit and nothing of the storage (no key, no etcd or gRPC text).
func TestObjectTooLarge(t *testing.T) {
	big := strings.Repeat("x", 2<<20)
	forEachBackend(t, func(t *testing.T, c *client) {
		check := func(what string, r response) {
			t.Helper()
			st := r.status(t)
			if r.code != http.StatusRequestEntityTooLarge || st.Reason != "RequestEntityTooLarge" {
				t.Errorf("%s: %d %s, want 413 RequestEntityTooLarge", what, r.code, r.body)
			}
			for _, leak := range []string{"/registry", "configmaps/", "rpc error", "etcdserver", "grpc"} {
				if strings.Contains(st.Message, leak) {
					t.Errorf("%s: message %q shows storage internals (%q)", what, st.Message, leak)
				}
			}
		}
		// Pod templates: no rule of their validation bounds a
		// container's arguments (config maps and secrets stop at 1 MiB).
		template := func(name, arg string) string {
			return `{"metadata":{"name":"` + name + `"},"template":{"spec":{"containers":[{"name":"c","image":"i","args":["` + arg + `"]}]}}}`
		}
		check("create", c.do(http.MethodPost, "/api/v1/namespaces/default/podtemplates", "", template("big", big)))
		c.mustDo(http.MethodPost, "/api/v1/namespaces/default/podtemplates", "", template("small", "a"), http.StatusCreated)
		check("merge patch", c.do(http.MethodPatch, "/api/v1/namespaces/default/podtemplates/small", "application/merge-patch+json",
			`{"template":{"spec":{"containers":[{"name":"c","image":"i","args":["`+big+`"]}]}}}`))
	})
}
