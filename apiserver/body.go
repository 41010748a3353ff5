package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
)

// Request bodies arrive as JSON (kubectl, dynamic clients), YAML (curl
// users) or the Kubernetes protobuf envelope (typed client-go clients such
// as `kubectl create deployment`). All three become the same unstructured
// map, so every rule after decoding has one code path.

const mediaYAML = "application/yaml"

// bodyFormat is the serialization of a request body.
type bodyFormat int

const (
	bodyJSON bodyFormat = iota
	bodyYAML
	bodyProtobuf
)

// requestFormat reads Content-Type: JSON when absent (kube-apiserver's
// default), 415 for anything it cannot decode. allowProto is false for
// custom resources, which have no protobuf form.
func requestFormat(r *http.Request, res *resource, allowProto bool) (bodyFormat, error) {
	ct := r.Header.Get("Content-Type")
	if strings.TrimSpace(ct) == "" {
		return bodyJSON, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
	case mt == mediaJSON:
		return bodyJSON, nil
	case mt == mediaYAML:
		return bodyYAML, nil
	case mt == mediaProtobuf && allowProto:
		return bodyProtobuf, nil
	}
	accepted := mediaJSON + ", " + mediaYAML
	if allowProto {
		accepted += ", " + mediaProtobuf
	}
	gr := metav1.SchemeGroupVersion.WithResource("").GroupResource()
	if res != nil {
		gr = res.GR()
	}
	return bodyJSON, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, strings.ToLower(r.Method), gr, "",
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s", accepted), 0, false)
}

// toJSONBody turns a body of any accepted format into JSON. Protobuf is
// decoded through the typed scheme and re-encoded, so the JSON carries
// apiVersion and kind from the envelope.
func toJSONBody(r *resource, format bodyFormat, body []byte) ([]byte, error) {
	switch format {
	case bodyYAML:
		js, err := utilyaml.ToJSON(body)
		if err != nil {
			return nil, cannotHandle(r, err)
		}
		return js, nil
	case bodyProtobuf:
		obj, gvk, err := protoSerializer.Decode(body, nil, nil)
		if err != nil {
			return nil, cannotHandle(r, err)
		}
		js, err := json.Marshal(obj)
		if err != nil {
			return nil, cannotHandle(r, err)
		}
		m := map[string]any{}
		if err := json.Unmarshal(js, &m); err != nil {
			return nil, cannotHandle(r, err)
		}
		if gvk != nil {
			m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
		}
		return json.Marshal(m)
	}
	return body, nil
}

// fieldValidation is the fieldValidation query parameter: what to do with
// unknown and duplicate fields in a body.
type fieldValidation string

const (
	fieldValidationIgnore fieldValidation = metav1.FieldValidationIgnore
	fieldValidationWarn   fieldValidation = metav1.FieldValidationWarn
	fieldValidationStrict fieldValidation = metav1.FieldValidationStrict
)

// parseFieldValidation reads fieldValidation; kube-apiserver's default is
// Warn.
func parseFieldValidation(r *http.Request) (fieldValidation, error) {
	switch v := r.URL.Query().Get("fieldValidation"); v {
	case "":
		return fieldValidationWarn, nil
	case string(fieldValidationIgnore), string(fieldValidationWarn), string(fieldValidationStrict):
		return fieldValidation(v), nil
	default:
		return "", badRequest("fieldValidation parameter unsupported: %q: must be one of Ignore, Warn or Strict", v)
	}
}

// strictProblems lists the unknown and duplicate fields of a JSON body as
// kube-apiserver words them (`unknown field "spec.foo"`). Built-in types
// are checked against their Go type; custom resources, which have no
// schema, for duplicates anywhere and unknown fields in metadata.
// Syntax and type errors are left to the ordinary decoding.
func strictProblems(r *resource, js []byte) []string {
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

// enforce applies fv to problems: Strict fails the request with 400,
// Warn sends each as a Warning header, Ignore drops them.
func enforce(w http.ResponseWriter, r *resource, fv fieldValidation, problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	switch fv {
	case fieldValidationStrict:
		return cannotHandle(r, fmt.Errorf("strict decoding error: %s", strings.Join(problems, ", ")))
	case fieldValidationWarn:
		for _, p := range problems {
			addWarning(w, p)
		}
	}
	return nil
}

// addWarning adds an RFC 7234 warning (code 299, agent "-") as
// kube-apiserver does; kubectl prints each one as "Warning: <text>".
func addWarning(w http.ResponseWriter, msg string) {
	if w == nil {
		return
	}
	w.Header().Add("Warning", "299 - "+strconv.Quote(msg))
}

// decodeRequest reads the body of a create or update of r in any accepted
// format, applies the fieldValidation directive and decodes it.
//
// For a built-in resource it also returns the object decoded into its Go
// type (nil for a custom resource); with typedOnly, only that (see
// decodeTyped).
func decodeRequest(w http.ResponseWriter, r *http.Request, res *resource, body []byte, typedOnly bool) (*unstructured.Unstructured, runtime.Object, error) {
	fv, err := parseFieldValidation(r)
	if err != nil {
		return nil, nil, err
	}
	format, err := requestFormat(r, res, res.Protobuf())
	if err != nil {
		return nil, nil, err
	}
	js, err := toJSONBody(res, format, body)
	if err != nil {
		return nil, nil, err
	}
	var u *unstructured.Unstructured
	var ext runtime.Object
	var problems []string
	if res.HasGoType() {
		u, ext, problems, err = decodeTyped(res, js, typedOnly)
		if err != nil && format != bodyProtobuf && len(bytes.TrimSpace(js)) > 0 {
			// A body refused is answered with kube-apiserver's
			// decoder's error, when that refuses it too.
			if kerr := res.BodyError(js); kerr != nil {
				err = kerr
			}
		}
	} else {
		u, err = decodeBody(res, js)
	}
	if err != nil {
		return nil, nil, err
	}
	// Protobuf has no unknown or duplicate fields to report, and Ignore
	// need not look for them.
	if format != bodyProtobuf && fv != fieldValidationIgnore {
		if !res.HasGoType() {
			problems = strictProblems(res, js)
		}
		if err := enforce(w, res, fv, problems); err != nil {
			return nil, nil, err
		}
	}
	return u, ext, nil
}

// decodeNew decodes the body of a create of res (decodeRequest) as the
// object to create: its Go type for a built-in resource.
func decodeNew(w http.ResponseWriter, r *http.Request, res *resource, body []byte) (object, error) {
	u, ext, err := decodeRequest(w, r, res, body, true)
	if err != nil {
		return nil, err
	}
	return newObject(u, ext)
}

// dryRun reads the dryRun query parameter: true for "All". Any other
// value is refused as kube-apiserver's handlers refuse it, a 422 naming
// the options of the request's verb.
func dryRun(r *http.Request) (bool, error) {
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
