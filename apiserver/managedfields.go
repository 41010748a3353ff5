package apiserver

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"weak"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
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
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

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
// managedFields depend on (fieldManager; force for a patch) as
// kube-apiserver's parameter codec does, and validates them as its
// handlers do: a 400 for a value that does not parse, a 422 naming the
// options kind for an invalid one. verb is "create", "update" or "patch";
// pt is the patch type of a patch.
func writeOptions(r *http.Request, verb string, pt types.PatchType) (*fieldManagement, bool, error) {
	var opts metav1.PatchOptions
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, &opts); err != nil {
		return nil, false, apierrors.NewBadRequest(err.Error())
	}
	// dryRun and fieldValidation are checked on their own (body.go).
	opts.DryRun, opts.FieldValidation = nil, ""
	var errs field.ErrorList
	kind := "PatchOptions"
	switch verb {
	case "create":
		kind = "CreateOptions"
		errs = metav1validation.ValidateCreateOptions(&metav1.CreateOptions{FieldManager: opts.FieldManager})
	case "update":
		kind = "UpdateOptions"
		errs = metav1validation.ValidateUpdateOptions(&metav1.UpdateOptions{FieldManager: opts.FieldManager})
	default:
		errs = metav1validation.ValidatePatchOptions(&opts, pt)
	}
	if len(errs) > 0 {
		return nil, false, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	return &fieldManagement{manager: managerOf(r, opts.FieldManager)}, opts.Force != nil && *opts.Force, nil
}

// fieldManagers are the field managers of one resource, by subresource,
// made on first use.
type fieldManagers struct {
	mu sync.Mutex
	m  map[string]*managedfields.FieldManager
}

// managersByResource holds each resource's fieldManagers. It is keyed
// weakly: the resources of a CustomResourceDefinition are replaced when it
// changes, and their managers go with them.
var managersByResource sync.Map // weak.Pointer[resource] → *fieldManagers

// fieldManagerFor returns the field manager of writes to res's
// subresource sub ("" for the main resource, "status", …).
func fieldManagerFor(res *resource, sub string) (*managedfields.FieldManager, error) {
	key := weak.Make(res)
	v, ok := managersByResource.Load(key)
	if !ok {
		var loaded bool
		v, loaded = managersByResource.LoadOrStore(key, &fieldManagers{m: map[string]*managedfields.FieldManager{}})
		if !loaded {
			runtime.AddCleanup(res, func(k weak.Pointer[resource]) { managersByResource.Delete(k) }, key)
		}
	}
	fms := v.(*fieldManagers)
	fms.mu.Lock()
	defer fms.mu.Unlock()
	if fm, ok := fms.m[sub]; ok {
		return fm, nil
	}
	fm, err := newFieldManager(res, sub)
	if err != nil {
		return nil, err
	}
	fms.m[sub] = fm
	return fm, nil
}

// newFieldManager makes the field manager kube-apiserver installs for
// res's subresource sub: over the OpenAPI models of the built-in types, or
// the models a CustomResourceDefinition's schemas make; with the
// strategy's reset fields left out of what writers own.
func newFieldManager(res *resource, sub string) (*managedfields.FieldManager, error) {
	if sub == scaleSubresource {
		tc, err := builtinTypeConverter()
		if err != nil {
			return nil, err
		}
		return managedfields.NewDefaultFieldManager(tc, versionConvertor{}, objectDefaulter{res: scaleResource}, objectCreater{res: scaleResource},
			scaleResource.GVK, scaleResource.GVK.GroupVersion(), sub, nil)
	}
	if res.Kube != nil {
		tc, err := builtinTypeConverter()
		if err != nil {
			return nil, err
		}
		return newBuiltinFieldManager(res, sub, tc)
	}
	conv := versionConvertor{custom: res.Custom}
	def := objectDefaulter{res: res}
	cr := objectCreater{res: res}
	var filters map[fieldpath.APIVersion]fieldpath.Filter
	switch {
	case res.CR != nil:
		tc, err := customTypeConverter(res.CRD)
		if err != nil {
			return nil, err
		}
		reset, err := res.CR.ResetFields(sub)
		if err != nil {
			return nil, err
		}
		if reset != nil {
			filters = fieldpath.NewExcludeFilterSetMap(reset)
		}
		return managedfields.NewDefaultCRDFieldManager(tc, conv, def, cr, res.GVK, res.GVK.GroupVersion(), sub, filters)
	}
	return nil, fmt.Errorf("apiserver: resource %v has no schema for managedFields", res.GVR())
}

