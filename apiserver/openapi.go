package apiserver

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// OpenAPI v3, served as kube-apiserver does: /openapi/v3 lists one
// document per group/version, each at /openapi/v3/<api path>?hash=<hash>.
//
// kubectl reads these documents for two decisions: whether a kind's PATCH
// operation accepts the fieldValidation query parameter (then it leaves
// validation to the server, sending fieldValidation=Strict), and which
// merge keys and strategies a strategic merge patch uses in `kubectl
// apply`. The schemas are derived from the Go types this server decodes
// into, by reflection, so they say exactly what the server accepts:
// fields from json tags, x-kubernetes-patch-strategy and
// x-kubernetes-patch-merge-key from the patchStrategy and patchMergeKey
// tags, and the hand-written JSON forms of the few types that marshal
// themselves (times, quantities, int-or-string).

// openAPIDoc is one group/version document, encoded once.
type openAPIDoc struct {
	body []byte
	hash string
	// raw is the document before encoding, the source of OpenAPI v2.
	raw map[string]any
}

// openAPIDocs maps "api/v1", "apis/apps/v1", ... to documents.
type openAPIDocs map[string]openAPIDoc

func buildOpenAPI(reg *registry) (openAPIDocs, error) {
	docs := openAPIDocs{}
	for gvs := range reg.byGV {
		gv, err := schema.ParseGroupVersion(gvs)
		if err != nil {
			return nil, err
		}
		doc := newOpenAPIBuilder(gv)
		for _, r := range reg.resources(gvs) {
			if err := doc.addResource(r); err != nil {
				return nil, fmt.Errorf("openapi for %s: %w", r.gvr(), err)
			}
		}
		raw := doc.document()
		body, err := json.Marshal(raw)
		if err != nil {
			return nil, fmt.Errorf("openapi for %s: %w", gv, err)
		}
		docs[apiPath(gv)] = openAPIDoc{body: body, hash: fmt.Sprintf("%X", sha512Sum(body)), raw: raw}
	}
	return docs, nil
}

func sha512Sum(b []byte) []byte {
	sum := sha512.Sum512(b)
	return sum[:]
}

// apiPath is the path of a group/version without its leading slash.
func apiPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

const (
	openAPIPrefix = "/openapi/v3"
	schemaRefBase = "#/components/schemas/"
)

// openAPIv3 returns the v3 documents, building them on first use.
func (s *Server) openAPIv3() (openAPIDocs, error) {
	s.openAPIOnce.Do(func() { s.openAPI, s.openAPIErr = buildOpenAPI(s.reg) })
	return s.openAPI, s.openAPIErr
}

// serveOpenAPI answers /openapi/v3 and /openapi/v3/<api path>.
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		WriteStatus(w, methodNotAllowedPath(r))
		return
	}
	docs, err := s.openAPIv3()
	if err != nil {
		WriteStatus(w, err)
		return
	}
	if !acceptsJSON(r) {
		WriteStatus(w, newStatus(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			"only the following media types are accepted: application/json"))
		return
	}
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, openAPIPrefix), "/")
	if rest == "" {
		type entry struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		}
		paths := map[string]entry{}
		for p, d := range docs {
			paths[p] = entry{ServerRelativeURL: openAPIPrefix + "/" + p + "?hash=" + d.hash}
		}
		writeJSON(w, http.StatusOK, map[string]any{"paths": paths})
		return
	}
	doc, ok := docs[rest]
	if !ok {
		WriteStatus(w, notFoundPath())
		return
	}
	w.Header().Set("Content-Type", mediaJSON)
	w.Header().Set("Etag", `"`+doc.hash+`"`)
	if r.URL.Query().Get("hash") == doc.hash {
		// The URL names this exact content: caches may keep it.
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", "Fri, 01 Jan 2100 00:00:00 GMT")
	} else {
		w.Header().Set("Cache-Control", "no-cache, private")
	}
	if match := r.Header.Get("If-None-Match"); match == `"`+doc.hash+`"` {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc.body)
}

// acceptsJSON reports whether Accept allows application/json.
func acceptsJSON(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	if strings.TrimSpace(accept) == "" {
		return true
	}
	for _, part := range strings.Split(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && (mt == mediaJSON || mt == "*/*" || mt == "application/*") {
			return true
		}
	}
	return false
}

// openAPIBuilder accumulates one group/version document.
type openAPIBuilder struct {
	gv      schema.GroupVersion
	paths   map[string]map[string]any
	schemas map[string]map[string]any
	// gvks are the kinds each schema stands for
	// (x-kubernetes-group-version-kind).
	gvks map[string][]schema.GroupVersionKind
}

