package apiserver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/listwatch/listwatch/internal/runtest"
)

// The fuzz targets below drive one write verb each through the whole
// HTTP write path (decoding, defaulting, admission, validation, storage)
// of one server shared by the iterations, so an iteration costs a request
// rather than a server. The contract checked is the server's: whatever
// the body, the answer is an object or a Status, never a panic or a 5xx.

// fuzzServer starts one server on the memory backend for a fuzz target,
// with a Pod "p" and a Foo "f" in namespace default to write to.
func fuzzServer(f *testing.F) string {
	f.Helper()
	srv, err := New(Config{
		Storage:                 backends[0].New(f),
		DisableAdmissionPlugins: []string{"ServiceAccount"},
	})
	if err != nil {
		f.Fatal(err)
	}
	objs, err := ParseManifests([]byte(fooCRD))
	if err != nil {
		f.Fatal(err)
	}
	stop := runtest.Start(f, srv)
	if err := srv.Apply(f.Context(), objs); err != nil {
		f.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	f.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		stop()
	})
	return hs.URL
}

// fuzzTarget is one object the fuzzed bodies are written to, recreated
// by each iteration so that a body that deleted or broke it does not make
// the following iterations test nothing.
type fuzzTarget struct {
	path, name, body string
}

var fuzzTargets = []fuzzTarget{
	{"/api/v1/namespaces/default/pods", "p", podBody(`{"name":"p"}`, "")},
	{"/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos", "f", `{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"f"},"spec":{"a":[1,2],"b":{"c":"d"}}}`},
}

// fuzzWrite writes body to every fuzz target as k writes it (a create
// to the target's collection, anything else to the object, recreated
// first when an earlier body deleted it), once per query suffix of k, and
// fails on a 5xx or an error answer that is not a Status.
func fuzzWrite(t *testing.T, base string, k writeKind, body string) {
	c := &client{t: t, base: base}
	if c.do("GET", "/api/v1/namespaces/default", "", "").code == http.StatusNotFound {
		// The server makes "default" at start; the fuzz target may come
		// first.
		if r := c.do("POST", "/api/v1/namespaces", "", `{"metadata":{"name":"default"}}`); r.code != http.StatusCreated && r.code != http.StatusConflict {
			t.Fatalf("create namespace default: %d %s", r.code, r.body)
		}
	}
	suffixes := k.suffixes
	if len(suffixes) == 0 {
		suffixes = []string{""}
	}
	for _, tg := range fuzzTargets {
		obj := tg.path + "/" + tg.name
		target := obj
		if k.collection {
			target = tg.path
		} else if r := c.do("GET", obj, "", ""); r.code == http.StatusNotFound {
			if r := c.do("POST", tg.path, "", tg.body); r.code != http.StatusCreated && r.code != http.StatusConflict {
				t.Fatalf("recreate %s: %d %s", obj, r.code, r.body)
			}
		}
		for _, suffix := range suffixes {
			r := c.do(k.method, target+suffix, k.contentType, body)
			if r.code >= 500 && (k.collection || !kubeApply500(r.body) && !kubeSMP500(r.body)) {
				t.Fatalf("%s %s %q: %d %s", k.method, target+suffix, body, r.code, r.body)
			}
			if r.code >= 400 && !bytes.Contains(r.body, []byte(`"kind":"Status"`)) {
				t.Fatalf("%s %s %q: error without a Status: %s", k.method, target+suffix, body, r.body)
			}
		}
	}
}

// kubeApply500 reports whether body is the 500 kube-apiserver itself
// answers to an apply configuration its schema cannot type (a field not
// declared, a value of the wrong type): managedfields' "failed to create
// typed patch object" error, which kube returns unwrapped (golden cases
// ssa-configmaps, ssa-fieldvalidation, ssa-crd-listmaps record it), and
// so does this server. Every other 5xx is a bug.
func kubeApply500(body []byte) bool {
	return bytes.Contains(body, []byte(`"message":"failed to create typed patch object (`))
}