// newBuiltinFieldManager is the field manager of the built-in resource
// res's subresource sub over the type converter tc.
func newBuiltinFieldManager(res *resource, sub string, tc managedfields.TypeConverter) (*managedfields.FieldManager, error) {
	var filters map[fieldpath.APIVersion]fieldpath.Filter
	if reset := res.Kube.ResetFields(sub); reset != nil {
		filters = fieldpath.NewExcludeFilterSetMap(reset)
	}
	return managedfields.NewDefaultFieldManager(tc, versionConvertor{custom: res.Custom}, objectDefaulter{res: res}, objectCreater{res: res},
		res.GVK, res.GVK.GroupVersion(), sub, filters)
}

// builtinModels are the OpenAPI models of every built-in kind served,
// built once: the TypeConverter of built-in resources is made from them,
// and a custom resource's models refer to them (ObjectMeta).
var builtinModels = sync.OnceValues(func() (map[string]*spec.Schema, error) {
	return kube.OpenAPIModels(kube.OpenAPIKinds(openAPIResources()))
})

var builtinTypeConverter = sync.OnceValues(func() (managedfields.TypeConverter, error) {
	models, err := builtinModels()
	if err != nil {
		return nil, err
	}
	tc, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		return nil, err
	}
	return &goTypeConverter{TypeConverter: tc}, nil
})

// goTypeConverter is kube's TypeConverter of the built-in models, except
// that an object of a built-in Go type is not checked against its model
// on every write, only the first of its kind: a Go type cannot hold what
// its model, generated from it, does not allow (a field not declared, a
// number where a string is due), and what its values can get wrong (an
// item of a keyed list without its key) the field manager's comparison
// reports as the check would. Unstructured objects (a patched or applied
// object, a stored one) are checked every time. The check was a quarter
// of the field manager's time on a create (BenchmarkManageCreatePod:
// 125 µs and 453 allocations with it, 95 µs and 351 without), and the
// field manager the largest part of a create that is not Kubernetes'
// strategy (BenchmarkCreatePod, note of issue 16);
// TestGoTypeConverterAsKube holds it to kube's converter.
type goTypeConverter struct {
	managedfields.TypeConverter
	// models holds, by kind, the schema and type of the first object of
	// that kind that passed the check, for the next ones.
	models sync.Map // schema.GroupVersionKind → goTypeModel
}

// goTypeModel is the model of a built-in Go type.
type goTypeModel struct {
	schema  *smdschema.Schema
	typeRef smdschema.TypeRef
}

