package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OpenAPI v2 (/openapi/v2) is what kubectl falls back to, and what its
// client-side validation reads: with --validate=strict, a manifest of
// `kind: List` (the output of `kubectl get -o yaml`) is checked against
// these definitions rather than by the server. It is the v3 documents
// merged into one Swagger 2.0 document, served as JSON or in the protobuf
// form kubectl asks for.

// The protobuf form is asked for by its historical name (with "@", which
// is not valid in a media type) or the current one, and answered with the
// current one, which clients can parse.
const (
	mediaOpenAPIV2ProtoLegacy = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	mediaOpenAPIV2Proto       = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
)

// openAPIV2 is the encoded v2 document in both forms.
type openAPIV2 struct {
	json, proto []byte
	etag        string
}

// buildOpenAPIV2 converts and merges the v3 documents.
func buildOpenAPIV2(docs openAPIDocs) (*openAPIV2, error) {
	paths := map[string]any{}
	defs := map[string]any{}
	for _, d := range docs {
		comps, _ := d.raw["components"].(map[string]any)
		schemas, _ := comps["schemas"].(map[string]map[string]any)
		for name, s := range schemas {
			defs[name] = v2Schema(s)
		}
		ps, _ := d.raw["paths"].(map[string]map[string]any)
		for p, item := range ps {
			paths[p] = v2PathItem(item)
		}
	}
	doc := map[string]any{
		"swagger":     "2.0",
		"info":        map[string]any{"title": "Kubernetes", "version": KubernetesVersion},
		"paths":       paths,
		"definitions": defs,
		"securityDefinitions": map[string]any{
			"BearerToken": map[string]any{"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"},
		},
		"security": []map[string][]string{{"BearerToken": {}}},
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi v2: %w", err)
	}
	parsed, err := openapiv2.ParseDocument(js)
	if err != nil {
		return nil, fmt.Errorf("openapi v2: %w", err)
	}
	pb, err := proto.Marshal(parsed)
	if err != nil {
		return nil, fmt.Errorf("openapi v2: %w", err)
	}
	return &openAPIV2{json: js, proto: pb, etag: fmt.Sprintf(`"%X"`, sha512Sum(js))}, nil
}

// v2Schema rewrites a v3 schema for v2: references point into
// #/definitions, a wrapped reference (allOf of one) becomes a $ref with
// its extensions beside it as in kube's v2 document, and the string-or-
// number of quantities is a string (v2 has no oneOf).
func v2Schema(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if all, ok := x["allOf"].([]any); ok && len(all) == 1 {
			out := map[string]any{}
			for k, v := range x {
				if k != "allOf" && k != "default" {
					out[k] = v2Schema(v)
				}
			}
			if inner, ok := v2Schema(all[0]).(map[string]any); ok {
				for k, v := range inner {
					out[k] = v
				}
			}
			return out
		}
		if _, ok := x["oneOf"]; ok {
			return map[string]any{"type": "string"}
		}
		// v2 consumers (kubectl's validation) do not know
		// x-kubernetes-preserve-unknown-fields and would reject every
		// field not listed; as kube does for such custom resources, the
		// object is published without its properties: anything goes.
		preserve := x["x-kubernetes-preserve-unknown-fields"] == true
		out := make(map[string]any, len(x))
		for k, v := range x {
			if preserve && (k == "properties" || k == "required") {
				continue
			}
			if s, ok := v.(string); ok && k == "$ref" {
				out[k] = "#/definitions/" + strings.TrimPrefix(s, schemaRefBase)
				continue
			}
			out[k] = v2Schema(v)
		}
		return out
	case map[string]map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			out[k] = v2Schema(v)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = v2Schema(v)
		}
		return out
	}
	return v
}

