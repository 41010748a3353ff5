package apiserver

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	gproto "google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kube-openapi/pkg/spec3"
	kproto "k8s.io/kube-openapi/pkg/util/proto"
	kvalidation "k8s.io/kube-openapi/pkg/util/proto/validation"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// openAPIRoot fetches /openapi/v3 and each document it lists, parsed as
// kubectl parses them (kube-openapi's spec3 types).
func openAPIRoot(t *testing.T, c *client) map[string]*spec3.OpenAPI {
	t.Helper()
	var root struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	r := c.do("GET", "/openapi/v3", "", "", "Accept", "application/json, */*")
	if r.code != 200 {
		t.Fatalf("/openapi/v3: %d %s", r.code, r.body)
	}
	if err := json.Unmarshal(r.body, &root); err != nil {
		t.Fatal(err)
	}
	docs := map[string]*spec3.OpenAPI{}
	for p, entry := range root.Paths {
		r := c.do("GET", entry.ServerRelativeURL, "", "", "Accept", "application/json")
		if r.code != 200 || r.hdr.Get("Content-Type") != "application/json" || r.hdr.Get("Cache-Control") != "public, immutable" {
			t.Fatalf("%s: %d %v", entry.ServerRelativeURL, r.code, r.hdr)
		}
		var doc spec3.OpenAPI
		if err := json.Unmarshal(r.body, &doc); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		docs[p] = &doc
	}
	return docs
}

// patchOp finds the PATCH operation of a kind the way kubectl does: by its
// x-kubernetes-group-version-kind.
func patchOp(doc *spec3.OpenAPI, group, version, kind string) (*spec3.Operation, string) {
	for path, item := range doc.Paths.Paths {
		if item.Patch == nil || strings.HasSuffix(path, "/status") || strings.HasSuffix(path, "/scale") {
			continue
		}
		var gvk map[string]string
		if err := item.Patch.Extensions.GetObject("x-kubernetes-group-version-kind", &gvk); err != nil {
			continue
		}
		if gvk["group"] == group && gvk["version"] == version && gvk["kind"] == kind {
			return item.Patch, path
		}
	}
	return nil, ""
}

// kindSchema finds the component schema of a kind as kubectl apply does.
func kindSchema(doc *spec3.OpenAPI, group, version, kind string) *spec.Schema {
	for _, s := range doc.Components.Schemas {
		var gvks []map[string]string
		if err := s.Extensions.GetObject("x-kubernetes-group-version-kind", &gvks); err != nil {
			continue
		}
		for _, gvk := range gvks {
			if gvk["group"] == group && gvk["version"] == version && gvk["kind"] == kind {
				return s
			}
		}
	}
	return nil
}

// TestOpenAPI checks the documents of one server (they do not depend on
// the storage backend), as kubectl and other clients read them.
func TestOpenAPI(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	docs := openAPIRoot(t, c)
	for _, sub := range []struct {
		name string
		test func(t *testing.T, c *client, docs map[string]*spec3.OpenAPI)
	}{
		{"index and kubectl's reads", testOpenAPIIndex},
		{"v2 for kubectl's validation", testOpenAPIV2},
		{"definitions", testOpenAPIDefinitions},
		{"paths", testOpenAPIPaths},
	} {
		t.Run(sub.name, func(t *testing.T) {
			sc := *c
			sc.t = t
			sub.test(t, &sc, docs)
		})
	}
}

