package apiserver

import (
	"encoding/json"
	"mime"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// patchTypes are the patch formats this server applies.
var patchTypes = map[string]types.PatchType{
	string(types.JSONPatchType):           types.JSONPatchType,
	string(types.MergePatchType):          types.MergePatchType,
	string(types.StrategicMergePatchType): types.StrategicMergePatchType,
}

func unsupportedPatch(r *resource) error {
	accepted := "application/json-patch+json, application/merge-patch+json"
	if !r.custom {
		accepted += ", application/strategic-merge-patch+json"
	}
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", r.gr(), "",
		"the body of the request was in an unknown format - accepted media types include: "+accepted, 0, false)
}

// applyPatch applies a patch document of type pt to the JSON of an object
// of r (typed gives strategic merge patch its merge keys).
func applyPatch(r *resource, pt types.PatchType, original, patch []byte) ([]byte, error) {
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, badRequest("error decoding patch: %v", err)
		}
		out, err := p.Apply(original)
		if err != nil {
			return nil, patchFailed(err)
		}
		return out, nil
	case types.MergePatchType:
		if !json.Valid(patch) {
			return nil, badRequest("error decoding patch: invalid JSON")
		}
		out, err := jsonpatch.MergePatch(original, patch)
		if err != nil {
			return nil, patchFailed(err)
		}
		return out, nil
	case types.StrategicMergePatchType:
		typed := r.newTyped()
		if typed == nil {
			return nil, unsupportedPatch(r)
		}
		var doc map[string]any
		if err := json.Unmarshal(patch, &doc); err != nil {
			return nil, badRequest("error decoding patch: %v", err)
		}
		out, err := strategicpatch.StrategicMergePatch(original, patch, typed)
		if err != nil {
			return nil, patchFailed(err)
		}
		return out, nil
	}
	return nil, unsupportedPatch(r)
}

func patchFailed(err error) error {
	return newStatus(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "the patch could not be applied: "+err.Error())
}

func (s *Server) handlePatch(w http.ResponseWriter, r *http.Request, req request) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	pt, ok := patchTypes[mt]
	if err != nil || !ok || (pt == types.StrategicMergePatchType && req.res.custom) {
		return unsupportedPatch(req.res)
	}
	patch, err := readBody(r)
	if err != nil {
		return err
	}
	fv, err := parseFieldValidation(r)
	if err != nil {
		return err
	}
	if fv != fieldValidationIgnore {
		if err := enforce(w, req.res, fv, duplicateFields(patch)); err != nil {
			return err
		}
	}
	if req.sub == "scale" {
		return s.updateScale(w, r, req, func(cur *unstructured.Unstructured) ([]byte, error) {
			orig, err := json.Marshal(cur.Object)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			return applyPatch(scaleResource, pt, orig, patch)
		})
	}
	// Unknown fields can only come from the patch (the stored object has
	// none), so the patched object is checked; the last attempt's findings
	// are the ones reported.
	var problems []string
	out, err := s.update(r.Context(), req, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		orig, err := json.Marshal(cur.Object)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		patched, err := applyPatch(req.res, pt, orig, patch)
		if err != nil {
			return nil, err
		}
		if fv != fieldValidationIgnore {
			problems = strictProblems(req.res, patched)
		}
		if fv == fieldValidationStrict {
			if err := enforce(nil, req.res, fv, problems); err != nil {
				return nil, err
			}
		}
		u, err := decodeBody(req.res, patched)
		if err != nil {
			return nil, err
		}
		if u.GetName() != req.name {
			return nil, badRequest("the name of the object (%s) does not match the name on the URL (%s)", u.GetName(), req.name)
		}
		if err := checkNamespace(req, u); err != nil {
			return nil, err
		}
		if u.GetResourceVersion() == "" {
			// A patch that drops resourceVersion applies to the current
			// version: a patch is unconditional unless it names one.
			u.SetResourceVersion(cur.GetResourceVersion())
		}
		return u, nil
	})
	if err != nil {
		return err
	}
	if err := enforce(w, req.res, fv, problems); err != nil {
		return err
	}
	return writeObject(w, r, req.res, http.StatusOK, out)
}