// kubeSMP500 reports whether body is a 500 kube-apiserver answers to a
// strategic merge patch it cannot apply: strategicpatch's errors that its
// interpretStrategicMergePatchError passes through (a directive naming a
// field the Go type lacks, a list item without its merge key, an unknown
// $patch), answered with the error's text and no reason; golden case
// core-pods-patch-errors records each.
func kubeSMP500(body []byte) bool {
	for _, m := range []string{`"message":"unable to find api field in struct `, `does not contain declared merge key: `, `"message":"unknown patch type: `} {
		if bytes.Contains(body, []byte(m)) && !bytes.Contains(body, []byte(`"reason":`)) {
			return true
		}
	}
	return false
}

// writeKind is one way the write path takes a body: a verb, a content
// type and the query suffixes each body is sent with, with the seeds of
// its fuzz target.
type writeKind struct {
	name, method, contentType string
	// suffixes are appended to the object's path, e.g. "?fieldManager=x";
	// none sends the body once, without a query.
	suffixes []string
	// collection sends the body to the targets' collections (a create).
	collection bool
	seeds      []string
}

// writeKinds are the write path's inputs: whole objects (create, update),
// the three patch formats and server-side apply.
var writeKinds = []writeKind{
	{name: "create", method: "POST", collection: true, seeds: []string{
		podBody(`{"generateName":"g-"}`, ""), `{"metadata":{"name":"p"}}`, `{"metadata":5}`, `{"apiVersion":7}`, `[]`, `null`,
		`{"kind":"Foo","apiVersion":"samplecontroller.k8s.io/v1alpha1","metadata":{"generateName":"f-"},"spec":{"x":[{}]}}`,
		`{"metadata":{"name":"p","labels":{"a":{}}}}`, `{"metadata":{"generateName":"g-","finalizers":[1]}}`,
	}},
	{name: "update", method: "PUT", contentType: "application/json", seeds: []string{
		podBody(`{"name":"p"}`, ""), `{"metadata":{"name":"p","resourceVersion":"1"}}`, `{"metadata":{"name":"f"},"spec":null}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","ownerReferences":[{}]}}`, `{"metadata":{"name":"x"}}`, `[]`, `{`,
	}},
	{name: "json-patch", method: "PATCH", contentType: "application/json-patch+json", seeds: []string{
		`[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]`, `[{"op":"remove","path":"/spec"}]`,
		`[{"op":"move","from":"/metadata/name","path":"/metadata/generateName"}]`, `[{"op":"copy","from":"/spec","path":"/spec/x"}]`,
		`[{"op":"test","path":"/metadata/name","value":"p"},{"op":"replace","path":"/metadata/name","value":"q"}]`,
		`[{"op":"add","path":"/spec/containers/-","value":{"name":"d","image":"i"}}]`, `[{"op":"bogus"}]`, `{}`, `[]`,
	}},
	{name: "merge-patch", method: "PATCH", contentType: "application/merge-patch+json", seeds: []string{
		`{"metadata":{"labels":{"a":"b"}}}`, `{"spec":null}`, `{"metadata":{"name":null}}`, `{"spec":{"containers":[]}}`,
		`{"metadata":{"finalizers":["x/y"],"deletionTimestamp":"2020-01-01T00:00:00Z"}}`, `[]`, `null`, `{"status":{"phase":1}}`,
	}},
	// On the Foo the server answers a strategic merge patch 415, as kube
	// does.
	{name: "strategic-merge-patch", method: "PATCH", contentType: "application/strategic-merge-patch+json", seeds: []string{
		`{"metadata":{"labels":{"a":"b"}}}`, `{"spec":{"containers":[{"name":"c","$patch":"delete"}]}}`,
		`{"spec":{"$setElementOrder/containers":[{"name":"c"}],"containers":[{"name":"c","image":"j"}]}}`,
		`{"$patch":"replace","metadata":{"name":"p"}}`, `{"spec":{"$retainKeys":["containers"]}}`,
		`{"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}}`, `{"spec":{"containers":{"$patch":"merge"}}}`,
	}},
	// Apply configurations in JSON and YAML, with and without force.
	{name: "apply", method: "PATCH", contentType: "application/apply-patch+yaml", suffixes: []string{"?fieldManager=fuzz", "?fieldManager=other&force=true"}, seeds: []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"b"}}}`,
		`{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"f"},"spec":{"a":[3]}}`,
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: j\n",
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","managedFields":[{}]}}`, `{"kind":"Pod"}`, `&a [*a]`,
		`{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"f"},"spec":` + nestJSON(120, `"v"`) + `}`,
		"apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: f}\nspec:\n  a:\n    b:\n      c: [[[[{d: e}]]]]\n",
	}},
}

