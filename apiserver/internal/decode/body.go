// Package decode reads request bodies as kube-apiserver's decoders do:
// their format (JSON, YAML or protobuf, RequestFormat and ToJSON), the
// object as its resource's Go type or a custom resource's map (Request,
// New, Body, Typed), and the unknown and duplicate fields that
// fieldValidation reports (StrictProblems, Enforce).
package decode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubejson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
)

// Request bodies arrive as JSON (kubectl, dynamic clients), YAML (curl
// users) or the Kubernetes protobuf envelope (typed client-go clients such
// as `kubectl create deployment`). All three become the same unstructured
// map, so every rule after decoding has one code path.

// Format is the serialization of a request body.
type Format int

const (
	JSON Format = iota
	YAML
	Protobuf
)

// RequestFormat reads Content-Type: JSON when absent (kube-apiserver's
// default), 415 for anything it cannot decode. allowProto is false for
// custom resources, which have no protobuf form.
func RequestFormat(r *http.Request, res *registry.Resource, allowProto bool) (Format, error) {
	ct := r.Header.Get("Content-Type")
	if strings.TrimSpace(ct) == "" {
		return JSON, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
	case mt == respond.MediaJSON:
		return JSON, nil
	case mt == respond.MediaYAML:
		return YAML, nil
	case mt == respond.MediaProtobuf && allowProto:
		return Protobuf, nil
	}
	accepted := respond.MediaJSON + ", " + respond.MediaYAML
	if allowProto {
		accepted += ", " + respond.MediaProtobuf
	}
	gr := metav1.SchemeGroupVersion.WithResource("").GroupResource()
	if res != nil {
		gr = res.GR()
	}
	return JSON, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, strings.ToLower(r.Method), gr, "",
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s", accepted), 0, false)
}

// ToJSON turns a body of any accepted format into JSON. Protobuf is
// decoded through the typed scheme and re-encoded, so the JSON carries
// apiVersion and kind from the envelope.
func ToJSON(r *registry.Resource, format Format, body []byte) ([]byte, error) {
	switch format {
	case YAML:
		js, err := utilyaml.ToJSON(body)
		if err != nil {
			return nil, Unrecognized(r, err, body)
		}
		return js, nil
	case Protobuf:
		obj, gvk, err := registry.Protobuf.Decode(body, nil, nil)
		if err != nil {
			return nil, CannotHandle(r, err)
		}
		js, err := json.Marshal(obj)
		if err != nil {
			return nil, CannotHandle(r, err)
		}
		m := map[string]any{}
		if err := json.Unmarshal(js, &m); err != nil {
			return nil, CannotHandle(r, err)
		}
		if gvk != nil {
			m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
		}
		return json.Marshal(m)
	}
	return body, nil
}

// FieldValidation is the fieldValidation query parameter: what to do with
// unknown and duplicate fields in a body.
type FieldValidation string

const (
	FieldValidationIgnore FieldValidation = metav1.FieldValidationIgnore
	FieldValidationWarn   FieldValidation = metav1.FieldValidationWarn
	FieldValidationStrict FieldValidation = metav1.FieldValidationStrict
)

// ParseFieldValidation reads fieldValidation; kube-apiserver's default is
// Warn.
func ParseFieldValidation(r *http.Request) (FieldValidation, error) {
	switch v := r.URL.Query().Get("fieldValidation"); v {
	case "":
		return FieldValidationWarn, nil
	case string(FieldValidationIgnore), string(FieldValidationWarn), string(FieldValidationStrict):
		return FieldValidation(v), nil
	default:
		return "", respond.BadRequest("fieldValidation parameter unsupported: %q: must be one of Ignore, Warn or Strict", v)
	}
}

