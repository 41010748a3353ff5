package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
)

// Server-side apply (PATCH with application/apply-patch+yaml) is answered
// as kube-apiserver's patch handler answers it
// (k8s.io/apiserver/pkg/endpoints/handlers/patch.go, applyPatcher): the
// applied configuration is merged into the stored object by the field
// manager (managedfields.go), which records it as an Apply entry and
// answers a conflict with other managers' fields with its 409; the result
// then goes through admission, the strategy and validation as any update
// does. Applying to an object that does not exist creates it.

// handleApply applies body, an apply configuration in YAML (or JSON), to
// the object req names, under req.manage's manager; force takes the
// conflicting fields from their managers.
func (s *Server) handleApply(w http.ResponseWriter, r *http.Request, req request, body []byte, fv decode.FieldValidation, force bool) error {
	// The field manager's cost grows faster than the depth it merges
	// (decode.MaxDepth), and parsing a configuration as YAML costs about
	// 300 bytes for each of its own: a configuration in JSON, which
	// encoding/json takes (nested no more than 10,000 levels), is measured
	// before it is parsed; any other after.
	if utilyaml.IsJSONBuffer(body) && json.Valid(body) {
		if d := decode.Depth(body); d > decode.MaxDepth {
			return decode.TooDeep("the apply configuration", d)
		}
		if req.res.Custom {
			if err := decode.CheckStorable(body); err != nil {
				return err
			}
		}
	}
	if _, err := utilyaml.ToJSON(body); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("error encoding patch: %v", err))
	}
	applied := &unstructured.Unstructured{Object: map[string]any{}}
	if err := utilyaml.Unmarshal(body, &applied.Object); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	if d := decode.ObjectDepth(applied.Object); d > decode.MaxDepth {
		return decode.TooDeep("the apply configuration", d)
	}
	req.manage.applied = true
	if req.sub == "scale" {
		return s.applyScale(w, r, req, applied, force)
	}
	fm, err := req.res.FieldManager(req.sub)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	manager := req.manage.manager
	// strict reports the duplicate fields of the document after a merge
	// that succeeded, as kube-apiserver does: a 400 under Strict, one
	// warning under Warn.
	var warning string
	strict := func() error {
		if fv == decode.FieldValidationIgnore {
			return nil
		}
		if err := utilyaml.UnmarshalStrict(body, &map[string]any{}); err != nil {
			if fv == decode.FieldValidationStrict {
				return apierrors.NewBadRequest(fmt.Sprintf("error strict decoding patch: %v", err))
			}
			warning = err.Error()
		}
		return nil
	}
	// merged checks the result of a merge as the patch handler does: a
	// map, or the live object's Go type where the merge changed nothing.
	merged := func(obj runtime.Object) (object, error) {
		if err := strict(); err != nil {
			return nil, err
		}
		o, err := registry.AsObject(obj)
		if err != nil {
			return nil, err
		}
		if err := checkNamespace(req, o); err != nil {
			return nil, err
		}
		if o.GetName() != req.name {
			return nil, respond.BadRequest("the name of the object (%s) does not match the name on the URL (%s)", o.GetName(), req.name)
		}
		return o, nil
	}
	out, err := s.update(r.Context(), req, func(cur object) (object, error) {
		obj, err := fm.Apply(cur, applied.DeepCopy(), manager, force)
		if err != nil {
			return nil, applyError(err)
		}
		u, err := merged(obj)
		if err != nil {
			return nil, err
		}
		if u.GetResourceVersion() == "" {
			// An apply is unconditional unless it names a version.
			u.SetResourceVersion(cur.GetResourceVersion())
		}
		return u, nil
	})
	if err == nil {
		if warning != "" {
			respond.Warning(w, warning)
		}
		return writeObject(w, r, req.res, http.StatusOK, out)
	}
	if !apierrors.IsNotFound(err) || req.sub != "" {
		return err
	}
	created, err := s.applyCreate(r, req, fm, applied, force, merged)
	if err != nil {
		return err
	}
	if warning != "" {
		respond.Warning(w, warning)
	}
	return writeObject(w, r, req.res, http.StatusCreated, created)
}

