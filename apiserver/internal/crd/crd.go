// Package crd applies kube-apiserver's own rules to custom resources, from
// k8s.io/apiextensions-apiserver v0.37.2: structural schemas, pruning of
// unknown fields, metadata coercion, defaulting (on write and on read),
// validation against the OpenAPI schema, x-kubernetes-validations CEL rules
// (transition rules and cost limits included), the list-type rules, the
// custom resource strategies (what create and update reset, the status
// subresource), selectable fields and additionalPrinterColumns Tables. It
// restates none of them: every rule is a call into apiextensions-apiserver.
//
// It is the only package of listwatch that imports
// k8s.io/apiextensions-apiserver beyond its API types, and only the server
// imports it.
package crd

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/crdserverscheme"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"
)

// FromUnstructured decodes a stored CustomResourceDefinition.
func FromUnstructured(u *unstructured.Unstructured) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
		return nil, fmt.Errorf("crd: decode %s: %w", u.GetName(), err)
	}
	return crd, nil
}

// ToUnstructured encodes crd as the server keeps objects.
func ToUnstructured(crd *apiextensionsv1.CustomResourceDefinition) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return nil, fmt.Errorf("crd: encode %s: %w", crd.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(apiextensionsv1.SchemeGroupVersion.String())
	u.SetKind("CustomResourceDefinition")
	return u, nil
}

// Request says what a write is, for the strategies that look at it.
type Request struct {
	Verb        string
	Namespace   string
	Name        string
	Subresource string
	// User is who makes the request; an empty name is none.
	User   string
	UID    string
	Groups []string
	// Warn receives the strategies' warnings; nil drops them.
	Warn func(text string)
	// Admit runs the mutating admission plugins on the object before the
	// strategy, and Validate the validating ones after it; nil runs none.
	Admit, Validate func(ctx context.Context, obj, old runtime.Object) error
}

// Rules are kube-apiserver's rules for one served version of a custom
// resource. What is costly to build (the schema validator, CEL programs,
// the Table) is built on first use, so that installing a definition costs
// little until its resources are written.
type Rules struct {
	gvr        schema.GroupVersionResource
	gvk        schema.GroupVersionKind
	namespaced bool
	// structural holds the structural schema of every version (nil when a
	// version has none), by version name: objects are coerced with the
	// schema of the version they are in.
	structural      map[string]*structuralschema.Structural
	preserveUnknown bool
	version         apiextensionsv1.CustomResourceDefinitionVersion
	subresources    *apiextensionsv1.CustomResourceSubresources
	// storage is the apiVersion of the definition's storage version.
	storage string
	// selectable are the selectable fields' paths without the leading dot.
	selectable []string
	// objects are what admission converts, creates and defaults objects
	// with (admission.go).
	objects admission.ObjectInterfaces
	// conv is the definition's converter (conversion.go).
	conv converter

	once  sync.Once
	built *built
	err   error
}

// built is what Rules make on first use.
type built struct {
	main   rest.RESTCreateUpdateStrategy
	status rest.RESTUpdateStrategy
	attrs  func(runtime.Object) (fields.Set, error)
	table  rest.TableConvertor
}

// Structural returns the structural schemas of every version of crd, with
// unpruned defaults removed, as kube-apiserver prepares them for serving.
func Structural(crd *apiextensionsv1.CustomResourceDefinition) (map[string]*structuralschema.Structural, error) {
	out := map[string]*structuralschema.Structural{}
	for _, v := range crd.Spec.Versions {
		val, err := apihelpers.GetSchemaForVersion(crd, v.Name)
		if err != nil {
			return nil, fmt.Errorf("crd %s: %w", crd.Name, err)
		}
		if val == nil {
			continue
		}
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
			return nil, fmt.Errorf("crd %s: convert the schema of %s: %w", crd.Name, v.Name, err)
		}
		s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			if crd.Spec.PreserveUnknownFields {
				continue
			}
			return nil, fmt.Errorf("crd %s: the schema of %s is not structural: %w", crd.Name, v.Name, err)
		}
		if !crd.Spec.PreserveUnknownFields {
			s = s.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(s); err != nil {
				return nil, fmt.Errorf("crd %s: prune the defaults of %s: %w", crd.Name, v.Name, err)
			}
		}
		out[v.Name] = s
	}
	return out, nil
}

