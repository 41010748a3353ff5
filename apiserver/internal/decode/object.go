package decode

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/internal/jsontree"
)

// Objects are handled as unstructured maps for every resource, but for
// the create of a built-in one, which goes from the request body to
// storage and back to the client as its Go type (object): converting it to
// a map and back was a quarter of a create's cost (BenchmarkCreatePod).
// Typed k8s.io/api structs are otherwise used to normalise built-in bodies
// (drop unknown fields, reject wrong types), for strategic merge patch and
// for protobuf.

// NewObject is the object to create from a decoded body: ext, the body as
// its built-in Go type, when there is one, else u.
func NewObject(u *unstructured.Unstructured, ext runtime.Object) (registry.Object, error) {
	if ext == nil {
		return u, nil
	}
	return registry.AsObject(ext)
}

// Body parses a request body as an object of r, checking that its
// apiVersion and kind, when present, are r's, and that a custom resource
// can be stored (CheckStorable) and nests no deeper than MaxDepth.
func Body(r *registry.Resource, body []byte) (*unstructured.Unstructured, error) {
	if r.Custom {
		if err := CheckStorable(body); err != nil {
			return nil, err
		}
	}
	obj, err := parseObject(r, body)
	if err != nil {
		return nil, err
	}
	if r.Custom {
		// Built-in objects are bounded by their Go types, but for the
		// few fields that hold any JSON (a definition's schemas, raw
		// extensions), which are left as kube-apiserver has them.
		if d := ObjectDepth(obj); d > MaxDepth {
			return nil, TooDeep("the object", d)
		}
	}
	u := &unstructured.Unstructured{Object: obj}
	if err := checkKind(r, u); err != nil {
		return nil, err
	}
	kind := u.GetKind()
	u.SetAPIVersion(r.APIVersion())
	u.SetKind(r.GVK.Kind)
	if r.KeepsBodyKind() && kind != "" {
		u.SetKind(kind) // a custom resource's kind is validated (422), as kube-apiserver does
	}
	if err := normalize(r, u); err != nil {
		return nil, err
	}
	return u, nil
}

// Typed decodes a body of the built-in resource r into its Go type in
// one pass, as kube-apiserver's decoder does (case-sensitive, integers
// kept, a wrong type refused with 400), and returns the object both as
// that type and, unless typedOnly (a create needs no other: see object), as
// the server's unstructured form, with the unknown and duplicate fields
// that strict field validation reports.
func Typed(r *registry.Resource, body []byte, typedOnly bool) (*unstructured.Unstructured, runtime.Object, []string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, nil, respond.BadRequest("the body of the request was empty: %s in version %q cannot be handled as a %s", r.GVK.Kind, r.GVK.Version, r.GVK.Kind)
	}
	ext := r.NewTyped()
	if ext == nil {
		return nil, nil, nil, apierrors.NewInternalError(fmt.Errorf("no Go type for %s", r.GVK))
	}
	strictErrs, err := sigsjson.UnmarshalStrict(body, ext, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, nil, nil, CannotHandle(r, err)
	}
	gvk := ext.GetObjectKind().GroupVersionKind()
	tm := map[string]any{}
	if av := gvk.GroupVersion().String(); av != "" {
		tm["apiVersion"] = av
	}
	if gvk.Kind != "" {
		tm["kind"] = gvk.Kind
	}
	if err := checkKind(r, &unstructured.Unstructured{Object: tm}); err != nil {
		return nil, nil, nil, err
	}
	ext.GetObjectKind().SetGroupVersionKind(r.GVK)
	problems := make([]string, 0, len(strictErrs))
	for _, e := range strictErrs {
		problems = append(problems, e.Error())
	}
	if typedOnly {
		return nil, ext, problems, nil
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ext)
	if err != nil {
		return nil, nil, nil, CannotHandle(r, err)
	}
	return &unstructured.Unstructured{Object: obj}, ext, problems, nil
}

// TypedProtobuf decodes a protobuf body of the built-in resource r
// straight into its Go type, as kube-apiserver's protobuf decoder does,
// and returns it as Typed does (unless typedOnly, in the server's
// unstructured form too). ok is false, with no error, when the body holds
// an object of another Go type than r's (another version's): Typed
// decides on its JSON then. Through JSON a protobuf body took four
// conversions (protobuf to the Go type, to JSON, to a map with its kind,
// to JSON again) before Typed's: BenchmarkCreatePodProtobuf.
func TypedProtobuf(r *registry.Resource, body []byte, typedOnly bool) (u *unstructured.Unstructured, ext runtime.Object, ok bool, err error) {
	obj, gvk, err := registry.Protobuf.Decode(body, nil, nil)
	if err != nil {
		return nil, nil, false, CannotHandle(r, err)
	}
	tm := map[string]any{}
	if av := gvk.GroupVersion().String(); av != "" {
		tm["apiVersion"] = av
	}
	if gvk.Kind != "" {
		tm["kind"] = gvk.Kind
	}
	if err := checkKind(r, &unstructured.Unstructured{Object: tm}); err != nil {
		return nil, nil, false, err
	}
	if want := r.NewTyped(); want == nil || reflect.TypeOf(obj) != reflect.TypeOf(want) {
		return nil, nil, false, nil
	}
	obj.GetObjectKind().SetGroupVersionKind(r.GVK)
	if typedOnly {
		return nil, obj, true, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, nil, false, CannotHandle(r, err)
	}
	return &unstructured.Unstructured{Object: m}, obj, true, nil
}