func (c *goTypeConverter) ObjectToTyped(obj k8sruntime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if _, ok := obj.(*unstructured.Unstructured); ok {
		return c.TypeConverter.ObjectToTyped(obj, opts...)
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if m, ok := c.models.Load(gvk); ok {
		model := m.(goTypeModel)
		v, err := value.NewValueReflect(obj)
		if err != nil {
			return nil, err
		}
		//lint:ignore SA1019 the check is skipped on purpose: see goTypeConverter.
		return typed.AsTypedUnvalidated(v, model.schema, model.typeRef), nil
	}
	tv, err := c.TypeConverter.ObjectToTyped(obj, opts...)
	if err == nil {
		c.models.Store(gvk, goTypeModel{schema: tv.Schema(), typeRef: tv.TypeRef()})
	}
	return tv, err
}

// customTypeConverter is the TypeConverter of a custom resource's
// objects, as kube-apiserver makes it: from the OpenAPI v3 document of each
// version of crd merged with the built-in models, or deduced from the
// objects themselves when that cannot be built.
func customTypeConverter(crd *apiextensionsv1.CustomResourceDefinition) (managedfields.TypeConverter, error) {
	if crd == nil {
		return managedfields.NewDeducedTypeConverter(), nil
	}
	static, err := builtinModels()
	if err != nil {
		return nil, err
	}
	specs := []*spec3.OpenAPI{{
		Version:    "3.0.0",
		Info:       &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes CRD Swagger", Version: "v0.1.0"}},
		Components: &spec3.Components{Schemas: maps.Clone(static)},
	}}
	for _, v := range crd.Spec.Versions {
		s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			return managedfields.NewDeducedTypeConverter(), nil
		}
		specs = append(specs, s)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil || merged.Components == nil || len(merged.Components.Schemas) == 0 {
		return managedfields.NewDeducedTypeConverter(), nil
	}
	return managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
}

// versionConvertor converts objects between the versions the field
// manager meets: the version of the request, and those of the managers
// recorded in managedFields. A custom resource's other versions differ
// only in apiVersion (conversion None); a built-in object is converted
// through the internal version by Kubernetes' own conversions, as
// kube-apiserver's field manager converts it (a manager of autoscaling/v2
// seen from an autoscaling/v1 write). Entries of a version no kind of
// this server has cannot be converted and are dropped by the field
// manager, as it drops those of versions no longer served.
type versionConvertor struct{ custom bool }

func (c versionConvertor) Convert(in, out, _ any) error {
	return errors.New("apiserver: managedFields: object conversion is not supported")
}

func (c versionConvertor) ConvertToVersion(in k8sruntime.Object, target k8sruntime.GroupVersioner) (k8sruntime.Object, error) {
	from := in.GetObjectKind().GroupVersionKind()
	to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{from})
	if !ok {
		return nil, k8sruntime.NewNotRegisteredErrForTarget("listwatch", reflect.TypeOf(in), target)
	}
	if to.GroupVersion() == from.GroupVersion() {
		return in, nil
	}
	u, isU := in.(*unstructured.Unstructured)
	if !c.custom {
		return convertBuiltin(in, from, to)
	}
	if !isU || to.GroupKind() != from.GroupKind() {
		return nil, k8sruntime.NewNotRegisteredErrForTarget("listwatch", reflect.TypeOf(in), target)
	}
	out := u.DeepCopy()
	out.SetAPIVersion(to.GroupVersion().String())
	return out, nil
}

// convertBuiltin converts in, a built-in object of kind from (its Go type
// or unstructured), to kind to; in is not changed.
func convertBuiltin(in k8sruntime.Object, from, to schema.GroupVersionKind) (k8sruntime.Object, error) {
	if _, err := registry.Scheme.New(to); err != nil {
		return nil, k8sruntime.NewNotRegisteredErrForTarget("listwatch", reflect.TypeOf(in), schema.GroupVersions{to.GroupVersion()})
	}
	var typed k8sruntime.Object
	if u, ok := in.(*unstructured.Unstructured); ok {
		t, err := registry.Scheme.New(from)
		if err != nil {
			return nil, err
		}
		if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t); err != nil {
			return nil, err
		}
		typed = t
	} else {
		typed = in.DeepCopyObject()
	}
	typed.GetObjectKind().SetGroupVersionKind(from)
	return kube.Convert(typed, to)
}