// New returns the rules of version of crd, whose accepted names it serves
// under; structural is Structural(crd), shared by its versions, and conv
// makes its converter (nil: converters that reach URL webhooks only).
func New(crd *apiextensionsv1.CustomResourceDefinition, version string, structural map[string]*structuralschema.Structural, conv *Converters) (*Rules, error) {
	var v *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			v = &crd.Spec.Versions[i]
		}
	}
	if v == nil {
		return nil, fmt.Errorf("crd %s: no version %s", crd.Name, version)
	}
	sub, err := apihelpers.GetSubresourcesForVersion(crd, version)
	if err != nil {
		return nil, fmt.Errorf("crd %s: %w", crd.Name, err)
	}
	names := crd.Status.AcceptedNames
	storage, err := apihelpers.GetCRDStorageVersion(crd)
	if err != nil {
		return nil, fmt.Errorf("crd %s: %w", crd.Name, err)
	}
	r := &Rules{
		storage:         schema.GroupVersion{Group: crd.Spec.Group, Version: storage}.String(),
		gvr:             schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: names.Plural},
		gvk:             schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: names.Kind},
		namespaced:      crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		structural:      structural,
		preserveUnknown: crd.Spec.PreserveUnknownFields,
		version:         *v.DeepCopy(),
		subresources:    sub.DeepCopy(),
	}
	for _, f := range v.SelectableFields {
		r.selectable = append(r.selectable, strings.TrimPrefix(f.JSONPath, "."))
	}
	if r.conv, err = conv.newConverter(crd); err != nil {
		return nil, err
	}
	r.objects = newAdmissionObjects(crd, structural, r.conv.safe)
	return r, nil
}

// HasStatus and HasScale report the version's subresources.
func (r *Rules) HasStatus() bool { return r.subresources != nil && r.subresources.Status != nil }

// HasScale reports whether the version has a scale subresource.
func (r *Rules) HasScale() bool { return r.subresources != nil && r.subresources.Scale != nil }

// Scale returns the paths of the scale subresource; nil when there is none.
func (r *Rules) Scale() *apiextensionsv1.CustomResourceSubresourceScale {
	if !r.HasScale() {
		return nil
	}
	return r.subresources.Scale
}

// SelectableFields are the version's selectable fields, as dotted paths.
func (r *Rules) SelectableFields() []string { return r.selectable }

func (r *Rules) build() (*built, error) {
	r.once.Do(func() { r.built, r.err = r.make() })
	return r.built, r.err
}

func (r *Rules) make() (*built, error) {
	var props *apiextensionsinternal.JSONSchemaProps
	if r.version.Schema != nil {
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(r.version.Schema, internal, nil); err != nil {
			return nil, fmt.Errorf("crd %s: convert the schema: %w", r.gvr, err)
		}
		props = internal.OpenAPIV3Schema
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		return nil, fmt.Errorf("crd %s: schema validator: %w", r.gvr, err)
	}
	var statusSpec *apiextensionsinternal.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	if r.HasStatus() {
		statusSpec = &apiextensionsinternal.CustomResourceSubresourceStatus{}
		if props != nil && props.Properties != nil {
			if st, ok := props.Properties["status"]; ok {
				if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&st); err != nil {
					return nil, fmt.Errorf("crd %s: status schema validator: %w", r.gvr, err)
				}
			}
		}
	}
	var scaleSpec *apiextensionsinternal.CustomResourceSubresourceScale
	if r.HasScale() {
		scaleSpec = &apiextensionsinternal.CustomResourceSubresourceScale{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(r.subresources.Scale, scaleSpec, nil); err != nil {
			return nil, fmt.Errorf("crd %s: scale: %w", r.gvr, err)
		}
	}
	strategy := customresource.NewStrategy(crdserverscheme.NewUnstructuredObjectTyper(), r.namespaced, r.gvk,
		validator, statusValidator, r.structural[r.gvk.Version], statusSpec, scaleSpec, r.version.SelectableFields)
	b := &built{main: strategy, attrs: func(obj runtime.Object) (fields.Set, error) {
		_, f, err := strategy.GetAttrs(obj)
		return f, err
	}}
	if r.HasStatus() {
		b.status = customresource.NewStatusStrategy(strategy)
	}
	columns := r.version.AdditionalPrinterColumns
	if len(columns) == 0 {
		// kube-apiserver's default columns of a version that states none.
		columns = []apiextensionsv1.CustomResourceColumnDefinition{{
			Name: "Age", Type: "date", Description: swaggerMetadataDescriptions["creationTimestamp"], JSONPath: ".metadata.creationTimestamp",
		}}
	}
	if b.table, err = tableconvertor.New(columns); err != nil {
		// As kube-apiserver: an invalid printer specification falls back
		// to the default Table.
		b.table = rest.NewDefaultTableConvertor(r.gvr.GroupResource())
	}
	return b, nil
}