// StrictProblems lists the unknown and duplicate fields of a JSON body as
// kube-apiserver words them (`unknown field "spec.foo"`). Built-in types
// are checked against their Go type; custom resources, which have no
// schema, for duplicates anywhere and unknown fields in metadata.
// Syntax and type errors are left to the ordinary decoding.
func StrictProblems(r *registry.Resource, js []byte) []string {
	var errs []error
	var err error
	if r.CR != nil {
		return customProblems(r, js)
	}
	if r.Custom {
		var m map[string]any
		errs, err = sigsjson.UnmarshalStrict(js, &m, sigsjson.DisallowDuplicateFields)
		if err != nil {
			return nil
		}
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		metaErrs, err := sigsjson.UnmarshalStrict(js, &meta, sigsjson.DisallowUnknownFields)
		if err != nil {
			return nil
		}
		for _, e := range metaErrs {
			if strings.Contains(e.Error(), `field "metadata.`) {
				errs = append(errs, e)
			}
		}
	} else {
		typed := r.NewTyped()
		if typed == nil {
			return nil
		}
		errs, err = sigsjson.UnmarshalStrict(js, typed, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		if err != nil {
			return nil
		}
	}
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// Enforce applies fv to problems: Strict fails the request with 400,
// Warn sends each as a Warning header, Ignore drops them.
func Enforce(w http.ResponseWriter, r *registry.Resource, fv FieldValidation, problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	switch fv {
	case FieldValidationStrict:
		return CannotHandle(r, fmt.Errorf("strict decoding error: %s", strings.Join(problems, ", ")))
	case FieldValidationWarn:
		for _, p := range problems {
			respond.Warning(w, p)
		}
	}
	return nil
}

// Request reads the body of a create or update of r in any accepted
// format, applies the fieldValidation directive and decodes it.
//
// For a built-in resource it also returns the object decoded into its Go
// type (nil for a custom resource); with typedOnly, only that (see
// Typed).
func Request(w http.ResponseWriter, r *http.Request, res *registry.Resource, body []byte, typedOnly bool) (*unstructured.Unstructured, runtime.Object, error) {
	fv, err := ParseFieldValidation(r)
	if err != nil {
		return nil, nil, err
	}
	format, err := RequestFormat(r, res, res.Protobuf())
	if err != nil {
		return nil, nil, err
	}
	if format == Protobuf && res.HasGoType() {
		// Protobuf has no unknown or duplicate fields to report.
		if u, ext, ok, err := TypedProtobuf(res, body, typedOnly); ok || err != nil {
			return u, ext, err
		}
	}
	js, err := ToJSON(res, format, body)
	if err != nil {
		return nil, nil, err
	}
	var u *unstructured.Unstructured
	var ext runtime.Object
	var problems []string
	if res.HasGoType() {
		u, ext, problems, err = Typed(res, js, typedOnly)
		if err != nil && format != Protobuf && len(bytes.TrimSpace(js)) > 0 {
			// A body refused is answered with kube-apiserver's
			// decoder's error, when that refuses it too.
			if kerr := res.BodyError(js); kerr != nil {
				err = kerr
			}
		}
	} else {
		// kube-apiserver's decoder of custom resources reads a JSON
		// body's apiVersion and kind first, with encoding/json, and words
		// a body that does not parse so (nested past 10,000 levels, say)
		// as one of no known kind.
		if format == JSON {
			if _, kerr := kubejson.DefaultMetaFactory.Interpret(js); kerr != nil {
				return nil, nil, Unrecognized(res, kerr, body)
			}
		}
		u, err = Body(res, js)
	}
	if err != nil {
		return nil, nil, err
	}
	// Protobuf has no unknown or duplicate fields to report, and Ignore
	// need not look for them.
	if format != Protobuf && fv != FieldValidationIgnore {
		if !res.HasGoType() {
			problems = StrictProblems(res, js)
		}
		if err := Enforce(w, res, fv, problems); err != nil {
			return nil, nil, err
		}
	}
	return u, ext, nil
}

// New decodes the body of a create of res (Request) as the
// object to create: its Go type for a built-in resource.
func New(w http.ResponseWriter, r *http.Request, res *registry.Resource, body []byte) (registry.Object, error) {
	u, ext, err := Request(w, r, res, body, true)
	if err != nil {
		return nil, err
	}
	return NewObject(u, ext)
}

// DryRun reads the dryRun query parameter: true for "All". Any other
// value is refused as kube-apiserver's handlers refuse it, a 422 naming
// the options of the request's verb.
func DryRun(r *http.Request) (bool, error) {
	vals := r.URL.Query()["dryRun"]
	if errs := metav1validation.ValidateDryRun(field.NewPath("dryRun"), vals); len(errs) > 0 {
		kind := map[string]string{
			http.MethodPost: "CreateOptions", http.MethodPut: "UpdateOptions",
			http.MethodPatch: "PatchOptions", http.MethodDelete: "DeleteOptions",
		}[r.Method]
		return false, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	return len(vals) > 0, nil
}