func (c versionConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// objectDefaulter applies a resource's defaults, as kube-apiserver's
// decoder does, to what the field manager merges.
type objectDefaulter struct{ res *resource }

func (d objectDefaulter) Default(obj k8sruntime.Object) {
	u, ok := obj.(*unstructured.Unstructured)
	switch {
	case !ok && d.res.Kube != nil:
		d.res.Kube.DefaultTyped(obj)
	case !ok:
	case d.res.Kube != nil:
		// A failure leaves u as it is; validation reports what is wrong.
		_ = d.res.Kube.Default(u)
	case d.res.CR != nil:
		d.res.CR.Default(u)
	}
}

// objectCreater makes the empty objects the field manager starts from: a
// built-in resource's Go type, as kube-apiserver's scheme makes them (its
// empty structs, such as a Deployment's spec.template, count as present,
// so a create owns the fields in them and not the structs themselves), or
// an empty custom resource.
type objectCreater struct{ res *resource }

func (c objectCreater) New(kind schema.GroupVersionKind) (k8sruntime.Object, error) {
	if kind == c.res.GVK {
		if typed := c.res.NewTyped(); typed != nil {
			typed.GetObjectKind().SetGroupVersionKind(kind)
			return typed, nil
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// manageUpdate records the update of cur to written (a private copy,
// which it may change) in its managedFields under req's manager, as
// kube-apiserver's update and patch handlers do before admission: it is
// defaulted first, so that its writer owns the defaulted fields. A
// managedFields the write sets itself is taken as the new record (a list
// with one empty entry clears it); without one, the stored record is
// kept. The record is left as stored when it cannot be made.
//
// written is a map, or the resource's Go type (Server.typedUpdate). The
// result is the map, or, for a built-in resource, the Go type carrying the
// record (kube.Rules.External: defaulted), which then stands for the map:
// the map is left as it was written, or nil. Defaulting converts the object
// to its Go type, and the strategies take it so (prepareUpdate), so the
// conversion is made once.
func manageUpdate(req request, cur *unstructured.Unstructured, written object) (*unstructured.Unstructured, object) {
	desired, isMap := written.(*unstructured.Unstructured)
	if !isMap {
		req.res.Kube.DefaultTyped(written)
	}
	if req.manage == nil || req.manage.applied {
		return desired, typedOrNil(written, isMap)
	}
	if req.sub == "scale" && isMap {
		manageScale(req, cur, desired)
		return desired, nil
	}
	fm, err := fieldManagerFor(req.res, req.sub)
	if err != nil {
		written.SetManagedFields(cur.GetManagedFields())
		return desired, typedOrNil(written, isMap)
	}
	if isMap && req.res.Kube != nil {
		// Left as it is when it does not convert: validation reports
		// what is wrong.
		if ext, err := req.res.Kube.External(desired); err == nil {
			if obj, err := registry.AsObject(ext); err == nil {
				written, isMap = obj, false
			}
		}
	} else if isMap {
		objectDefaulter{res: req.res}.Default(desired)
	}
	written.SetManagedFields(managedBy(fm, req, cur, written))
	return desired, typedOrNil(written, isMap)
}

// typedOrNil is obj when it is not a map, else nil.
func typedOrNil(obj object, isMap bool) object {
	if isMap {
		return nil
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
	fm, err := fieldManagerFor(req.res, req.sub)
	if err != nil {
		obj.SetManagedFields(nil)
		return obj
	}
	objectDefaulter{res: req.res}.Default(obj)
	live, _ := objectCreater{res: req.res}.New(req.res.GVK)
	obj.SetManagedFields(managedBy(fm, req, live, obj))
	return obj
}

// managedBy is the managedFields of newObj written over live under req's
// manager. A built-in object is seen as kube-apiserver's handlers hold it,
// in the internal version (kube.Rules.ThroughHub).
func managedBy(fm *managedfields.FieldManager, req request, live, newObj k8sruntime.Object) []metav1.ManagedFieldsEntry {
	seen := newObj
	if req.res.Kube != nil {
		if hub, err := req.res.Kube.ThroughHub(newObj); err == nil {
			seen = hub
		}
	}
	out := fm.UpdateNoErrors(live, seen, req.manage.manager)
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
func manageScale(req request, cur, desired *unstructured.Unstructured) {
	desired.SetManagedFields(cur.GetManagedFields())
	fm, err := scaleFieldManagerFor(req.res)
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

// scaleFieldManagerFor is the field manager of res's scale subresource,
// whose objects are autoscaling/v1 Scales.
func scaleFieldManagerFor(res *resource) (*managedfields.FieldManager, error) {
	return fieldManagerFor(res, scaleSubresource)
}

// scaleSubresource keys the Scale field manager among a resource's.
const scaleSubresource = "scale"
