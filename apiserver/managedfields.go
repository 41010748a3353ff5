package apiserver

import (
	"bytes"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
)

// metadata.managedFields is kept as kube-apiserver keeps it, by the field
// manager of k8s.io/apimachinery/pkg/util/managedfields (structured merge
// diff over the OpenAPI models of the served types, and a custom
// resource's schema): every create, update and patch records an Update
// entry for its manager before admission and the strategy run, as
// kube-apiserver's handlers do; a server-side apply (apply.go) merges
// through the same manager and records an Apply entry. The writes the
// server makes itself (scale, binding, CRD status) keep the stored
// managedFields.

// fieldManagement says under which manager a request's write is recorded
// in metadata.managedFields.
type fieldManagement struct {
	// manager is the fieldManager query parameter, or the prefix of the
	// User-Agent before its first "/" (kube-apiserver's default).
	manager string
	// applied is set on a server-side apply, whose merge already recorded
	// the write: the write records no Update entry.
	applied bool
	// asked are the fieldManager and fieldValidation query parameters as
	// given, which admission webhooks receive in the write's options.
	asked kube.WriteOptions
}

// managerOf is the field manager of r: the fieldManager query parameter,
// else the User-Agent up to its first "/", without unprintable characters
// and cut to the length a manager name may have (kube-apiserver's rule).
func managerOf(r *http.Request, fieldManager string) string {
	if fieldManager != "" {
		return fieldManager
	}
	ua, _, _ := strings.Cut(r.UserAgent(), "/")
	var b bytes.Buffer
	for _, c := range ua {
		if !unicode.IsPrint(c) {
			continue
		}
		if b.Len()+utf8.RuneLen(c) > metav1validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(c)
	}
	return b.String()
}

// writeOptions reads the query parameters of a write that
// managedFields depend on (fieldManager; force for a patch), and
// fieldValidation, as kube-apiserver's parameter codec does, and
// validates them as its handlers do: a 400 for a value that does not parse, a 422 naming the
// options kind for an invalid one. verb is "create", "update" or "patch";
// pt is the patch type of a patch.
func writeOptions(r *http.Request, verb string, pt types.PatchType) (*fieldManagement, bool, error) {
	var opts metav1.PatchOptions
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, &opts); err != nil {
		return nil, false, apierrors.NewBadRequest(err.Error())
	}
	asked := kube.WriteOptions{FieldManager: opts.FieldManager, FieldValidation: opts.FieldValidation}
	// dryRun is checked on its own (decode.DryRun).
	opts.DryRun = nil
	var errs field.ErrorList
	kind := "PatchOptions"
	switch verb {
	case "create":
		kind = "CreateOptions"
		errs = metav1validation.ValidateCreateOptions(&metav1.CreateOptions{FieldManager: opts.FieldManager, FieldValidation: opts.FieldValidation})
	case "update":
		kind = "UpdateOptions"
		errs = metav1validation.ValidateUpdateOptions(&metav1.UpdateOptions{FieldManager: opts.FieldManager, FieldValidation: opts.FieldValidation})
	default:
		errs = metav1validation.ValidatePatchOptions(&opts, pt)
	}
	if len(errs) > 0 {
		return nil, false, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	return &fieldManagement{manager: managerOf(r, opts.FieldManager), asked: asked}, opts.Force != nil && *opts.Force, nil
}

// manageUpdate records the update of cur to written (a private copy,
// which it may change) in its managedFields under req's manager, as
// kube-apiserver's update and patch handlers do before admission: it is
// defaulted first, so that its writer owns the defaulted fields. A
// managedFields the write sets itself is taken as the new record (a list
// with one empty entry clears it); without one, the stored record is
// kept. The record is left as stored when it cannot be made.
//
// The result is written in its resource's representation: a built-in
// resource's map (a merge's) as its Go type, defaulted
// (registry.Resource.Typed), the conversion the strategies would make of
// it anyway; a map that does not convert is left as it is, for
// prepareUpdate to refuse.
func manageUpdate(req request, cur, written object) object {
	if req.manage == nil || req.manage.applied {
		return asGoType(req.res, written)
	}
	if req.sub == "scale" {
		if u, isMap := written.(*unstructured.Unstructured); isMap {
			manageScale(req, cur, u)
		}
		return asGoType(req.res, written)
	}
	written = asGoType(req.res, written)
	fm, err := req.res.FieldManager(req.sub)
	if err != nil {
		written.SetManagedFields(cur.GetManagedFields())
		return written
	}
	if u, isMap := written.(*unstructured.Unstructured); isMap {
		// A custom resource's map, recorded as defaulted.
		req.res.Default(u)
	}
	written.SetManagedFields(managedBy(fm, req, cur, written))
	return written
}

