package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	kjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/handlers"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
)

// A patch is answered as kube-apiserver's patch handler
// (k8s.io/apiserver/pkg/endpoints/handlers/patch.go) answers it, errors
// included: the patch is checked to be JSON first; the patch document is
// decoded, and applied, to the stored object once it is found (a patch of a
// missing object is 404 whatever the document); and a patched object its
// decoder refuses is a 422 on the field "patch" quoting that object.

// maxJSONPatchOperations is the most operations kube-apiserver applies in
// one JSON patch.
const maxJSONPatchOperations = 10000

// maxJSONPatchCopyBytes bounds how many bytes the copy operations of one
// JSON patch may add, as kube-apiserver's JSONPatchMaxCopyBytes (3 MiB)
// does: without it, each copy of a document into itself doubles it, and 30
// operations of a 100-byte object ask for 100 GB. A patch over it is a 422
// quoting json-patch's error, kube's answer.
const maxJSONPatchCopyBytes = 3 << 20

func init() {
	// json-patch reads the bound from a package variable, set here before
	// any patch can be applied (kube-apiserver sets it when it builds its
	// server).
	jsonpatch.AccumulatedCopySizeLimit = maxJSONPatchCopyBytes
}

// patchTypes are the patch formats applied to objects of r, in
// kube-apiserver's order: no strategic merge patch for custom resources,
// which have no Go type to take merge keys from; server-side apply
// (apply.go) for every resource. (kube-apiserver v1.37 accepts the CBOR
// apply type only behind an alpha feature gate, off by default.)
func patchTypes(r *resource) []string {
	pts := []string{string(types.JSONPatchType), string(types.MergePatchType)}
	if r.StrategicMerge() {
		pts = append(pts, string(types.StrategicMergePatchType))
	}
	return append(pts, string(types.ApplyYAMLPatchType))
}

// patchTypeOf reads a patch's Content-Type, without its parameters. Any
// other is refused as kube-apiserver refuses it: for a built-in resource by
// the route of its REST handlers (go-restful), which accepts nothing else,
// with go-restful's message; for a custom resource by the patch handler,
// with the types it accepts.
func patchTypeOf(r *http.Request, res *resource) (types.PatchType, error) {
	ct := r.Header.Get("Content-Type")
	if i := strings.Index(ct, ";"); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	supported := patchTypes(res)
	if slices.Contains(supported, ct) {
		return types.PatchType(ct), nil
	}
	if !res.StrategicMerge() {
		// The custom resource handler's answer.
		return "", negotiation.NewUnsupportedMediaTypeError(supported)
	}
	return "", apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "",
		"415: Unsupported Media Type", 0, false)
}

// patcher applies one patch document to objects of res.
type patcher struct {
	res   *resource
	pt    types.PatchType
	patch []byte
	fv    decode.FieldValidation
	// decodeErr is the patch document's own decoding error, answered when
	// the patch is applied.
	decodeErr error
	// problems are the unknown and duplicate fields of the document, as
	// fieldValidation reports them.
	problems []string
	// doc and patched are the last strategic merge patch applied, as
	// applying it left it, and its result.
	doc, patched map[string]any
}

// newPatcher checks a patch document of type pt: 400 when it is not JSON,
// before anything else. Decoding it is left to apply, but for its strict
// problems.
func newPatcher(res *resource, pt types.PatchType, patch []byte, fv decode.FieldValidation) (*patcher, error) {
	// kube-apiserver's check first, which calls a document nested past
	// 10,000 levels invalid; then the bound below that (decode.MaxDepth).
	if !json.Valid(patch) {
		return nil, respond.BadRequest("invalid JSON patch")
	}
	if d := decode.Depth(patch); d > decode.MaxDepth {
		return nil, decode.TooDeep("the patch", d)
	}
	p := &patcher{res: res, pt: pt, patch: patch, fv: fv}
	// kube-apiserver decodes the document strictly under Warn (its
	// default) and Strict.
	strict := fv != decode.FieldValidationIgnore
	var strictErrs []error
	var err error
	switch pt {
	case types.JSONPatchType:
		if strict {
			if strictErrs, err = handlers.DecodeJSONPatchStrict(patch); err != nil {
				p.decodeErr = respond.BadRequest("error decoding patch: %v", err)
				break
			}
		}
		ops, err := jsonpatch.DecodePatch(patch)
		switch {
		case err != nil:
			p.decodeErr = apierrors.NewBadRequest(err.Error())
		case len(ops) > maxJSONPatchOperations:
			p.decodeErr = apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
				"The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(ops)))
		}
	case types.MergePatchType:
		if strict {
			if strictErrs, err = kjson.UnmarshalStrict(patch, &map[string]any{}); err != nil {
				p.decodeErr = respond.BadRequest("error decoding patch: %v", err)
			}
		}
	case types.StrategicMergePatchType:
		_, strictErrs, p.decodeErr = p.smpDocument()
	}
	for _, e := range strictErrs {
		p.problems = append(p.problems, e.Error())
	}
	return p, nil
}