// writeKindNamed is the writeKind called name.
func writeKindNamed(name string) writeKind {
	for _, k := range writeKinds {
		if k.name == name {
			return k
		}
	}
	panic("no write kind " + name)
}

// fuzzKind fuzzes the bodies of one write kind.
func fuzzKind(f *testing.F, name string) {
	k := writeKindNamed(name)
	for _, s := range k.seeds {
		f.Add(s)
	}
	base := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body string) { fuzzWrite(t, base, k, body) })
}

// FuzzWrite fuzzes the whole write path at once: each input is a body
// and the write kind that sends it (create, update, each patch format,
// apply), so that one run covers what the targets below cover one at a
// time, and a body found for one kind is tried on the others.
func FuzzWrite(f *testing.F) {
	for i, k := range writeKinds {
		for _, s := range k.seeds {
			f.Add(uint8(i), s)
		}
	}
	base := fuzzServer(f)
	f.Fuzz(func(t *testing.T, kind uint8, body string) {
		fuzzWrite(t, base, writeKinds[int(kind)%len(writeKinds)], body)
	})
}

// FuzzCreate fuzzes POST to a collection on one server shared by the
// iterations (FuzzCreateBody starts one per body).
func FuzzCreate(f *testing.F) { fuzzKind(f, "create") }

// FuzzUpdate fuzzes PUT of a whole object.
func FuzzUpdate(f *testing.F) { fuzzKind(f, "update") }

// FuzzJSONPatch fuzzes RFC 6902 JSON patches.
func FuzzJSONPatch(f *testing.F) { fuzzKind(f, "json-patch") }

// FuzzMergePatch fuzzes RFC 7386 JSON merge patches.
func FuzzMergePatch(f *testing.F) { fuzzKind(f, "merge-patch") }

// FuzzStrategicMergePatch fuzzes strategic merge patches, directives
// included.
func FuzzStrategicMergePatch(f *testing.F) { fuzzKind(f, "strategic-merge-patch") }

// FuzzApply fuzzes server-side apply configurations.
func FuzzApply(f *testing.F) { fuzzKind(f, "apply") }

// TestJSONPatchTestWithoutValue: a "test" operation without a value, on
// which json-patch panics (FuzzJSONPatch's crasher), is a 422 that says
// so, at the root and at a path.
func TestJSONPatchTestWithoutValue(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	c.mustDo("POST", "/api/v1/namespaces/default/configmaps", "", `{"metadata":{"name":"cm"}}`, http.StatusCreated)
	for _, tc := range []struct{ patch, want string }{
		{`[{"op":"test","path":""}]`, `test operation for path \"\" has no value`},
		{`[{"op":"test","path":"/metadata/name"}]`, `test operation for path \"/metadata/name\" has no value`},
	} {
		r := c.do("PATCH", "/api/v1/namespaces/default/configmaps/cm", "application/json-patch+json", tc.patch)
		if r.code != http.StatusUnprocessableEntity || !bytes.Contains(r.body, []byte(tc.want)) {
			t.Errorf("%s: %d %s, want 422 %s", tc.patch, r.code, r.body, tc.want)
		}
	}
}