// asGoType is obj, a written object of res, as its Go type where res has
// one, defaulted as kube's decoder defaults it: a map converted where it
// converts (left as it is where not). A custom resource's map is obj
// itself.
func asGoType(res *resource, obj object) object {
	u, isMap := obj.(*unstructured.Unstructured)
	switch {
	case !isMap:
		res.Default(obj)
	case res.HasGoType():
		if typed, err := res.Typed(u); err == nil {
			return typed
		}
	}
	return obj
}

// manageCreate records the create of obj in its managedFields under
// req's manager, as kube-apiserver's create handler does: against an empty
// object, after defaulting. Without field management (the server's own
// writes) obj is stored with none.
func manageCreate(req request, obj object) object {
	if req.manage == nil {
		obj.SetManagedFields(nil)
		return obj
	}
	if req.manage.applied {
		return obj
	}
	fm, err := req.res.FieldManager(req.sub)
	if err != nil {
		obj.SetManagedFields(nil)
		return obj
	}
	req.res.Default(obj)
	live := req.res.NewEmpty()
	obj.SetManagedFields(managedBy(fm, req, live, obj))
	return obj
}

// managedBy is the managedFields of newObj written over live under req's
// manager. A built-in object is seen as kube-apiserver's handlers hold it,
// in the internal version (kube.Rules.ThroughHub).
func managedBy(fm *managedfields.FieldManager, req request, live, newObj k8sruntime.Object) []metav1.ManagedFieldsEntry {
	out := fm.UpdateNoErrors(live, req.res.AsFieldManagerSees(newObj), req.manage.manager)
	if acc, err := meta.Accessor(out); err == nil {
		return acc.GetManagedFields()
	}
	if acc, err := meta.Accessor(live); err == nil {
		return acc.GetManagedFields()
	}
	return nil
}

// manageScale records a write of the scale subresource as kube-apiserver
// does: the parent's managedFields are seen as the Scale's (the replicas
// path mapped to spec.replicas), the Scale's field manager records the
// change of the Scale, and the result is mapped back to the parent. The
// stored record is kept when that fails.
func manageScale(req request, cur object, desired *unstructured.Unstructured) {
	desired.SetManagedFields(cur.GetManagedFields())
	fm, err := req.res.FieldManager(registry.ScaleSubresource)
	if err != nil || req.res.Scale == nil {
		return
	}
	h, err := scaleHandler(req.res, cur.GetManagedFields())
	if err != nil {
		return
	}
	curScale, err := toScale(req.res, cur)
	if err != nil {
		return
	}
	newScale, err := toScale(req.res, desired)
	if err != nil {
		return
	}
	entries, err := h.ToSubresource()
	if err != nil {
		return
	}
	curScale.SetManagedFields(entries)
	newScale.SetManagedFields(nil)
	out, err := fm.Update(curScale, newScale, req.manage.manager)
	if err != nil {
		return
	}
	acc, err := meta.Accessor(out)
	if err != nil {
		return
	}
	parent, err := h.ToParent(acc.GetManagedFields())
	if err != nil {
		return
	}
	desired.SetManagedFields(parent)
}

// scaleReplicasPath is where res keeps the replicas its Scale shows.
func scaleReplicasPath(res *resource) []string {
	if res.Scale != nil && res.Scale.SpecReplicas != nil {
		return res.Scale.SpecReplicas
	}
	return []string{"spec", "replicas"}
}

// scaleHandler maps managedFields between res's objects (entries) and
// their Scale, as kube-apiserver's scale subresources do.
func scaleHandler(res *resource, entries []metav1.ManagedFieldsEntry) (*managedfields.ScaleHandler, error) {
	replicas := scaleReplicasPath(res)
	elems := make([]any, len(replicas))
	for i, e := range replicas {
		elems[i] = e
	}
	path, err := fieldpath.MakePath(elems...)
	if err != nil {
		return nil, err
	}
	return managedfields.NewScaleHandler(entries, res.GVK.GroupVersion(),
		managedfields.ResourcePathMappings{res.APIVersion(): path}), nil
}