// swaggerMetadataDescriptions are ObjectMeta's field descriptions, which
// the default Age column carries.
var swaggerMetadataDescriptions = metav1.ObjectMeta{}.SwaggerDoc()

// Coerce prunes what u's schema does not know (unless the definition
// preserves unknown fields) and coerces its metadata, as kube-apiserver's
// decoder of a request body does; it returns the paths of the fields
// dropped, which strict field validation reports.
func (r *Rules) Coerce(u *unstructured.Unstructured) ([]string, error) {
	return r.coerceAt(u, r.gvk.Version, false, true)
}

// coerceAt is kube-apiserver's schema coercion of u with the schema of
// version: metadata, pruning (unless the definition preserves unknown
// fields), non-nullable nulls; fromStorage drops malformed metadata and
// repairs a missing generation, as its storage decoding does.
func (r *Rules) coerceAt(u *unstructured.Unstructured, version string, fromStorage, trackUnknown bool) ([]string, error) {
	kind, foundKind, _ := unstructured.NestedString(u.Object, "kind")
	apiVersion, foundAPIVersion, _ := unstructured.NestedString(u.Object, "apiVersion")
	om, foundMeta, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{
		DropMalformedFields: fromStorage, ReturnUnknownFieldPaths: trackUnknown,
	})
	if err != nil {
		return nil, badRequest(r.gvk, err)
	}
	s := r.structural[version]
	if !r.preserveUnknown && s != nil {
		unknown = append(unknown, structuralpruning.PruneWithOptions(u.Object, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: trackUnknown})...)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, s)
	}
	if s != nil {
		ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, s, false, schemaobjectmeta.CoerceOptions{
			DropInvalidFields: fromStorage, ReturnUnknownFieldPaths: trackUnknown,
		})
		if ferr != nil {
			return nil, badRequest(r.gvk, ferr)
		}
		unknown = append(unknown, paths...)
	}
	if fromStorage && om != nil && om.Generation == 0 {
		om.Generation = 1
	}
	if foundKind {
		u.SetKind(kind)
	}
	if foundAPIVersion {
		u.SetAPIVersion(apiVersion)
	}
	if foundMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, om); err != nil {
			return nil, badRequest(r.gvk, err)
		}
	}
	return unknown, nil
}

// Default applies the version's schema defaults to u in place.
func (r *Rules) Default(u *unstructured.Unstructured) {
	if s := r.structural[r.gvk.Version]; s != nil {
		defaultWith(u, s)
	}
}

func defaultWith(u *unstructured.Unstructured, s *structuralschema.Structural) {
	structuraldefaulting.Default(u.Object, s)
}

// StorageAPIVersion is the apiVersion custom resources of the definition
// are stored at, whatever version a request writes them through: its
// storage version (ToStorage).
func (r *Rules) StorageAPIVersion() string { return r.storage }

func badRequest(gvk schema.GroupVersionKind, err error) error {
	return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, err))
}

