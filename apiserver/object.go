package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/internal/jsontree"
	"github.com/listwatch/listwatch/storage"
)

// Objects are handled as unstructured maps for every resource, but for
// the create of a built-in one, which goes from the request body to
// storage and back to the client as its Go type (object): converting it to
// a map and back was a quarter of a create's cost (BenchmarkCreatePod).
// Typed k8s.io/api structs are otherwise used to normalise built-in bodies
// (drop unknown fields, reject wrong types), for strategic merge patch and
// for protobuf.

// object is an object the server creates or answers with: a built-in
// resource's Go type (such as *corev1.Pod), or *unstructured.Unstructured.
type object interface {
	runtime.Object
	metav1.Object
}

// newObject is the object to create from a decoded body: ext, the body as
// its built-in Go type, when there is one, else u.
func newObject(u *unstructured.Unstructured, ext runtime.Object) (object, error) {
	if ext == nil {
		return u, nil
	}
	return asObject(ext)
}

// asObject is obj, which must have object metadata, as an object.
func asObject(obj runtime.Object) (object, error) {
	o, ok := obj.(object)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("%T has no object metadata", obj))
	}
	return o, nil
}

// decodeBody parses a request body as an object of r, checking that its
// apiVersion and kind, when present, are r's.
func decodeBody(r *resource, body []byte) (*unstructured.Unstructured, error) {
	obj, err := parseObject(r, body)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	if err := checkKind(r, u); err != nil {
		return nil, err
	}
	kind := u.GetKind()
	u.SetAPIVersion(r.apiVersion())
	u.SetKind(r.gvk.Kind)
	if r.cr != nil && kind != "" {
		u.SetKind(kind) // a custom resource's kind is validated (422), as kube-apiserver does
	}
	if err := normalize(r, u); err != nil {
		return nil, err
	}
	return u, nil
}

// decodeTyped decodes a body of the built-in resource r into its Go type in
// one pass, as kube-apiserver's decoder does (case-sensitive, integers
// kept, a wrong type refused with 400), and returns the object both as
// that type and, unless typedOnly (a create needs no other: see object), as
// the server's unstructured form, with the unknown and duplicate fields
// that strict field validation reports.
func decodeTyped(r *resource, body []byte, typedOnly bool) (*unstructured.Unstructured, runtime.Object, []string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, nil, badRequest("the body of the request was empty: %s in version %q cannot be handled as a %s", r.gvk.Kind, r.gvk.Version, r.gvk.Kind)
	}
	ext := r.newTyped()
	if ext == nil {
		return nil, nil, nil, apierrors.NewInternalError(fmt.Errorf("no Go type for %s", r.gvk))
	}
	strictErrs, err := sigsjson.UnmarshalStrict(body, ext, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, nil, nil, cannotHandle(r, err)
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
	ext.GetObjectKind().SetGroupVersionKind(r.gvk)
	problems := make([]string, 0, len(strictErrs))
	for _, e := range strictErrs {
		problems = append(problems, e.Error())
	}
	if typedOnly {
		return nil, ext, problems, nil
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ext)
	if err != nil {
		return nil, nil, nil, cannotHandle(r, err)
	}
	return &unstructured.Unstructured{Object: obj}, ext, problems, nil
}

// parseObject parses JSON into a map, answering 400 with the parse error.
func parseObject(r *resource, body []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("the body of the request was empty: %s in version %q cannot be handled as a %s", r.gvk.Kind, r.gvk.Version, r.gvk.Kind)
	}
	var v any
	if err := utiljson.Unmarshal(body, &v); err != nil {
		return nil, cannotHandle(r, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, cannotHandle(r, fmt.Errorf("expected a JSON object, got %T", v))
	}
	if md, ok := obj["metadata"]; ok && md != nil {
		if _, ok := md.(map[string]any); !ok {
			return nil, cannotHandle(r, fmt.Errorf("metadata must be an object, got %T", md))
		}
	}
	return obj, nil
}

func cannotHandle(r *resource, err error) error {
	return badRequest("%s in version %q cannot be handled as a %s: %v", r.gvk.Kind, r.gvk.Version, r.gvk.Kind, err)
}

func checkKind(r *resource, u *unstructured.Unstructured) error {
	av, _ := u.Object["apiVersion"].(string)
	kind, _ := u.Object["kind"].(string)
	if _, ok := u.Object["apiVersion"]; ok && !isString(u.Object["apiVersion"]) {
		return cannotHandle(r, fmt.Errorf("apiVersion must be a string"))
	}
	if _, ok := u.Object["kind"]; ok && !isString(u.Object["kind"]) {
		return cannotHandle(r, fmt.Errorf("kind must be a string"))
	}
	if av != "" && av != r.apiVersion() {
		gv, err := schema.ParseGroupVersion(av)
		if err != nil {
			return cannotHandle(r, err)
		}
		return badRequest("the API version in the data (%s) does not match the expected API version (%s)", gv, r.apiVersion())
	}
	if kind != "" && kind != r.gvk.Kind && r.cr == nil {
		return badRequest("the object provided is unrecognized (must be of type %s): %s in version %q cannot be handled as a %s", r.gvk.Kind, kind, r.gvk.Version, r.gvk.Kind)
	}
	return nil
}

func isString(v any) bool { _, ok := v.(string); return ok }