// smpDocument decodes a strategic merge patch, afresh for each attempt:
// applying it consumes its directives.
func (p *patcher) smpDocument() (map[string]any, []error, error) {
	doc := map[string]any{}
	if p.fv != decode.FieldValidationIgnore {
		strictErrs, err := kjson.UnmarshalStrict(p.patch, &doc)
		if err != nil {
			return nil, nil, apierrors.NewBadRequest(err.Error())
		}
		return doc, strictErrs, nil
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(p.patch, &doc); err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	return doc, nil, nil
}

// apply applies the patch to cur (a private copy, which it may change)
// and returns the patched object's JSON.
func (p *patcher) apply(cur object) ([]byte, error) {
	if p.decodeErr != nil {
		return nil, p.decodeErr
	}
	if p.pt == types.StrategicMergePatchType {
		return p.applyStrategic(cur)
	}
	orig, err := registry.MarshalJSON(cur)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return p.applyJSON(orig)
}

// decodeFailed is the answer to a patch whose result patched, applied to
// cur, the server cannot decode (err): kube-apiserver's, when its decoder
// refuses the object too.
func (p *patcher) decodeFailed(cur object, patched []byte, err error) error {
	if p.pt == types.StrategicMergePatchType {
		// kube-apiserver converts the patched map into the Go type, and
		// quotes the patch.
		typed := p.res.NewTyped()
		if typed == nil || p.patched == nil {
			return err
		}
		if cerr := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(p.patched, typed, false); cerr != nil {
			return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
				field.Invalid(field.NewPath("patch"), fmt.Sprintf("%+v", p.doc), cerr.Error()),
			})
		}
		return err
	}
	if p.res.DecodeError(patched) == nil {
		return err
	}
	return p.undecodable(cur, patched)
}

// applyJSON applies a JSON or merge patch to the JSON of an object.
func (p *patcher) applyJSON(orig []byte) ([]byte, error) {
	if p.pt == types.JSONPatchType {
		ops, err := jsonpatch.DecodePatch(p.patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		// json-patch v4 dereferences the missing value of a "test"
		// operation (found by FuzzJSONPatch): refuse it as RFC 6902
		// does, a test needing a value to compare with.
		for _, op := range ops {
			if _, ok := op["value"]; op.Kind() == "test" && !ok {
				path, _ := op.Path()
				return nil, unprocessablePatch(fmt.Sprintf("test operation for path %q has no value", path))
			}
		}
		out, err := applyJSONPatch(ops, orig)
		if err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
		return out, nil
	}
	out, err := jsonpatch.MergePatch(orig, p.patch)
	if errors.Is(err, jsonpatch.ErrBadJSONPatch) {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return out, err
}

// undecodable is kube-apiserver's answer to a JSON or merge patch that
// leaves an object its decoder refuses: 422 on the field "patch", quoting
// the patched object as kube-apiserver patches it, the stored object
// encoded by its codec (so that the quote has its field order).
func (p *patcher) undecodable(cur object, patched []byte) error {
	if orig, err := p.res.EncodeAsKube(cur); err == nil {
		if out, err := p.applyJSON(orig); err == nil {
			patched = out
		}
	}
	err := p.res.DecodeError(patched)
	if err == nil {
		err = errors.New("the patched object cannot be decoded")
	}
	return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
		field.Invalid(field.NewPath("patch"), string(patched), err.Error()),
	})
}

// applyStrategic applies a strategic merge patch to cur as a map (as
// kube-apiserver's patcher does), with the merge keys of the resource's
// Go type, answering as kube-apiserver does when that fails.
func (p *patcher) applyStrategic(cur object) ([]byte, error) {
	typed := p.res.NewTyped()
	if typed == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("no Go type for %s", p.res.GVK))
	}
	doc, _, err := p.smpDocument()
	if err != nil {
		return nil, err
	}
	u, err := p.res.AsMap(cur)
	if err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergeMapPatch(u.Object, doc, typed)
	if err != nil {
		return nil, interpretStrategicMergePatchError(err)
	}
	p.doc, p.patched = doc, patched
	out, err := json.Marshal(patched)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}

