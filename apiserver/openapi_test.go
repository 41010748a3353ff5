package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	gproto "google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

func TestOpenAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		docs := openAPIRoot(t, c)
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
		// One document per group/version served, as discovery lists them.
		want := map[string]bool{}
		for _, v := range toStrings(c.mustDo("GET", "/api", "", "", 200)["versions"]) {
			want["api/"+v] = true
		}
		groups, _ := c.mustDo("GET", "/apis", "", "", 200)["groups"].([]any)
		for _, g := range groups {
			vs, _ := g.(map[string]any)["versions"].([]any)
			for _, v := range vs {
				want["apis/"+str(v.(map[string]any), "groupVersion")] = true
			}
		}
		if len(docs) != len(want) {
			t.Errorf("%d documents, want %d, one per group/version", len(docs), len(want))
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
		checks := []struct {
			name, path string
			hdr        []string
			code       int
		}{
			{"not modified", u, []string{"If-None-Match", etag}, http.StatusNotModified},
			{"without hash", "/openapi/v3/api/v1", nil, http.StatusOK},
			{"protobuf only", u, []string{"Accept", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"}, http.StatusNotAcceptable},
			{"unknown group", "/openapi/v3/apis/nope/v1", nil, http.StatusNotFound},
		}
		for _, ck := range checks {
			if r := c.do("GET", ck.path, "", "", ck.hdr...); r.code != ck.code {
				t.Errorf("%s: %d, want %d", ck.name, r.code, ck.code)
			}
		}
		if etag == "" || !strings.HasSuffix(u, strings.Trim(etag, `"`)) {
			t.Errorf("etag %q does not match %s", etag, u)
		}
	})
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestOpenAPIV2(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
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
	})
}