func newOpenAPIBuilder(gv schema.GroupVersion) *openAPIBuilder {
	return &openAPIBuilder{gv: gv, paths: map[string]map[string]any{}, schemas: map[string]map[string]any{}, gvks: map[string][]schema.GroupVersionKind{}}
}

func (b *openAPIBuilder) document() map[string]any {
	for name, kinds := range b.gvks {
		list := make([]map[string]string, len(kinds))
		for i, k := range kinds {
			list[i] = map[string]string{"group": k.Group, "version": k.Version, "kind": k.Kind}
		}
		b.schemas[name]["x-kubernetes-group-version-kind"] = list
	}
	return map[string]any{
		"openapi": "3.0.0",
		"info":    map[string]any{"title": "Kubernetes", "version": KubernetesVersion},
		"paths":   b.paths,
		"components": map[string]any{
			"schemas": b.schemas,
			"securitySchemes": map[string]any{
				"BearerToken": map[string]any{"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"},
			},
		},
		"security": []map[string][]string{{"BearerToken": {}}},
	}
}

// kind registers a schema as the schema of gvk.
func (b *openAPIBuilder) kind(name string, gvk schema.GroupVersionKind) {
	for _, k := range b.gvks[name] {
		if k == gvk {
			return
		}
	}
	b.gvks[name] = append(b.gvks[name], gvk)
}

// Go types with a JSON form of their own.
var (
	timeType        = reflect.TypeFor[metav1.Time]()
	microTimeType   = reflect.TypeFor[metav1.MicroTime]()
	durationType    = reflect.TypeFor[metav1.Duration]()
	quantityType    = reflect.TypeFor[apiresource.Quantity]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
	rawExtType      = reflect.TypeFor[runtime.RawExtension]()
	fieldsV1Type    = reflect.TypeFor[metav1.FieldsV1]()
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
)

// typeName is the OpenAPI name of a Go type, kube's convention: the
// package path with its domain reversed, then the type name
// (k8s.io/api/core/v1.Pod → io.k8s.api.core.v1.Pod).
func typeName(t reflect.Type) string {
	parts := strings.Split(t.PkgPath(), "/")
	domain := strings.Split(parts[0], ".")
	for i, j := 0, len(domain)-1; i < j; i, j = i+1, j-1 {
		domain[i], domain[j] = domain[j], domain[i]
	}
	return strings.Join(append(append(domain, parts[1:]...), t.Name()), ".")
}

func ref(name string) map[string]any { return map[string]any{"$ref": schemaRefBase + name} }

// schemaOf returns the schema of a value of Go type t, defining named
// schemas for structs (and self-marshalling types) on the way.
func (b *openAPIBuilder) schemaOf(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case timeType, microTimeType:
		return b.named(t, func() map[string]any { return map[string]any{"type": "string", "format": "date-time"} })
	case durationType:
		return b.named(t, func() map[string]any { return map[string]any{"type": "string"} })
	case quantityType:
		return b.named(t, func() map[string]any {
			return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
		})
	case intOrStringType:
		return b.named(t, func() map[string]any { return map[string]any{"type": "string", "format": "int-or-string"} })
	case rawExtType, fieldsV1Type:
		return b.named(t, func() map[string]any { return map[string]any{"type": "object"} })
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Uint, reflect.Uint32:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Int32, reflect.Int16, reflect.Int8, reflect.Uint16, reflect.Uint8:
		return map[string]any{"type": "integer", "format": "int32"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number", "format": "double"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": b.schemaOf(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": b.schemaOf(t.Elem())}
	case reflect.Struct:
		if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) {
			// A form this generator cannot know: say so rather than guess.
			return b.named(t, func() map[string]any { return map[string]any{"x-kubernetes-preserve-unknown-fields": true} })
		}
		return b.named(t, func() map[string]any { return b.structSchema(t) })
	}
	return map[string]any{"x-kubernetes-preserve-unknown-fields": true}
}

// named defines t's schema once under its name and returns a reference.
func (b *openAPIBuilder) named(t reflect.Type, build func() map[string]any) map[string]any {
	name := typeName(t)
	if _, ok := b.schemas[name]; !ok {
		b.schemas[name] = map[string]any{} // breaks recursion (JSONSchemaProps-like types)
		b.schemas[name] = build()
	}
	return ref(name)
}