// interpretStrategicMergePatchError is kube-apiserver's answer to a
// strategic merge patch that cannot be applied: 400 for a malformed patch,
// 422 for one that does not fit the object, and any other error as it is.
func interpretStrategicMergePatchError(err error) error {
	switch {
	case errors.Is(err, mergepatch.ErrBadJSONDoc), errors.Is(err, mergepatch.ErrBadPatchFormatForPrimitiveList),
		errors.Is(err, mergepatch.ErrBadPatchFormatForRetainKeys), errors.Is(err, mergepatch.ErrBadPatchFormatForSetElementOrderList),
		errors.Is(err, mergepatch.ErrUnsupportedStrategicMergePatchFormat):
		return apierrors.NewBadRequest(err.Error())
	case errors.Is(err, mergepatch.ErrNoListOfLists), errors.Is(err, mergepatch.ErrPatchContentNotMatchRetainKeys):
		return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
	}
	// Anything else reaches kube-apiserver's error writer as a plain error,
	// which it answers 500 with the error's text and no reason (golden
	// case core-pods-patch-errors: a list item without its merge key, a
	// directive naming no field, an unknown $patch).
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error()}}
}

func (s *Server) handlePatch(w http.ResponseWriter, r *http.Request, req request) error {
	res := req.res
	if req.sub == "scale" {
		res = scaleResource
	}
	pt, err := patchTypeOf(r, req.res)
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var force bool
	if req.manage, force, err = writeOptions(r, "patch", pt); err != nil {
		return err
	}
	fv, err := decode.ParseFieldValidation(r)
	if err != nil {
		return err
	}
	if pt == types.ApplyYAMLPatchType {
		return s.handleApply(w, r, req, body, fv, force)
	}
	p, err := newPatcher(res, pt, body, fv)
	if err != nil {
		return err
	}
	if fv != decode.FieldValidationIgnore {
		if err := decode.Enforce(w, req.res, fv, p.problems); err != nil {
			return err
		}
	}
	if req.sub == "scale" {
		return s.updateScale(w, r, req, p.apply)
	}
	// Unknown fields can only come from the patch (the stored object has
	// none), so the patched object is checked; the last attempt's findings
	// are the ones reported.
	var problems []string
	typed := s.typedUpdate(req)
	out, err := s.update(r.Context(), req, func(cur object) (object, error) {
		patched, err := p.apply(cur)
		if err != nil {
			return nil, err
		}
		var obj object
		if typed {
			// Where the update goes on as the Go type, one strict pass
			// decodes the object and finds its unknown fields. One that
			// does not decode so goes the map's way below, which words
			// the error as it always has.
			if _, ext, found, err := decode.Typed(req.res, patched, true); err == nil {
				if obj, err = decode.NewObject(nil, ext); err == nil {
					problems = found
				}
			}
		}
		if obj == nil {
			// An object that cannot be decoded is refused before its
			// unknown fields, as kube-apiserver does.
			u, err := decode.Body(req.res, patched)
			if err != nil {
				return nil, p.decodeFailed(cur, patched, err)
			}
			if fv != decode.FieldValidationIgnore {
				problems = decode.StrictProblems(req.res, patched)
			}
			obj = u
		}
		if fv == decode.FieldValidationStrict && len(problems) > 0 {
			return nil, p.strictInvalid(cur, patched, problems)
		}
		if obj.GetName() != req.name {
			return nil, respond.BadRequest("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), req.name)
		}
		if err := checkNamespace(req, obj); err != nil {
			return nil, err
		}
		if obj.GetResourceVersion() == "" {
			// A patch that drops resourceVersion applies to the current
			// version: a patch is unconditional unless it names one.
			obj.SetResourceVersion(cur.GetResourceVersion())
		}
		return obj, nil
	})
	if err != nil {
		return err
	}
	if err := decode.Enforce(w, req.res, fv, problems); err != nil {
		return err
	}
	return writeObject(w, r, req.res, http.StatusOK, out)
}

// strictInvalid is kube-apiserver's answer to a patch, under
// fieldValidation=Strict, whose result has unknown or duplicate fields
// (problems): 422 on the field "patch", quoting the patched object as
// kube-apiserver patches it (a JSON or merge patch) or the patch document
// (a strategic merge patch), with the strict decoding error.
func (p *patcher) strictInvalid(cur object, patched []byte, problems []string) error {
	msg := "strict decoding error: " + strings.Join(problems, ", ")
	value := string(patched)
	switch {
	case p.pt == types.StrategicMergePatchType:
		value = fmt.Sprintf("%+v", p.doc)
	default:
		if orig, err := p.res.EncodeAsKube(cur); err == nil {
			if out, err := p.applyJSON(orig); err == nil {
				value = string(out)
			}
		}
	}
	return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
		field.Invalid(field.NewPath("patch"), value, msg),
	})
}

// unprocessablePatch is a 422 Invalid saying why a JSON patch cannot
// apply.
func unprocessablePatch(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: msg,
	}}
}

// applyJSONPatch applies ops to doc, a panic of the library on a patch it
// did not foresee answered as a patch that does not apply rather than
// ending the request.
func applyJSONPatch(ops jsonpatch.Patch, doc []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("the JSON patch could not be applied: %v", r)
		}
	}()
	return ops.Apply(doc)
}