// context carries what the strategies read from a request's context.
func (r *Rules) context(ctx context.Context, req Request) context.Context {
	ns := req.Namespace
	if !r.namespaced {
		ns = ""
	}
	ctx = genericapirequest.WithNamespace(ctx, ns)
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: req.Verb, APIPrefix: "apis",
		APIGroup: r.gvr.Group, APIVersion: r.gvr.Version, Namespace: ns,
		Resource: r.gvr.Resource, Subresource: req.Subresource, Name: req.Name,
	})
	if req.User != "" {
		ctx = genericapirequest.WithUser(ctx, &user.DefaultInfo{Name: req.User, UID: req.UID, Groups: req.Groups})
	}
	if req.Warn != nil {
		ctx = warning.WithWarningRecorder(ctx, warnFunc(req.Warn))
	}
	return ctx
}

type warnFunc func(string)

func (f warnFunc) AddWarning(_, text string) { f(text) }

// Create applies the create strategy to u in place, as kube-apiserver's
// BeforeCreate does: status dropped when a status subresource exists,
// generation 1, validation (schema, metadata, list types, CEL). u must
// carry its uid and creationTimestamp. A rule broken is a 422 Invalid with
// kube's causes.
func (r *Rules) Create(ctx context.Context, req Request, u *unstructured.Unstructured) error {
	b, err := r.build()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	ctx = r.context(ctx, req)
	if req.Admit != nil {
		if err := req.Admit(ctx, u, nil); err != nil {
			return err
		}
	}
	if err := rest.BeforeCreate(b.main, ctx, u); err != nil {
		return err
	}
	if req.Validate != nil {
		return req.Validate(ctx, u, nil)
	}
	return nil
}

// Update applies the update strategy of req.Subresource ("" or "scale" for
// the main resource, "status") to u over the stored old, in place, as
// kube-apiserver's BeforeUpdate does.
func (r *Rules) Update(ctx context.Context, req Request, u, old *unstructured.Unstructured) error {
	b, err := r.build()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	var s rest.RESTUpdateStrategy = b.main
	if req.Subresource == "status" {
		if b.status == nil {
			return apierrors.NewNotFound(r.gvr.GroupResource(), req.Name)
		}
		s = b.status
	}
	ctx = r.context(ctx, req)
	if req.Admit != nil {
		if err := req.Admit(ctx, u, old); err != nil {
			return err
		}
	}
	if err := rest.BeforeUpdate(s, ctx, u, old); err != nil {
		return err
	}
	if req.Validate != nil {
		return req.Validate(ctx, u, old)
	}
	return nil
}

// BeforeDelete runs kube-apiserver's BeforeDelete of the custom resource
// strategy on u, as its storage does before every delete: opts validated
// (422) and their preconditions checked against u (409). u is not changed.
func (r *Rules) BeforeDelete(ctx context.Context, req Request, u *unstructured.Unstructured, opts *metav1.DeleteOptions) error {
	b, err := r.build()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	_, _, err = rest.BeforeDelete(b.main, r.context(ctx, req), u.DeepCopy(), opts)
	return err
}

// Fields returns u's selectable fields (metadata.name, metadata.namespace
// and the version's selectableFields).
func (r *Rules) Fields(u *unstructured.Unstructured) (fields.Set, error) {
	b, err := r.build()
	if err != nil {
		return nil, err
	}
	return b.attrs(u)
}

// Columns returns the version's Table columns.
func (r *Rules) Columns() ([]metav1.TableColumnDefinition, error) {
	b, err := r.build()
	if err != nil {
		return nil, err
	}
	t, err := b.table.ConvertToTable(context.Background(), &unstructured.UnstructuredList{Object: map[string]any{}}, nil)
	if err != nil {
		return nil, err
	}
	return t.ColumnDefinitions, nil
}

// Row returns u's Table cells.
func (r *Rules) Row(u *unstructured.Unstructured) (metav1.TableRow, error) {
	b, err := r.build()
	if err != nil {
		return metav1.TableRow{}, err
	}
	t, err := b.table.ConvertToTable(context.Background(), u, &metav1.TableOptions{NoHeaders: true})
	if err != nil {
		return metav1.TableRow{}, err
	}
	if len(t.Rows) != 1 {
		return metav1.TableRow{}, fmt.Errorf("table row of %s: %d rows", u.GetName(), len(t.Rows))
	}
	return metav1.TableRow{Cells: t.Rows[0].Cells, Conditions: t.Rows[0].Conditions}, nil
}