// testOpenAPIIndex checks the index, the documents' negotiation and caching,
// and what kubectl looks for in them: a kind's PATCH operation and whether
// it takes fieldValidation and strategic merge patches, and merge keys that
// make the same strategic merge patches as the Go types.
func testOpenAPIIndex(t *testing.T, c *client, docs map[string]*spec3.OpenAPI) {
	kinds := []struct {
		doc, group, version, kind, path string
		smp                             bool
	}{
		{"api/v1", "", "v1", "Pod", "/api/v1/namespaces/{namespace}/pods/{name}", true},
		{"api/v1", "", "v1", "ReplicationController", "/api/v1/namespaces/{namespace}/replicationcontrollers/{name}", true},
		{"api/v1", "", "v1", "Namespace", "/api/v1/namespaces/{name}", true},
		{"api/v1", "", "v1", "Service", "/api/v1/namespaces/{namespace}/services/{name}", true},
		{"api/v1", "", "v1", "Endpoints", "/api/v1/namespaces/{namespace}/endpoints/{name}", true},
		{"api/v1", "", "v1", "Event", "/api/v1/namespaces/{namespace}/events/{name}", true},
		{"apis/apps/v1", "apps", "v1", "Deployment", "/apis/apps/v1/namespaces/{namespace}/deployments/{name}", true},
		{"apis/coordination.k8s.io/v1", "coordination.k8s.io", "v1", "Lease", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}", true},
		{"apis/samplecontroller.k8s.io/v1alpha1", "samplecontroller.k8s.io", "v1alpha1", "Foo", "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{namespace}/foos/{name}", false},
	}
	// As kube-apiserver: one document per group/version served, as
	// discovery lists them, and one per discovery path (/api, /apis,
	// /apis/<group>) and for /version.
	want := map[string]bool{"api": true, "apis": true, "version": true}
	for _, v := range toStrings(c.mustDo("GET", "/api", "", "", 200)["versions"]) {
		want["api/"+v] = true
	}
	groups, _ := c.mustDo("GET", "/apis", "", "", 200)["groups"].([]any)
	for _, g := range groups {
		if name := str(g.(map[string]any), "name"); name != fooResource.Group {
			// Not for the group of custom resources.
			want["apis/"+name] = true
		}
		vs, _ := g.(map[string]any)["versions"].([]any)
		for _, v := range vs {
			want["apis/"+str(v.(map[string]any), "groupVersion")] = true
		}
	}
	if len(docs) != len(want) {
		t.Errorf("%d documents, want %d", len(docs), len(want))
	}
	for gv := range want {
		if docs[gv] == nil {
			t.Errorf("no document for %s", gv)
		}
	}
	for _, k := range kinds {
		doc := docs[k.doc]
		if doc == nil {
			t.Fatalf("no document %s", k.doc)
		}
		op, path := patchOp(doc, k.group, k.version, k.kind)
		if op == nil || path != k.path {
			t.Errorf("%s: PATCH at %q, want %s", k.kind, path, k.path)
			continue
		}
		// What kubectl's field validation check looks for.
		hasFV := false
		for _, p := range op.Parameters {
			if p.Name == "fieldValidation" && p.In == "query" {
				hasFV = true
			}
		}
		if !hasFV {
			t.Errorf("%s: PATCH lacks the fieldValidation parameter", k.kind)
		}
		// What kubectl apply's strategic merge patch check looks for.
		_, smp := op.RequestBody.Content["application/strategic-merge-patch+json"]
		if smp != k.smp {
			t.Errorf("%s: strategic merge patch offered %v, want %v", k.kind, smp, k.smp)
		}
		if kindSchema(doc, k.group, k.version, k.kind) == nil {
			t.Errorf("%s: no component schema with its group-version-kind", k.kind)
		}
		if doc.Paths.Paths[strings.TrimSuffix(k.path, "/{name}")].Post == nil {
			t.Errorf("%s: no create operation", k.kind)
		}
	}
	if item := docs["api/v1"].Paths.Paths["/api/v1/namespaces/{namespace}/pods/{name}/binding"]; item == nil || item.Post == nil {
		t.Errorf("no pods/binding operation")
	}
	if item := docs["api/v1"].Paths.Paths["/api/v1/namespaces/{namespace}/replicationcontrollers/{name}/scale"]; item == nil || item.Patch == nil {
		t.Errorf("no replicationcontrollers/scale operation")
	}

	// The schemas must be the truth about the types: the strategic
	// merge patch kubectl computes from them equals the one computed
	// from the Go structs the server patches with.
	smpCases := []struct {
		name, doc, group, kind      string
		typed                       any
		original, modified, current string
	}{
		{
			name: "pod containers and volumes", doc: "api/v1", kind: "Pod", typed: &corev1.Pod{},
			original: `{"metadata":{"name":"p","labels":{"a":"1"}},"spec":{"containers":[{"name":"a","image":"x:1","ports":[{"containerPort":80}],"env":[{"name":"E","value":"1"}]},{"name":"b","image":"y"}],"volumes":[{"name":"v","emptyDir":{}}]}}`,
			modified: `{"metadata":{"name":"p","labels":{"a":"2"}},"spec":{"containers":[{"name":"a","image":"x:2","ports":[{"containerPort":8080}],"env":[{"name":"E","value":"2"},{"name":"F","value":"3"}]}],"volumes":[{"name":"w","emptyDir":{}}],"tolerations":[{"key":"k","operator":"Exists"}]}}`,
			current:  `{"metadata":{"name":"p","labels":{"a":"1","b":"x"}},"spec":{"containers":[{"name":"a","image":"x:1","ports":[{"containerPort":80}],"env":[{"name":"E","value":"1"}]},{"name":"b","image":"y"},{"name":"sidecar","image":"z"}],"volumes":[{"name":"v","emptyDir":{}}],"nodeName":"n1"}}`,
		},
		{
			name: "deployment template", doc: "apis/apps/v1", group: "apps", kind: "Deployment", typed: &appsv1.Deployment{},
			original: `{"metadata":{"name":"d"},"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"a","image":"x:1","resources":{"limits":{"cpu":"1"}}}]}}}}`,
			modified: `{"metadata":{"name":"d"},"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"a","image":"x:2","resources":{"limits":{"cpu":"2"}}}],"imagePullSecrets":[{"name":"s"}]}}}}`,
			current:  `{"metadata":{"name":"d"},"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"a","image":"x:1","resources":{"limits":{"cpu":"1"}}}]}}},"status":{"replicas":1}}`,
		},
	}
	for _, tc := range smpCases {
		doc := docs[tc.doc]
		s := kindSchema(doc, tc.group, "v1", tc.kind)
		if s == nil {
			t.Fatalf("%s: no schema", tc.name)
		}
		fromOpenAPI, err := strategicpatch.CreateThreeWayMergePatch([]byte(tc.original), []byte(tc.modified), []byte(tc.current),
			strategicpatch.PatchMetaFromOpenAPIV3{Schema: s, SchemaList: doc.Components.Schemas}, false)
		if err != nil {
			t.Fatalf("%s: patch from the served schema: %v", tc.name, err)
		}
		meta, err := strategicpatch.NewPatchMetaFromStruct(tc.typed)
		if err != nil {
			t.Fatal(err)
		}
		fromStruct, err := strategicpatch.CreateThreeWayMergePatch([]byte(tc.original), []byte(tc.modified), []byte(tc.current), meta, false)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		_ = json.Unmarshal(fromOpenAPI, &a)
		_ = json.Unmarshal(fromStruct, &b)
		if !jsonEqual(a, b) {
			t.Errorf("%s: patch from OpenAPI\n%s\nfrom the Go type\n%s", tc.name, fromOpenAPI, fromStruct)
		}
		if !strings.Contains(string(fromOpenAPI), "$setElementOrder/containers") {
			t.Errorf("%s: patch %s lacks the merge-key directives", tc.name, fromOpenAPI)
		}
	}

	// Caching and negotiation.
	var root struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(c.do("GET", "/openapi/v3", "", "").body, &root); err != nil {
		t.Fatal(err)
	}
	u := root.Paths["api/v1"].ServerRelativeURL
	first := c.do("GET", u, "", "")
	etag := first.hdr.Get("Etag")
	const v3Proto = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
	checks := []struct {
		name, method, path string
		hdr                []string
		code               int
		// contentType and cacheControl are the headers wanted, when
		// not "".
		contentType, cacheControl string
	}{
		{"not modified", "GET", u, []string{"If-None-Match", etag}, http.StatusNotModified, "", ""},
		{"without hash", "GET", "/openapi/v3/api/v1", nil, http.StatusOK, "application/json", "no-cache, private"},
		{"protobuf", "GET", u, []string{"Accept", v3Proto}, http.StatusOK, v3Proto, "public, immutable"},
		{"protobuf, legacy name", "GET", u, []string{"Accept", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"}, http.StatusOK, v3Proto, ""},
		{"html only", "GET", u, []string{"Accept", "text/html"}, http.StatusNotAcceptable, "", ""},
		{"unknown group", "GET", "/openapi/v3/apis/nope/v1", nil, http.StatusNotFound, "", ""},
		{"stale hash", "GET", "/openapi/v3/api/v1?hash=0123", nil, http.StatusMovedPermanently, "", ""},
		{"post", "POST", u, nil, http.StatusMethodNotAllowed, "", ""},
	}
	for _, ck := range checks {
		r := c.doNoRedirect(ck.method, ck.path, ck.hdr...)
		if r.code != ck.code {
			t.Errorf("%s: %d, want %d", ck.name, r.code, ck.code)
		}
		if ck.contentType != "" && r.hdr.Get("Content-Type") != ck.contentType {
			t.Errorf("%s: Content-Type %q, want %q", ck.name, r.hdr.Get("Content-Type"), ck.contentType)
		}
		if ck.cacheControl != "" && r.hdr.Get("Cache-Control") != ck.cacheControl {
			t.Errorf("%s: Cache-Control %q, want %q", ck.name, r.hdr.Get("Cache-Control"), ck.cacheControl)
		}
		if ck.code == http.StatusMovedPermanently && r.hdr.Get("Location") != u {
			t.Errorf("%s: redirected to %q, want %s", ck.name, r.hdr.Get("Location"), u)
		}
	}
	if etag == "" || !strings.HasSuffix(u, strings.Trim(etag, `"`)) {
		t.Errorf("etag %q does not match %s", etag, u)
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// testOpenAPIV2 checks /openapi/v2 as kubectl's client-side validation
// reads it (protobuf), and its other forms.
func testOpenAPIV2(t *testing.T, c *client, _ map[string]*spec3.OpenAPI) {
	// kubectl's request: the protobuf form, by its historical name.
	r := c.do("GET", "/openapi/v2", "", "", "Accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
	if r.code != 200 || r.hdr.Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" {
		t.Fatalf("/openapi/v2: %d %v", r.code, r.hdr)
	}
	var doc openapiv2.Document
	if err := gproto.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	// What kubectl's client-side validation builds and runs.
	models, err := kproto.NewOpenAPIData(&doc)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, model, obj string
		wantErr          string
	}{
		{"valid rc", "io.k8s.api.core.v1.ReplicationController",
			`{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"x","labels":{"a":"b"}},"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":1,"memory":"1Gi"}},"ports":[{"containerPort":80}]}]}}}}`, ""},
		{"unknown nested field", "io.k8s.api.core.v1.ReplicationController",
			`{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[{"name":"c","imagee":"i"}]}}}}`, `unknown field "imagee" in io.k8s.api.core.v1.Container`},
		{"wrong type", "io.k8s.api.apps.v1.Deployment",
			`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},"spec":{"replicas":"two"}}`, "spec.replicas"},
		{"custom resource keeps unknown fields", "io.k8s.samplecontroller.v1alpha1.Foo",
			`{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"x"},"spec":{"deploymentName":"d","replicas":1}}`, ""},
		{"int-or-string", "io.k8s.api.core.v1.Service",
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"x"},"spec":{"ports":[{"port":80,"targetPort":"http"},{"port":81,"targetPort":8081}]}}`, ""},
	}
	for _, tt := range tests {
		model := models.LookupModel(tt.model)
		if model == nil {
			t.Fatalf("%s: no model %s", tt.name, tt.model)
		}
		var obj any
		if err := json.Unmarshal([]byte(tt.obj), &obj); err != nil {
			t.Fatal(err)
		}
		errs := kvalidation.ValidateModel(obj, model, tt.model)
		switch {
		case tt.wantErr == "" && len(errs) > 0:
			t.Errorf("%s: %v", tt.name, errs)
		case tt.wantErr != "" && (len(errs) == 0 || !strings.Contains(fmt.Sprint(errs), tt.wantErr)):
			t.Errorf("%s: errors %v, want %q", tt.name, errs, tt.wantErr)
		}
	}
	// JSON for everyone else.
	r = c.do("GET", "/openapi/v2", "", "", "Accept", "application/json")
	var js map[string]any
	if err := json.Unmarshal(r.body, &js); err != nil || js["swagger"] != "2.0" || r.hdr.Get("Content-Type") != "application/json" {
		t.Errorf("json v2: %v %v", err, r.hdr)
	}
	if r := c.do("GET", "/openapi/v2", "", "", "Accept", "text/html"); r.code != http.StatusNotAcceptable {
		t.Errorf("html: %d", r.code)
	}
}

// doNoRedirect is do without following redirects, and without a body.
func (c *client) doNoRedirect(method, path string, hdr ...string) response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{code: resp.StatusCode, body: b, hdr: resp.Header}
}

// openAPIV2JSON fetches /openapi/v2 as JSON.
func openAPIV2JSON(t *testing.T, c *client) *spec.Swagger {
	t.Helper()
	r := c.do("GET", "/openapi/v2", "", "", "Accept", "application/json")
	if r.code != http.StatusOK {
		t.Fatalf("/openapi/v2: %d %s", r.code, r.body)
	}
	var sw spec.Swagger
	if err := json.Unmarshal(r.body, &sw); err != nil {
		t.Fatal(err)
	}
	return &sw
}

// openAPIIndex fetches /openapi/v3: document path → its URL with hash.
func openAPIIndex(t *testing.T, c *client) map[string]string {
	t.Helper()
	var root struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	r := c.do("GET", "/openapi/v3", "", "")
	if err := json.Unmarshal(r.body, &root); err != nil || r.code != http.StatusOK {
		t.Fatalf("/openapi/v3: %d %v %s", r.code, err, r.body)
	}
	out := map[string]string{}
	for p, e := range root.Paths {
		out[p] = e.ServerRelativeURL
	}
	return out
}

// schemaAt walks properties (and array items) from a named schema, following
// references as kubectl explain does.
func schemaAt(defs map[string]spec.Schema, name, path string) (spec.Schema, error) {
	s, ok := defs[name]
	if !ok {
		return spec.Schema{}, fmt.Errorf("no definition %s", name)
	}
	for _, field := range strings.Split(path, ".") {
		if field == "" {
			continue
		}
		p, ok := s.Properties[field]
		if !ok {
			return spec.Schema{}, fmt.Errorf("%s: no property %q", name, field)
		}
		s = p
	}
	return s, nil
}

// refName is the definition a schema refers to, directly or through allOf
// (v3 wraps a reference that has siblings).
func refName(s spec.Schema) string {
	r := s.Ref.String()
	if r == "" && len(s.AllOf) == 1 {
		r = s.AllOf[0].Ref.String()
	}
	return r[strings.LastIndex(r, "/")+1:]
}

// testOpenAPIDefinitions checks that the documents carry Kubernetes' own
// definitions: descriptions, list types and map keys, patch strategies and
// merge keys, formats and group-version-kinds, in v3 and v2 alike.
func testOpenAPIDefinitions(t *testing.T, c *client, docs map[string]*spec3.OpenAPI) {
	v2 := openAPIV2JSON(t, c)
	tests := []struct {
		doc, def, path string
		// description is a part of the field's (or type's) description.
		description string
		listType    string
		mapKeys     []string
		// mergeKey and strategy are the strategic merge patch's.
		mergeKey, strategy string
		// format of a scalar; ref the definition a field refers to.
		format, ref string
		// gvk of the definition itself (group/version/kind).
		gvk string
	}{
		{doc: "api/v1", def: "io.k8s.api.core.v1.PodSpec", path: "containers",
			description: "List of containers belonging to the pod.", listType: "map", mapKeys: []string{"name"}, mergeKey: "name", strategy: "merge"},
		{doc: "api/v1", def: "io.k8s.api.core.v1.Container", path: "ports",
			description: "List of ports to expose from the container.", listType: "map", mapKeys: []string{"containerPort", "protocol"}, mergeKey: "containerPort", strategy: "merge"},
		{doc: "api/v1", def: "io.k8s.api.core.v1.ServiceSpec", path: "ports",
			description: "The list of ports that are exposed by this service.", listType: "map", mapKeys: []string{"port", "protocol"}, mergeKey: "port", strategy: "merge"},
		{doc: "api/v1", def: "io.k8s.api.core.v1.PodSpec", path: "tolerations",
			description: "If specified, the pod's tolerations.", listType: "atomic"},
		{doc: "api/v1", def: "io.k8s.api.core.v1.Pod", path: "",
			description: "Pod is a collection of containers that can run on a host.", gvk: "/v1/Pod"},
		{doc: "api/v1", def: "io.k8s.api.core.v1.Node", path: "spec",
			description: "Spec defines the behavior of a node.", ref: "io.k8s.api.core.v1.NodeSpec"},
		{doc: "api/v1", def: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", path: "ownerReferences",
			description: "List of objects depended by this object.", listType: "map", mapKeys: []string{"uid"}, mergeKey: "uid", strategy: "merge"},
		{doc: "api/v1", def: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", path: "creationTimestamp",
			description: "CreationTimestamp is a timestamp", ref: "io.k8s.apimachinery.pkg.apis.meta.v1.Time"},
		{doc: "apis/apps/v1", def: "io.k8s.api.apps.v1.DeploymentSpec", path: "replicas",
			description: "Number of desired pods.", format: "int32"},
		{doc: "apis/apps/v1", def: "io.k8s.api.apps.v1.Deployment", path: "",
			description: "Deployment enables declarative updates for Pods and ReplicaSets.", gvk: "apps/v1/Deployment"},
		{doc: "apis/apps/v1", def: "io.k8s.api.autoscaling.v1.Scale", path: "",
			description: "Scale represents a scaling request for a resource.", gvk: "autoscaling/v1/Scale"},
		{doc: "apis/coordination.k8s.io/v1", def: "io.k8s.api.coordination.v1.LeaseSpec", path: "renewTime",
			description: "renewTime is a time when the current holder", ref: "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"},
		{doc: "apis/rbac.authorization.k8s.io/v1", def: "io.k8s.api.rbac.v1.ClusterRole", path: "rules",
			description: "rules holds all the PolicyRules for this ClusterRole", listType: "atomic"},
		{doc: "apis/samplecontroller.k8s.io/v1alpha1", def: "io.k8s.samplecontroller.v1alpha1.Foo", path: "",
			gvk: "samplecontroller.k8s.io/v1alpha1/Foo"},
	}
	for _, tt := range tests {
		doc := docs[tt.doc]
		if doc == nil {
			t.Fatalf("no document %s", tt.doc)
		}
		v3defs := map[string]spec.Schema{}
		for name, s := range doc.Components.Schemas {
			v3defs[name] = *s
		}
		for _, d := range []struct {
			version string
			defs    map[string]spec.Schema
		}{{"v3 " + tt.doc, v3defs}, {"v2", v2.Definitions}} {
			name := fmt.Sprintf("%s %s.%s", d.version, tt.def, tt.path)
			s, err := schemaAt(d.defs, tt.def, tt.path)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if !strings.Contains(s.Description, tt.description) {
				t.Errorf("%s: description %q, want it to contain %q", name, s.Description, tt.description)
			}
			ext := func(key string) any { v, _ := s.Extensions.GetString(key); return v }
			if got := ext("x-kubernetes-list-type"); tt.listType != "" && got != tt.listType {
				t.Errorf("%s: list type %v, want %s", name, got, tt.listType)
			}
			var keys []string
			if err := s.Extensions.GetObject("x-kubernetes-list-map-keys", &keys); err != nil || !slices.Equal(keys, tt.mapKeys) {
				t.Errorf("%s: list map keys %v (%v), want %v", name, keys, err, tt.mapKeys)
			}
			if got := ext("x-kubernetes-patch-merge-key"); got != tt.mergeKey {
				t.Errorf("%s: patch merge key %q, want %q", name, got, tt.mergeKey)
			}
			if got := ext("x-kubernetes-patch-strategy"); got != tt.strategy {
				t.Errorf("%s: patch strategy %q, want %q", name, got, tt.strategy)
			}
			if s.Format != tt.format {
				t.Errorf("%s: format %q, want %q", name, s.Format, tt.format)
			}
			if got := refName(s); got != tt.ref {
				t.Errorf("%s: refers to %q, want %q", name, got, tt.ref)
			}
			if tt.gvk != "" {
				var gvks []map[string]string
				_ = s.Extensions.GetObject("x-kubernetes-group-version-kind", &gvks)
				found := false
				for _, g := range gvks {
					found = found || g["group"]+"/"+g["version"]+"/"+g["kind"] == tt.gvk
				}
				if !found {
					t.Errorf("%s: group-version-kinds %v, want %s among them", name, gvks, tt.gvk)
				}
			}
		}
	}
}

// testOpenAPIPaths checks the operations of a namespaced and a
// cluster-scoped resource and of subresources, as kube-apiserver names and
// parameterises them, in v3 and v2.
func testOpenAPIPaths(t *testing.T, c *client, docs map[string]*spec3.OpenAPI) {
	v2 := openAPIV2JSON(t, c)
	tests := []struct {
		doc, path, method, operationID string
		// params are parameters of the operation or its path.
		params []string
		// kind is the operation's x-kubernetes-group-version-kind.
		kind string
		// response is the definition of the 200 (or 201) response.
		response string
	}{
		{"api/v1", "/api/v1/namespaces/{namespace}/pods", "get", "listCoreV1NamespacedPod",
			[]string{"namespace", "pretty", "labelSelector", "fieldSelector", "limit", "continue", "watch", "allowWatchBookmarks", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds"},
			"/v1/Pod", "io.k8s.api.core.v1.PodList"},
		{"api/v1", "/api/v1/namespaces/{namespace}/pods", "post", "createCoreV1NamespacedPod",
			[]string{"namespace", "dryRun", "fieldManager", "fieldValidation"}, "/v1/Pod", "io.k8s.api.core.v1.Pod"},
		{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}", "patch", "patchCoreV1NamespacedPod",
			[]string{"name", "namespace", "dryRun", "fieldManager", "fieldValidation", "force"}, "/v1/Pod", "io.k8s.api.core.v1.Pod"},
		{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}", "delete", "deleteCoreV1NamespacedPod",
			[]string{"name", "namespace", "gracePeriodSeconds", "propagationPolicy", "dryRun"}, "/v1/Pod", "io.k8s.api.core.v1.Pod"},
		{"api/v1", "/api/v1/pods", "get", "listCoreV1PodForAllNamespaces", []string{"labelSelector", "watch"}, "/v1/Pod", "io.k8s.api.core.v1.PodList"},
		{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}/status", "put", "replaceCoreV1NamespacedPodStatus",
			[]string{"name", "namespace", "fieldManager"}, "/v1/Pod", "io.k8s.api.core.v1.Pod"},
		{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}/binding", "post", "createCoreV1NamespacedPodBinding",
			[]string{"name", "namespace", "dryRun"}, "/v1/Binding", "io.k8s.api.core.v1.Binding"},
		{"api/v1", "/api/v1/namespaces/{namespace}/replicationcontrollers/{name}/scale", "patch", "patchCoreV1NamespacedReplicationControllerScale",
			[]string{"name", "namespace"}, "autoscaling/v1/Scale", "io.k8s.api.autoscaling.v1.Scale"},
		{"api/v1", "/api/v1/nodes", "delete", "deleteCoreV1CollectionNode",
			[]string{"labelSelector", "gracePeriodSeconds"}, "/v1/Node", "io.k8s.apimachinery.pkg.apis.meta.v1.Status"},
		{"api/v1", "/api/v1/nodes/{name}", "get", "readCoreV1Node", []string{"name", "pretty"}, "/v1/Node", "io.k8s.api.core.v1.Node"},
		{"api/v1", "/api/v1/namespaces/{name}/finalize", "put", "replaceCoreV1NamespaceFinalize", []string{"name"}, "/v1/Namespace", "io.k8s.api.core.v1.Namespace"},
		{"api/v1", "/api/v1/namespaces/{name}", "delete", "deleteCoreV1Namespace", []string{"name"}, "/v1/Namespace", "io.k8s.apimachinery.pkg.apis.meta.v1.Status"},
		{"apis/apps/v1", "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", "get", "readAppsV1NamespacedDeploymentScale",
			[]string{"name", "namespace"}, "autoscaling/v1/Scale", "io.k8s.api.autoscaling.v1.Scale"},
		{"apis/rbac.authorization.k8s.io/v1", "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}", "put", "replaceRbacAuthorizationV1ClusterRole",
			[]string{"name"}, "rbac.authorization.k8s.io/v1/ClusterRole", "io.k8s.api.rbac.v1.ClusterRole"},
		{"apis/samplecontroller.k8s.io/v1alpha1", "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{namespace}/foos/{name}/status", "patch", "patchSamplecontrollerV1alpha1NamespacedFooStatus",
			[]string{"name", "namespace", "fieldValidation"}, "samplecontroller.k8s.io/v1alpha1/Foo", "io.k8s.samplecontroller.v1alpha1.Foo"},
		{"apis/apps", "/apis/apps/", "get", "getAppsAPIGroup", nil, "", "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup"},
		{"apis/apps/v1", "/apis/apps/v1/", "get", "getAppsV1APIResources", nil, "", "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList"},
		{"version", "/version/", "get", "getCodeVersion", nil, "", "io.k8s.apimachinery.pkg.version.Info"},
	}
	for _, tt := range tests {
		name := tt.method + " " + tt.path
		// v3
		item := docs[tt.doc].Paths.Paths[tt.path]
		if item == nil {
			t.Errorf("v3 %s: no path", name)
			continue
		}
		ops := map[string]*spec3.Operation{"get": item.Get, "post": item.Post, "put": item.Put, "patch": item.Patch, "delete": item.Delete}
		op := ops[tt.method]
		if op == nil {
			t.Errorf("v3 %s: no operation", name)
			continue
		}
		if op.OperationId != tt.operationID {
			t.Errorf("v3 %s: operationId %q, want %q", name, op.OperationId, tt.operationID)
		}
		params := map[string]bool{}
		for _, p := range append(append([]*spec3.Parameter{}, item.Parameters...), op.Parameters...) {
			params[p.Name] = true
		}
		for _, p := range tt.params {
			if !params[p] {
				t.Errorf("v3 %s: no parameter %s", name, p)
			}
		}
		var gvk map[string]string
		_ = op.Extensions.GetObject("x-kubernetes-group-version-kind", &gvk)
		if got := gvk["group"] + "/" + gvk["version"] + "/" + gvk["kind"]; tt.kind != "" && got != tt.kind {
			t.Errorf("v3 %s: group-version-kind %s, want %s", name, got, tt.kind)
		}
		resp := op.Responses.StatusCodeResponses[200]
		if resp == nil {
			resp = op.Responses.StatusCodeResponses[201]
		}
		if resp == nil || resp.Content["application/json"] == nil || refName(*resp.Content["application/json"].Schema) != tt.response {
			t.Errorf("v3 %s: response is not %s", name, tt.response)
		}
		if op.Responses.StatusCodeResponses[401] == nil {
			t.Errorf("v3 %s: no 401 response", name)
		}

		// v2
		item2, ok := v2.Paths.Paths[tt.path]
		if !ok {
			t.Errorf("v2 %s: no path", name)
			continue
		}
		ops2 := map[string]*spec.Operation{"get": item2.Get, "post": item2.Post, "put": item2.Put, "patch": item2.Patch, "delete": item2.Delete}
		op2 := ops2[tt.method]
		if op2 == nil || op2.ID != tt.operationID {
			t.Errorf("v2 %s: no operation %s", name, tt.operationID)
		}
	}

	// Only what the server serves: no log, exec or proxy subresource, no
	// deprecated /watch/ path.
	for _, p := range []string{
		"/api/v1/namespaces/{namespace}/pods/{name}/log",
		"/api/v1/namespaces/{namespace}/pods/{name}/exec",
		"/api/v1/nodes/{name}/proxy",
		"/api/v1/watch/namespaces/{namespace}/pods",
	} {
		if _, ok := docs["api/v1"].Paths.Paths[p]; ok {
			t.Errorf("v3 documents %s, which the server does not serve", p)
		}
		if _, ok := v2.Paths.Paths[p]; ok {
			t.Errorf("v2 documents %s, which the server does not serve", p)
		}
	}
}

// TestOpenAPIIndexHashes checks that every document's URL in the index
// carries the hash of that document, and that publishing, changing and
// withdrawing a custom resource at run time changes the index, the
// documents and /openapi/v2 as it should and nothing else.
func TestOpenAPIIndexHashes(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	const gv = "apis/stable.example.com/v1"
	// hashes reads the index, checking the hashes of every document when
	// all is set, of the custom resource's otherwise.
	hashes := func(all bool) map[string]string {
		t.Helper()
		out := map[string]string{}
		for p, u := range openAPIIndex(t, c) {
			_, hash, _ := strings.Cut(u, "?hash=")
			out[p] = hash
			if !all && p != gv {
				continue
			}
			r := c.do("GET", u, "", "")
			sum := sha512.Sum512(r.body)
			if want := fmt.Sprintf("%X", sum[:]); r.code != http.StatusOK || hash != want || r.hdr.Get("Etag") != `"`+want+`"` {
				t.Errorf("%s: %d, hash %s, Etag %s; the body's is %s", p, r.code, hash, r.hdr.Get("Etag"), want)
			}
		}
		return out
	}
	before := hashes(true)
	v2Before := c.do("GET", "/openapi/v2", "", "", "Accept", "application/json").hdr.Get("Etag")

	crd := func(description string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "crontabs.stable.example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "stable.example.com",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "crontabs", Singular: "crontab", Kind: "CronTab", ListKind: "CronTabList"},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"cronSpec": {Type: "string", Description: description},
								"replicas": {Type: "integer", Format: "int32"},
							}},
						},
					}},
					Subresources: &apiextensionsv1.CustomResourceSubresources{
						Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
						Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"},
					},
				}},
			},
		}
	}
	// cronSpec returns the description of the custom resource's field in
	// v3 and v2 ("" when absent), and the Etag of /openapi/v2.
	cronSpec := func(t *testing.T) (v3, v2, v2Etag string) {
		t.Helper()
		var doc spec3.OpenAPI
		if r := c.do("GET", "/openapi/v3/"+gv, "", ""); r.code != http.StatusNotFound {
			if err := json.Unmarshal(r.body, &doc); err != nil {
				t.Fatalf("%s: %d %v %s", gv, r.code, err, r.body)
			}
		}
		if doc.Components != nil {
			if s, err := schemaAt(map[string]spec.Schema{"CronTab": *doc.Components.Schemas["com.example.stable.v1.CronTab"]}, "CronTab", "spec.cronSpec"); err == nil {
				v3 = s.Description
			}
		}
		r := c.do("GET", "/openapi/v2", "", "", "Accept", "application/json")
		var sw struct {
			Definitions map[string]json.RawMessage `json:"definitions"`
		}
		if err := json.Unmarshal(r.body, &sw); err != nil {
			t.Fatal(err)
		}
		var def spec.Schema
		if raw, ok := sw.Definitions["com.example.stable.v1.CronTab"]; ok {
			if err := json.Unmarshal(raw, &def); err != nil {
				t.Fatal(err)
			}
		}
		if s, err := schemaAt(map[string]spec.Schema{"CronTab": def}, "CronTab", "spec.cronSpec"); err == nil {
			v2 = s.Description
		}
		return v3, v2, r.hdr.Get("Etag")
	}

	steps := []struct {
		name   string
		change func() error
		// present: the custom resource's document is listed; description:
		// its field's description in v3 and v2 ("" when absent).
		present     bool
		description string
	}{
		{"publish", func() error { return c.srv.SetCustomResourceOpenAPI(crd("The cron schedule.")) }, true, "The cron schedule."},
		{"change", func() error { return c.srv.SetCustomResourceOpenAPI(crd("When to run.")) }, true, "When to run."},
		{"withdraw", func() error { c.srv.RemoveCustomResourceOpenAPI("crontabs.stable.example.com"); return nil }, false, ""},
		{"withdraw again", func() error { c.srv.RemoveCustomResourceOpenAPI("crontabs.stable.example.com"); return nil }, false, ""},
	}
	prevCR := ""
	for _, st := range steps {
		if err := st.change(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		now := hashes(false)
		for p, h := range before {
			if now[p] != h {
				t.Errorf("%s: the hash of %s changed", st.name, p)
			}
		}
		h, present := now[gv]
		if present != st.present || len(now) != len(before)+map[bool]int{true: 1}[st.present] {
			t.Errorf("%s: %d documents, %s listed: %v", st.name, len(now), gv, present)
		}
		if present && h == prevCR {
			t.Errorf("%s: the hash of %s did not change", st.name, gv)
		}
		prevCR = h
		if !present {
			if r := c.do("GET", "/openapi/v3/"+gv, "", ""); r.code != http.StatusNotFound {
				t.Errorf("%s: GET %s: %d, want 404", st.name, gv, r.code)
			}
		}
		v3, v2, v2Etag := cronSpec(t)
		if v3 != st.description || v2 != st.description {
			t.Errorf("%s: description %q in v3, %q in v2, want %q", st.name, v3, v2, st.description)
		}
		if (v2Etag == v2Before) == st.present {
			t.Errorf("%s: /openapi/v2 Etag %s, %s before", st.name, v2Etag, v2Before)
		}
	}
	if item := func() *spec3.Path {
		_ = c.srv.SetCustomResourceOpenAPI(crd("x"))
		var doc spec3.OpenAPI
		_ = json.Unmarshal(c.do("GET", "/openapi/v3/"+gv, "", "").body, &doc)
		if doc.Paths == nil {
			return nil
		}
		return doc.Paths.Paths["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/scale"]
	}(); item == nil || item.Put == nil || item.Put.OperationId != "replaceStableExampleComV1NamespacedCronTabScale" {
		t.Errorf("the custom resource's scale subresource is not documented: %+v", item)
	}
}

// TestOpenAPICustomResourceErrors checks what SetCustomResourceOpenAPI
// refuses.
func TestOpenAPICustomResourceErrors(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	valid := func() *apiextensionsv1.CustomResourceDefinition {
		return testCRD("stable.example.com", "v1", "CronTab", "crontabs")
	}
	tests := []struct {
		name    string
		crd     func() *apiextensionsv1.CustomResourceDefinition
		wantErr string
	}{
		{"nil", func() *apiextensionsv1.CustomResourceDefinition { return nil }, "nil"},
		{"no kind", func() *apiextensionsv1.CustomResourceDefinition { d := valid(); d.Spec.Names.Kind = ""; return d }, "required"},
		{"no name", func() *apiextensionsv1.CustomResourceDefinition { d := valid(); d.Name = ""; return d }, "required"},
		{"nothing served", func() *apiextensionsv1.CustomResourceDefinition {
			d := valid()
			d.Spec.Versions[0].Served = false
			return d
		}, "no served version"},
		{"version twice", func() *apiextensionsv1.CustomResourceDefinition {
			d := valid()
			d.Spec.Versions = append(d.Spec.Versions, d.Spec.Versions[0])
			d.Spec.Versions[1].Storage = false
			return d
		}, "stated twice"},
		{"kind of another definition", func() *apiextensionsv1.CustomResourceDefinition {
			d := valid()
			d.Name = "crontabs2.stable.example.com"
			d.Spec.Names.Plural = "crontabs2"
			return d
		}, "is served by crontabs.stable.example.com"},
		{"the same definition again", valid, ""},
	}
	if err := c.srv.SetCustomResourceOpenAPI(valid()); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		err := c.srv.SetCustomResourceOpenAPI(tt.crd())
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.wantErr)
		}
	}
	if _, ok := openAPIIndex(t, c)["apis/stable.example.com/v2"]; ok {
		t.Errorf("a refused definition was published")
	}
}

// TestOpenAPIConcurrent checks that concurrent first requests, with custom
// resources coming and going, all get documents. (That nothing is built
// before the first request is tested in package kube.)
func TestOpenAPIConcurrent(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	var wg sync.WaitGroup
	paths := []string{"/openapi/v2", "/openapi/v3", "/openapi/v3/api/v1", "/openapi/v3/apis/apps/v1", "/openapi/v3/apis/samplecontroller.k8s.io/v1alpha1"}
	codes := make([]int, 2*len(paths))
	for i := range codes {
		wg.Go(func() {
			codes[i] = c.do("GET", paths[i%len(paths)], "", "").code
		})
	}
	for i := range 4 {
		wg.Go(func() {
			d := testCRD("stable.example.com", "v1", fmt.Sprintf("K%d", i), fmt.Sprintf("k%ds", i))
			if err := c.srv.SetCustomResourceOpenAPI(d); err != nil {
				t.Error(err)
			}
			c.srv.RemoveCustomResourceOpenAPI(d.Name)
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", paths[i%len(paths)], code)
		}
	}
}