// applyCreate creates the object an apply names when none is stored, as
// kube-apiserver does: the configuration applied to an empty object, then
// the ordinary create.
func (s *Server) applyCreate(r *http.Request, req request, fm fieldApplier, applied *unstructured.Unstructured, force bool, merged func(runtime.Object) (object, error)) (object, error) {
	empty := req.res.NewEmpty()
	obj, err := fm.Apply(empty, applied.DeepCopy(), req.manage.manager, force)
	if err != nil {
		return nil, applyError(err)
	}
	o, err := merged(obj)
	if err != nil {
		return nil, err
	}
	if uid := o.GetUID(); uid != "" {
		return nil, apierrors.NewConflict(req.res.GR(), req.name,
			fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid))
	}
	// A built-in object is created as its Go type (a custom resource as
	// the map), which the merge gave where it changed nothing of the empty
	// object.
	u, isMap := o.(*unstructured.Unstructured)
	if typed := req.res.NewTyped(); typed != nil && isMap {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return nil, decode.CannotHandle(req.res, err)
		}
		typed.GetObjectKind().SetGroupVersionKind(req.res.GVK)
		if o, err = registry.AsObject(typed); err != nil {
			return nil, err
		}
	}
	created, _, err := s.create(r.Context(), req, o)
	return created, err
}

// fieldApplier is what an apply needs of a field manager.
type fieldApplier interface {
	Apply(liveObj, appliedObj runtime.Object, manager string, force bool) (runtime.Object, error)
}

// applyError is the answer to a merge that failed: the field manager's
// own Status errors (a conflict's 409, a bad request) as they are, and any
// other error as kube-apiserver answers an error without a status, a 500.
func applyError(err error) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error(),
	}}
}

// applyScale applies a Scale to the scale subresource of the object req
// names, as kube-apiserver's scale subresources do: the parent's
// managedFields seen as the Scale's, the Scale's field manager merging
// the configuration, its replicas written to the parent and the managed
// fields mapped back to it. The answer is the Scale.
func (s *Server) applyScale(w http.ResponseWriter, r *http.Request, req request, applied *unstructured.Unstructured, force bool) error {
	if req.res.Scale == nil {
		return apierrors.NewNotFound(req.res.GR(), req.name)
	}
	fm, err := req.res.FieldManager(registry.ScaleSubresource)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	out, err := s.update(r.Context(), req, func(stored object) (object, error) {
		cur, err := req.res.AsMap(stored)
		if err != nil {
			return nil, err
		}
		h, err := scaleHandler(req.res, cur.GetManagedFields())
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		curScale, err := toScale(req.res, cur)
		if err != nil {
			return nil, err
		}
		entries, err := h.ToSubresource()
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		curScale.SetManagedFields(entries)
		obj, err := fm.Apply(curScale, applied.DeepCopy(), req.manage.manager, force)
		if err != nil {
			return nil, applyError(err)
		}
		sc, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, apierrors.NewInternalError(fmt.Errorf("apply: merged Scale is %T", obj))
		}
		if sc.GetName() != req.name {
			return nil, respond.BadRequest("the name of the object (%s) does not match the name on the URL (%s)", sc.GetName(), req.name)
		}
		if err := setScaleReplicas(req, cur, sc); err != nil {
			return nil, err
		}
		parent, err := h.ToParent(sc.GetManagedFields())
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		cur.SetManagedFields(parent)
		if rv := sc.GetResourceVersion(); rv != "" {
			cur.SetResourceVersion(rv)
		}
		return cur, nil
	})
	if err != nil {
		return err
	}
	scale, err := toScale(req.res, out)
	if err != nil {
		return err
	}
	return writeObject(w, r, scaleResource, http.StatusOK, scale)
}
