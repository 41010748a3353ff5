package registry

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"sync"
	"weak"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/resources"
)

// metadata.managedFields is kept by the field manager of
// k8s.io/apimachinery/pkg/util/managedfields, over the OpenAPI models of
// the built-in types and a custom resource's schemas; the handlers record
// each write through Resource.FieldManager.

// ScaleSubresource keys the field manager of a resource's Scale among its
// own (Resource.FieldManager).
const ScaleSubresource = "scale"

// OpenAPIResources are the built-in resources as the OpenAPI documents
// and the field manager's models state them.
func OpenAPIResources() []kube.OpenAPIResource {
	var out []kube.OpenAPIResource
	for _, def := range resources.Builtin.All() {
		out = append(out, kube.OpenAPIResource{
			GVK:          def.GVK,
			Plural:       def.Plural,
			Singular:     def.Singular,
			Namespaced:   def.Namespaced,
			Verbs:        def.DiscoveryVerbs(),
			Subresources: def.Subresources,
		})
	}
	return out
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
var managersByResource sync.Map // weak.Pointer[Resource] → *fieldManagers

// FieldManager returns the field manager of writes to res's subresource
// sub ("" for the main resource, "status", ScaleSubresource), made on
// first use as kube-apiserver installs it.
func (res *Resource) FieldManager(sub string) (*managedfields.FieldManager, error) {
	key := weak.Make(res)
	v, ok := managersByResource.Load(key)
	if !ok {
		var loaded bool
		v, loaded = managersByResource.LoadOrStore(key, &fieldManagers{m: map[string]*managedfields.FieldManager{}})
		if !loaded {
			runtime.AddCleanup(res, func(k weak.Pointer[Resource]) { managersByResource.Delete(k) }, key)
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
func newFieldManager(res *Resource, sub string) (*managedfields.FieldManager, error) {
	if sub == ScaleSubresource {
		tc, err := BuiltinTypeConverter()
		if err != nil {
			return nil, err
		}
		return managedfields.NewDefaultFieldManager(tc, versionConvertor{}, objectDefaulter{res: ScaleResource}, objectCreater{res: ScaleResource},
			ScaleResource.GVK, ScaleResource.GVK.GroupVersion(), sub, nil)
	}
	if res.Kube != nil {
		tc, err := BuiltinTypeConverter()
		if err != nil {
			return nil, err
		}
		return NewBuiltinFieldManager(res, sub, tc)
	}
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
		// As kube-apiserver's: managed fields of other versions are
		// converted by the definition's converter (its webhook).
		return managedfields.NewDefaultCRDFieldManager(tc, res.CR.ObjectInterfaces().GetObjectConvertor(), def, cr, res.GVK, res.GVK.GroupVersion(), sub, filters)
	}
	return nil, fmt.Errorf("apiserver: resource %v has no schema for managedFields", res.GVR())
}

// NewBuiltinFieldManager is the field manager of the built-in resource
// res's subresource sub over the type converter tc.
func NewBuiltinFieldManager(res *Resource, sub string, tc managedfields.TypeConverter) (*managedfields.FieldManager, error) {
	var filters map[fieldpath.APIVersion]fieldpath.Filter
	if reset := res.Kube.ResetFields(sub); reset != nil {
		filters = fieldpath.NewExcludeFilterSetMap(reset)
	}
	return managedfields.NewDefaultFieldManager(tc, versionConvertor{}, objectDefaulter{res: res}, objectCreater{res: res},
		res.GVK, res.GVK.GroupVersion(), sub, filters)
}

// BuiltinModels are the OpenAPI models of every built-in kind served,
// built once: the TypeConverter of built-in resources is made from them,
// and a custom resource's models refer to them (ObjectMeta).
var BuiltinModels = sync.OnceValues(func() (map[string]*spec.Schema, error) {
	return kube.OpenAPIModels(kube.OpenAPIKinds(OpenAPIResources()))
})

var BuiltinTypeConverter = sync.OnceValues(func() (managedfields.TypeConverter, error) {
	models, err := BuiltinModels()
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
	static, err := BuiltinModels()
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

// versionConvertor converts built-in objects between the versions the
// field manager meets: the version of the request, and those of the
// managers recorded in managedFields, through the internal version by
// Kubernetes' own conversions, as kube-apiserver's field manager converts
// them (a manager of autoscaling/v2 seen from an autoscaling/v1 write).
// Entries of a version no kind of this server has cannot be converted and
// are dropped by the field manager, as it drops those of versions no
// longer served. (Custom resources' are their definition's converter.)
type versionConvertor struct{}

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
	return convertBuiltin(in, from, to)
}

// convertBuiltin converts in, a built-in object of kind from (its Go type
// or unstructured), to kind to; in is not changed.
func convertBuiltin(in k8sruntime.Object, from, to schema.GroupVersionKind) (k8sruntime.Object, error) {
	if _, err := Scheme.New(to); err != nil {
		return nil, k8sruntime.NewNotRegisteredErrForTarget("listwatch", reflect.TypeOf(in), schema.GroupVersions{to.GroupVersion()})
	}
	var typed k8sruntime.Object
	if u, ok := in.(*unstructured.Unstructured); ok {
		t, err := Scheme.New(from)
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
type objectDefaulter struct{ res *Resource }

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

// Default applies r's defaults to obj, its Go type or a map, as
// kube-apiserver's decoder does; a map that does not convert is left as
// it is (validation reports what is wrong).
func (r *Resource) Default(obj k8sruntime.Object) { objectDefaulter{res: r}.Default(obj) }

// NewEmpty is the empty object of r the field manager starts a create
// from (objectCreater).
func (r *Resource) NewEmpty() k8sruntime.Object {
	obj, _ := objectCreater{res: r}.New(r.GVK)
	return obj
}

// objectCreater makes the empty objects the field manager starts from: a
// built-in resource's Go type, as kube-apiserver's scheme makes them (its
// empty structs, such as a Deployment's spec.template, count as present,
// so a create owns the fields in them and not the structs themselves), or
// an empty custom resource.
type objectCreater struct{ res *Resource }

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

// Typed is u, an object of a built-in resource r, as its Go type with
// kube's defaults (kube.Rules.External); an error for a custom resource,
// which has none, or a map that does not convert.
func (r *Resource) Typed(u *unstructured.Unstructured) (Object, error) {
	if r.Kube == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("%v has no Go type", r.GVK))
	}
	ext, err := r.Kube.External(u)
	if err != nil {
		return nil, err
	}
	return AsObject(ext)
}

// AsFieldManagerSees is obj as the field manager is given it: a built-in
// object in the internal version, as kube-apiserver's handlers hold it
// (kube.Rules.ThroughHub); obj itself otherwise.
func (r *Resource) AsFieldManagerSees(obj k8sruntime.Object) k8sruntime.Object {
	if r.Kube == nil {
		return obj
	}
	if hub, err := r.Kube.ThroughHub(obj); err == nil {
		return hub
	}
	return obj
}