// v2Param turns a v3 parameter (type in "schema") into a v2 one.
func v2Param(p any) any {
	m, ok := p.(map[string]any)
	if !ok {
		return p
	}
	out := map[string]any{"name": m["name"], "in": m["in"], "uniqueItems": true}
	if d, ok := m["description"]; ok {
		out["description"] = d
	}
	if r, ok := m["required"]; ok {
		out["required"] = r
	}
	if s, ok := m["schema"].(map[string]any); ok {
		out["type"] = s["type"]
	}
	return out
}

func v2Params(ps any) []any {
	l, _ := ps.([]any)
	out := make([]any, 0, len(l))
	for _, p := range l {
		out = append(out, v2Param(p))
	}
	return out
}

// contentOf returns the media types of a v3 content map and one schema
// (they share it).
func contentOf(c any) ([]string, any) {
	m, _ := c.(map[string]any)
	types := make([]string, 0, len(m))
	var schema any
	for t, mt := range m {
		types = append(types, t)
		if mm, ok := mt.(map[string]any); ok {
			schema = mm["schema"]
		}
	}
	sort.Strings(types)
	return types, schema
}

func v2PathItem(item map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range item {
		if k == "parameters" {
			out[k] = v2Params(v)
			continue
		}
		op, ok := v.(map[string]any)
		if !ok {
			continue
		}
		o := map[string]any{"schemes": []string{"https"}}
		for _, key := range []string{"operationId", "tags", "x-kubernetes-action", "x-kubernetes-group-version-kind"} {
			if v, ok := op[key]; ok {
				o[key] = v
			}
		}
		params := v2Params(op["parameters"])
		if rb, ok := op["requestBody"].(map[string]any); ok {
			types, schema := contentOf(rb["content"])
			o["consumes"] = types
			params = append(params, map[string]any{"name": "body", "in": "body", "required": true, "schema": v2Schema(schema)})
		}
		o["parameters"] = params
		responses := map[string]any{}
		produces := map[string]bool{}
		if rs, ok := op["responses"].(map[string]any); ok {
			for code, r := range rs {
				rm, _ := r.(map[string]any)
				resp := map[string]any{"description": rm["description"]}
				if c, ok := rm["content"]; ok {
					types, schema := contentOf(c)
					for _, t := range types {
						produces[t] = true
					}
					resp["schema"] = v2Schema(schema)
				}
				responses[code] = resp
			}
		}
		o["responses"] = responses
		prod := make([]string, 0, len(produces))
		for t := range produces {
			prod = append(prod, t)
		}
		sort.Strings(prod)
		o["produces"] = prod
		out[k] = o
	}
	return out
}

// serveOpenAPIV2 answers /openapi/v2 in protobuf when asked for it, else
// JSON; the document is built on first use.
func (s *Server) serveOpenAPIV2(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		WriteStatus(w, methodNotAllowedPath(r))
		return
	}
	s.openAPIV2Once.Do(func() {
		docs, err := s.openAPIv3()
		if err != nil {
			s.openAPIV2Err = err
			return
		}
		s.openAPIV2, s.openAPIV2Err = buildOpenAPIV2(docs)
	})
	if s.openAPIV2Err != nil {
		WriteStatus(w, s.openAPIV2Err)
		return
	}
	doc := s.openAPIV2
	body, ct := doc.json, mediaJSON
	if wantsV2Proto(r) {
		body, ct = doc.proto, mediaOpenAPIV2Proto
	} else if !acceptsJSON(r) {
		WriteStatus(w, newStatus(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			"only the following media types are accepted: application/json, "+mediaOpenAPIV2Proto))
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Etag", doc.etag)
	w.Header().Set("Vary", "Accept")
	if r.Header.Get("If-None-Match") == doc.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// wantsV2Proto reports whether Accept names the protobuf form before any
// JSON form.
func wantsV2Proto(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		// Not mime.ParseMediaType: "@" in the protobuf type is not a
		// token character, but clients send it as it is.
		mt, _, _ := strings.Cut(part, ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case mediaOpenAPIV2Proto, mediaOpenAPIV2ProtoLegacy:
			return true
		case mediaJSON, "*/*", "application/*":
			return false
		}
	}
	return false
}