// parseObject parses JSON into a map, answering 400 with the parse error.
func parseObject(r *registry.Resource, body []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, respond.BadRequest("the body of the request was empty: %s in version %q cannot be handled as a %s", r.GVK.Kind, r.GVK.Version, r.GVK.Kind)
	}
	var v any
	if err := utiljson.Unmarshal(body, &v); err != nil {
		return nil, CannotHandle(r, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, CannotHandle(r, fmt.Errorf("expected a JSON object, got %T", v))
	}
	if md, ok := obj["metadata"]; ok && md != nil {
		if _, ok := md.(map[string]any); !ok {
			return nil, CannotHandle(r, fmt.Errorf("metadata must be an object, got %T", md))
		}
	}
	return obj, nil
}

// Unrecognized is kube-apiserver's answer to a body its decoder could not
// read far enough to learn its kind: a 400 quoting the decoder's error and
// the body's first 30 bytes (in hex unless it starts as a JSON object),
// as its handlers' transformDecodeError words it.
func Unrecognized(r *registry.Resource, err error, body []byte) error {
	const summaryBytes = 30
	var summary string
	switch {
	case len(body) == 0:
		summary = "<empty>"
	case body[0] == '{' && len(body) > summaryBytes:
		summary = string(body[:summaryBytes]) + " ..."
	case body[0] == '{':
		summary = string(body)
	case len(body) > summaryBytes:
		summary = hex.EncodeToString(body[:summaryBytes]) + " ..."
	default:
		summary = hex.EncodeToString(body)
	}
	return respond.BadRequest("the object provided is unrecognized (must be of type %s): %v (%s)", r.GVK.Kind, err, summary)
}

// CannotHandle is kube-apiserver's answer to a body of a known kind its
// decoder refuses.
func CannotHandle(r *registry.Resource, err error) error {
	return respond.BadRequest("%s in version %q cannot be handled as a %s: %v", r.GVK.Kind, r.GVK.Version, r.GVK.Kind, err)
}

func checkKind(r *registry.Resource, u *unstructured.Unstructured) error {
	av, _ := u.Object["apiVersion"].(string)
	kind, _ := u.Object["kind"].(string)
	if _, ok := u.Object["apiVersion"]; ok && !isString(u.Object["apiVersion"]) {
		return CannotHandle(r, fmt.Errorf("apiVersion must be a string"))
	}
	if _, ok := u.Object["kind"]; ok && !isString(u.Object["kind"]) {
		return CannotHandle(r, fmt.Errorf("kind must be a string"))
	}
	if av != "" && av != r.APIVersion() {
		gv, err := schema.ParseGroupVersion(av)
		if err != nil {
			return CannotHandle(r, err)
		}
		return respond.BadRequest("the API version in the data (%s) does not match the expected API version (%s)", gv, r.APIVersion())
	}
	if kind != "" && kind != r.GVK.Kind && !r.KeepsBodyKind() {
		return respond.BadRequest("the object provided is unrecognized (must be of type %s): %s in version %q cannot be handled as a %s", r.GVK.Kind, kind, r.GVK.Version, r.GVK.Kind)
	}
	return nil
}

func isString(v any) bool { _, ok := v.(string); return ok }

// normalize round-trips a built-in object through its Go type, as
// kube-apiserver does by decoding into it: unknown fields are dropped and
// values of the wrong type are rejected (400). Metadata of custom resources
// is checked the same way through ObjectMeta.
func normalize(r *registry.Resource, u *unstructured.Unstructured) error {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return CannotHandle(r, err)
	}
	if r.Custom {
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &meta); err != nil {
			return CannotHandle(r, err)
		}
		return coerceCustom(r, u)
	}
	typed := r.NewTyped()
	if typed == nil {
		return apierrors.NewInternalError(fmt.Errorf("no Go type for %s", r.GVK))
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, typed); err != nil {
		return CannotHandle(r, err)
	}
	out, err := json.Marshal(typed)
	if err != nil {
		return CannotHandle(r, err)
	}
	obj, err := jsontree.DecodeObject(out)
	if err != nil {
		return CannotHandle(r, err)
	}
	u.Object = obj
	return nil
}

// coerceCustom is what kube-apiserver's decoder of a custom resource does
// to a body: unknown fields pruned (unless preserved), metadata coerced,
// defaults applied.
func coerceCustom(r *registry.Resource, u *unstructured.Unstructured) error {
	if r.CR == nil {
		return nil
	}
	if _, err := r.CR.Coerce(u); err != nil {
		return err
	}
	r.CR.Default(u)
	return nil
}

// customProblems lists the duplicate and unknown fields of a custom
// resource's JSON body as kube-apiserver's strict decoding reports them.
func customProblems(r *registry.Resource, js []byte) []string {
	var m map[string]any
	errs, err := sigsjson.UnmarshalStrict(js, &m, sigsjson.DisallowDuplicateFields)
	if err != nil || m == nil {
		return nil
	}
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	paths, err := r.CR.Coerce(&unstructured.Unstructured{Object: m})
	if err != nil {
		return out
	}
	for _, p := range paths {
		out = append(out, fmt.Sprintf("unknown field %q", p))
	}
	return out
}