// normalize round-trips a built-in object through its Go type, as
// kube-apiserver does by decoding into it: unknown fields are dropped and
// values of the wrong type are rejected (400). Metadata of custom resources
// is checked the same way through ObjectMeta.
func normalize(r *resource, u *unstructured.Unstructured) error {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return cannotHandle(r, err)
	}
	if r.custom {
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &meta); err != nil {
			return cannotHandle(r, err)
		}
		return coerceCustom(r, u)
	}
	typed := r.newTyped()
	if typed == nil {
		return apierrors.NewInternalError(fmt.Errorf("no Go type for %s", r.gvk))
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, typed); err != nil {
		return cannotHandle(r, err)
	}
	out, err := json.Marshal(typed)
	if err != nil {
		return cannotHandle(r, err)
	}
	obj, err := jsontree.DecodeObject(out)
	if err != nil {
		return cannotHandle(r, err)
	}
	u.Object = obj
	return nil
}

// encodeStored is the storage form of an object: JSON without
// resourceVersion (the revision is the resourceVersion).
func encodeStored(obj object) ([]byte, error) {
	if rv := obj.GetResourceVersion(); rv != "" {
		obj.SetResourceVersion("")
		defer obj.SetResourceVersion(rv)
	}
	b, err := marshalJSON(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode: %w", err))
	}
	return b, nil
}

// marshalJSON is obj as JSON: a map's keys sorted, a Go type's fields in
// their order.
func marshalJSON(obj object) ([]byte, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return json.Marshal(u.Object)
	}
	return json.Marshal(obj)
}

// decodeStored is the inverse of encodeStored: it sets resourceVersion from
// the revision.
func decodeStored(value []byte, rev int64) (*unstructured.Unstructured, error) {
	obj, err := jsontree.DecodeObject(value)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decode stored object: %w", err))
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetResourceVersion(strconv.FormatInt(rev, 10))
	return u, nil
}

func decodeKV(kv storage.KeyValue) (*unstructured.Unstructured, error) {
	return decodeStored(kv.Value, kv.Revision)
}

// parseRV parses a resourceVersion; "" and "0" are 0.
func parseRV(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("invalid resource version %q", s)
	}
	return n, nil
}

// deepCopy returns an independent copy of u.
func deepCopy(u *unstructured.Unstructured) *unstructured.Unstructured {
	return u.DeepCopy()
}

// asMap is obj, an object of r, as a map: obj itself when it is one.
func (r *resource) asMap(obj object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	if r.kube == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("%v as %T", r.gvk, obj))
	}
	u := &unstructured.Unstructured{}
	return u, r.kube.SetUnstructured(u, obj)
}

// copyObject is a deep copy of obj.
func copyObject(obj object) (object, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return deepCopy(u), nil
	}
	return asObject(obj.DeepCopyObject())
}

// storage is the resource whose storage holds r's objects: r itself, or
// the version they are stored as.
func (r *resource) storage() *resource {
	if r.storedAs != nil {
		return r.storedAs
	}
	return r
}

// decodeKV reads an object of r from storage, converted from the version
// it is stored as when that is another: a built-in resource's other
// version through Kubernetes' conversions (as kube-apiserver reads
// events.k8s.io/v1 events from core/v1's storage), a custom resource from
// whatever version it was stored at (the storage version then, which may
// have changed since) to r's, which with the None conversion strategy
// rewrites its apiVersion.
func (r *resource) decodeKV(kv storage.KeyValue) (*unstructured.Unstructured, error) {
	u, err := decodeKV(kv)
	if err == nil && r.cr != nil {
		u.SetAPIVersion(r.apiVersion())
	}
	if err != nil || r.storedAs == nil {
		return u, err
	}
	typed := r.storedAs.newTyped()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decode stored %v: %w", r.storedAs.gvk, err))
	}
	converted, err := kube.Convert(typed, r.gvk)
	if err != nil {
		return nil, err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(converted)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode %v: %w", r.gvk, err))
	}
	out := &unstructured.Unstructured{Object: obj}
	out.SetAPIVersion(r.apiVersion())
	out.SetKind(r.gvk.Kind)
	return out, nil
}

// encodeStored is obj's storage form, at the version r's objects are
// stored as: a built-in resource's storage version, or a custom
// resource's definition's, as kube-apiserver's storage encodes it
// whatever version the request wrote (with the None conversion strategy
// only apiVersion differs).
func (r *resource) encodeStored(obj object) ([]byte, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok && r.cr != nil {
		served := u.GetAPIVersion()
		u.SetAPIVersion(r.cr.StorageAPIVersion())
		defer u.SetAPIVersion(served)
		return encodeStored(u)
	}
	if r.storedAs == nil {
		return encodeStored(obj)
	}
	stored, err := r.toStorage(obj)
	if err != nil {
		return nil, err
	}
	return encodeStored(stored)
}

// encodeOnce is encodeOnce for an object of r: one stored at another
// version than it is served (a built-in resource's other version, a custom
// resource whose storage version is another) is encoded for storage alone,
// its answer not being the same JSON.
func (r *resource) encodeOnce(obj object) (onceEncoded, error) {
	u, isU := obj.(*unstructured.Unstructured)
	if r.storedAs == nil && (r.cr == nil || !isU || u.GetAPIVersion() == r.cr.StorageAPIVersion()) {
		return encodeOnce(obj)
	}
	js, err := r.encodeStored(obj)
	return onceEncoded{js: js, at: -1}, err
}

// toStorage converts obj, of r's version, to the version r is stored as;
// obj is not changed.
func (r *resource) toStorage(obj object) (object, error) {
	typed := r.newTyped()
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("convert %v: %w", r.gvk, err))
		}
	} else {
		// Conversion may share memory with its input: the caller keeps obj.
		typed = obj.DeepCopyObject()
	}
	typed.GetObjectKind().SetGroupVersionKind(r.gvk)
	converted, err := kube.Convert(typed, r.storedAs.gvk)
	if err != nil {
		return nil, err
	}
	return asObject(converted)
}