func (b *openAPIBuilder) structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	b.addFields(t, props)
	s := map[string]any{"type": "object", "properties": props}
	if d := swaggerDoc(t)[""]; d != "" {
		s["description"] = d
	}
	return s
}

// swaggerDoc returns the field documentation k8s.io types carry (their
// generated SwaggerDoc method: "" is the type, other keys json names), so
// that `kubectl explain` shows the same text as against kube-apiserver.
func swaggerDoc(t reflect.Type) map[string]string {
	m := reflect.New(t).Elem().MethodByName("SwaggerDoc")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return nil
	}
	docs, _ := m.Call(nil)[0].Interface().(map[string]string)
	return docs
}

// addFields adds the JSON fields of struct t to props, flattening inline
// and embedded structs as encoding/json does.
func (b *openAPIBuilder) addFields(t reflect.Type, props map[string]any) {
	docs := swaggerDoc(t)
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if (f.Anonymous && name == "") || strings.Contains(","+opts+",", ",inline,") {
			if ft.Kind() == reflect.Struct {
				b.addFields(ft, props)
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := b.schemaOf(f.Type)
		ext := map[string]any{}
		if v := f.Tag.Get("patchStrategy"); v != "" {
			ext["x-kubernetes-patch-strategy"] = v
		}
		if v := f.Tag.Get("patchMergeKey"); v != "" {
			ext["x-kubernetes-patch-merge-key"] = v
		}
		if _, isRef := s["$ref"]; isRef {
			// A reference cannot have siblings: wrap it, as kube does.
			s = map[string]any{"allOf": []any{s}}
			if ft.Kind() == reflect.Struct && ft != timeType && ft != microTimeType {
				s["default"] = map[string]any{}
			}
		}
		for k, v := range ext {
			s[k] = v
		}
		if d := docs[name]; d != "" {
			s["description"] = d
		}
		props[name] = s
	}
}

// Common names.
var (
	deleteOptionsName = typeName(reflect.TypeFor[metav1.DeleteOptions]())
	statusName        = typeName(reflect.TypeFor[metav1.Status]())
)

// param is an operation parameter.
func param(name, in, typ, desc string) map[string]any {
	p := map[string]any{"name": name, "in": in, "description": desc, "schema": map[string]any{"type": typ}}
	if in == "path" {
		p["required"] = true
	}
	return p
}

var (
	dryRunParam          = param("dryRun", "query", "string", "When present, indicates that modifications should not be persisted. Valid value: All.")
	fieldManagerParam    = param("fieldManager", "query", "string", "A name associated with the actor or entity that is making these changes.")
	fieldValidationParam = param("fieldValidation", "query", "string", "How the server handles unknown and duplicate fields in the body: Ignore, Warn (default) or Strict.")
	prettyParam          = param("pretty", "query", "string", "If 'true', then the output is pretty printed.")
	listParams           = []any{
		param("allowWatchBookmarks", "query", "boolean", "Requests watch events of type BOOKMARK."),
		param("continue", "query", "string", "The continue token of the previous page of a paged list."),
		param("fieldSelector", "query", "string", "A selector on the objects' fields."),
		param("labelSelector", "query", "string", "A selector on the objects' labels."),
		param("limit", "query", "integer", "The maximum number of objects of a list page."),
		param("resourceVersion", "query", "string", "The resourceVersion the list or watch is served at or from."),
		param("resourceVersionMatch", "query", "string", "How resourceVersion applies to a list: Exact or NotOlderThan."),
		param("sendInitialEvents", "query", "boolean", "With watch=true, the current state is sent first as ADDED events and a BOOKMARK."),
		param("timeoutSeconds", "query", "integer", "Timeout of the list or watch call."),
		param("watch", "query", "boolean", "Watch for changes instead of listing."),
	}
	deleteParams = []any{
		dryRunParam,
		param("gracePeriodSeconds", "query", "integer", "The seconds a pod bound to a node may take to stop."),
		param("propagationPolicy", "query", "string", "Whether and how garbage collection deletes dependents: Orphan, Background or Foreground."),
	}
)

func content(schemaRef map[string]any, types ...string) map[string]any {
	c := map[string]any{}
	for _, t := range types {
		c[t] = map[string]any{"schema": schemaRef}
	}
	return c
}

// addResource adds r's paths and the schemas they use.
func (b *openAPIBuilder) addResource(r *resource) error {
	prefix := "/" + apiPath(b.gv)
	var kindSchema, listSchema map[string]any
	if r.custom {
		kindName, listName := customTypeName(r), customTypeName(r)+"List"
		b.schemas[kindName] = map[string]any{
			"type": "object",
			"properties": map[string]any{
				"apiVersion": map[string]any{"type": "string"},
				"kind":       map[string]any{"type": "string"},
				"metadata":   map[string]any{"allOf": []any{b.schemaOf(reflect.TypeFor[metav1.ObjectMeta]())}},
			},
			"x-kubernetes-preserve-unknown-fields": true,
		}
		b.schemas[listName] = map[string]any{
			"type": "object",
			"properties": map[string]any{
				"apiVersion": map[string]any{"type": "string"},
				"kind":       map[string]any{"type": "string"},
				"metadata":   map[string]any{"allOf": []any{b.schemaOf(reflect.TypeFor[metav1.ListMeta]())}},
				"items":      map[string]any{"type": "array", "items": ref(kindName)},
			},
			"required": []string{"items"},
		}
		kindSchema, listSchema = ref(kindName), ref(listName)
		b.kind(kindName, r.gvk)
		b.kind(listName, r.gvk.GroupVersion().WithKind(r.gvk.Kind+"List"))
	} else {
		obj, err := scheme.New(r.gvk)
		if err != nil {
			return err
		}
		list, err := scheme.New(r.gvk.GroupVersion().WithKind(r.gvk.Kind + "List"))
		if err != nil {
			return err
		}
		kindSchema, listSchema = b.schemaOf(reflect.TypeOf(obj)), b.schemaOf(reflect.TypeOf(list))
		b.kind(strings.TrimPrefix(kindSchema["$ref"].(string), schemaRefBase), r.gvk)
		b.kind(strings.TrimPrefix(listSchema["$ref"].(string), schemaRefBase), r.gvk.GroupVersion().WithKind(r.gvk.Kind+"List"))
	}
	statusRef := b.schemaOf(reflect.TypeFor[metav1.Status]())
	deleteRef := b.schemaOf(reflect.TypeFor[metav1.DeleteOptions]())
	patchRef := b.schemaOf(reflect.TypeFor[metav1.Patch]())
	for _, gv := range []schema.GroupVersion{b.gv, metav1.SchemeGroupVersion} {
		b.kind(deleteOptionsName, gv.WithKind("DeleteOptions"))
	}
	b.kind(statusName, metav1.SchemeGroupVersion.WithKind("Status"))

	media := []string{mediaJSON, mediaYAML}
	respMedia := []string{mediaJSON}
	patchMedia := []string{string(types.JSONPatchType), string(types.MergePatchType)}
	if !r.custom {
		media = append(media, mediaProtobuf)
		respMedia = append(respMedia, mediaProtobuf)
		patchMedia = append(patchMedia, string(types.StrategicMergePatchType))
	}
	kindTitle := r.gvk.Kind
	scope := ""
	if r.namespaced {
		scope = "Namespaced"
	}
	opID := func(verb, suffix string) string {
		return verb + groupTitle(b.gv) + scope + kindTitle + suffix
	}
	ops := func(gvk schema.GroupVersionKind) func(action, id string, params []any, body map[string]any, responses map[string]any) map[string]any {
		return func(action, id string, params []any, body map[string]any, responses map[string]any) map[string]any {
			op := map[string]any{
				"operationId":                     id,
				"tags":                            []string{groupTitle(b.gv)},
				"parameters":                      params,
				"responses":                       responses,
				"x-kubernetes-action":             action,
				"x-kubernetes-group-version-kind": map[string]string{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind},
			}
			if body != nil {
				op["requestBody"] = map[string]any{"content": body, "required": true}
			}
			return op
		}
	}
	op := ops(r.gvk)
	resp := func(codes map[string]map[string]any) map[string]any {
		out := map[string]any{"401": map[string]any{"description": "Unauthorized"}}
		for code, s := range codes {
			out[code] = map[string]any{"description": http.StatusText(statusCode(code)), "content": content(s, respMedia...)}
		}
		return out
	}
	writeParams := []any{dryRunParam, fieldManagerParam, fieldValidationParam}

	collection := prefix + "/" + r.plural
	pathParams := []any{prettyParam}
	if r.namespaced {
		// The list across namespaces.
		b.paths[collection] = map[string]any{
			"parameters": []any{prettyParam},
			"get":        op("list", opID("list", "ForAllNamespaces"), listParams, nil, resp(map[string]map[string]any{"200": listSchema})),
		}
		collection = prefix + "/namespaces/{namespace}/" + r.plural
		pathParams = []any{param("namespace", "path", "string", "object name and auth scope, such as for teams and projects"), prettyParam}
	}
	b.paths[collection] = map[string]any{
		"parameters": pathParams,
		"get":        op("list", opID("list", ""), listParams, nil, resp(map[string]map[string]any{"200": listSchema})),
		"post": op("post", opID("create", ""), writeParams, content(kindSchema, media...),
			resp(map[string]map[string]any{"200": kindSchema, "201": kindSchema, "202": kindSchema})),
		"delete": op("deletecollection", opID("deletecollection", ""), append(append([]any{}, listParams...), deleteParams...),
			content(deleteRef, mediaJSON, mediaYAML), resp(map[string]map[string]any{"200": statusRef})),
	}
	itemParams := append([]any{param("name", "path", "string", "name of the "+kindTitle)}, pathParams...)
	item := collection + "/{name}"
	b.paths[item] = map[string]any{
		"parameters": itemParams,
		"get":        op("get", opID("read", ""), nil, nil, resp(map[string]map[string]any{"200": kindSchema})),
		"put": op("put", opID("replace", ""), writeParams, content(kindSchema, media...),
			resp(map[string]map[string]any{"200": kindSchema, "201": kindSchema})),
		"patch": op("patch", opID("patch", ""), writeParams, content(patchRef, patchMedia...),
			resp(map[string]map[string]any{"200": kindSchema, "201": kindSchema})),
		"delete": op("delete", opID("delete", ""), deleteParams, content(deleteRef, mediaJSON, mediaYAML),
			resp(map[string]map[string]any{"200": kindSchema, "202": kindSchema})),
	}
	if r.hasStatus {
		b.paths[item+"/status"] = map[string]any{
			"parameters": itemParams,
			"get":        op("get", opID("read", "Status"), nil, nil, resp(map[string]map[string]any{"200": kindSchema})),
			"put": op("put", opID("replace", "Status"), writeParams, content(kindSchema, media...),
				resp(map[string]map[string]any{"200": kindSchema, "201": kindSchema})),
			"patch": op("patch", opID("patch", "Status"), writeParams, content(patchRef, patchMedia...),
				resp(map[string]map[string]any{"200": kindSchema, "201": kindSchema})),
		}
	}
	if r.scale != nil {
		scaleGVK := autoscalingv1.SchemeGroupVersion.WithKind("Scale")
		scaleRef := b.schemaOf(reflect.TypeFor[autoscalingv1.Scale]())
		b.kind(strings.TrimPrefix(scaleRef["$ref"].(string), schemaRefBase), scaleGVK)
		sop := ops(scaleGVK)
		b.paths[item+"/scale"] = map[string]any{
			"parameters": itemParams,
			"get":        sop("get", opID("read", "Scale"), nil, nil, resp(map[string]map[string]any{"200": scaleRef})),
			"put": sop("put", opID("replace", "Scale"), writeParams, content(scaleRef, mediaJSON, mediaYAML, mediaProtobuf),
				resp(map[string]map[string]any{"200": scaleRef, "201": scaleRef})),
			"patch": sop("patch", opID("patch", "Scale"), writeParams, content(patchRef, patchMedia...),
				resp(map[string]map[string]any{"200": scaleRef, "201": scaleRef})),
		}
	}
	if r.binding {
		bindingGVK := corev1.SchemeGroupVersion.WithKind("Binding")
		bindingRef := b.schemaOf(reflect.TypeFor[corev1.Binding]())
		b.kind(strings.TrimPrefix(bindingRef["$ref"].(string), schemaRefBase), bindingGVK)
		b.paths[item+"/binding"] = map[string]any{
			"parameters": itemParams,
			"post": ops(bindingGVK)("post", opID("create", "Binding"), writeParams, content(bindingRef, mediaJSON, mediaYAML, mediaProtobuf),
				resp(map[string]map[string]any{"201": statusRef})),
		}
	}
	return nil
}

// customTypeName names a custom resource's schema as kube names those of
// CustomResourceDefinitions: the reversed group, version and kind.
func customTypeName(r *resource) string {
	labels := strings.Split(r.gvk.Group, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	return strings.Join(labels, ".") + "." + r.gvk.Version + "." + r.gvk.Kind
}

// groupTitle is the tag and operationId part of a group/version: CoreV1,
// AppsV1, CoordinationV1, SamplecontrollerV1alpha1.
func groupTitle(gv schema.GroupVersion) string {
	g := "core"
	if gv.Group != "" {
		g, _, _ = strings.Cut(gv.Group, ".")
	}
	return upperFirst(g) + upperFirst(gv.Version)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func statusCode(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
