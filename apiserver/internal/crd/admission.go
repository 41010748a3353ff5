package crd

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/crdserverscheme"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
)

// Admission of custom resources: kube-apiserver's admission plugins (its
// webhooks above all) see a custom resource as an unstructured object at
// the version written, and convert, create and default objects through
// the ObjectInterfaces of its CRD handler: apiextensions' converter of the
// definition, unstructured objects, the versions' structural defaults, and
// the definition's versions as equivalent resources (a webhook with
// matchPolicy Equivalent registered for one version sees writes through
// another, converted).

// admissionObjects are the ObjectInterfaces of one definition's objects.
type admissionObjects struct {
	convertor   runtime.ObjectConvertor
	defaulter   runtime.ObjectDefaulter
	equivalents runtime.EquivalentResourceMapper
}

func (a admissionObjects) GetObjectCreater() runtime.ObjectCreater { return unstructuredCreator{} }
func (a admissionObjects) GetObjectTyper() runtime.ObjectTyper {
	return crdserverscheme.NewUnstructuredObjectTyper()
}
func (a admissionObjects) GetObjectDefaulter() runtime.ObjectDefaulter { return a.defaulter }
func (a admissionObjects) GetObjectConvertor() runtime.ObjectConvertor { return a.convertor }
func (a admissionObjects) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return a.equivalents
}

// unstructuredCreator makes empty custom resources of a kind.
type unstructuredCreator struct{}

func (unstructuredCreator) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// structuralDefaulter applies the structural defaults of the object's
// version to custom resources of gk.
type structuralDefaulter struct {
	gk         schema.GroupKind
	structural map[string]*structuralschema.Structural
}

func (d structuralDefaulter) Default(in runtime.Object) {
	u, ok := in.(runtime.Unstructured)
	if !ok {
		return
	}
	gvk := u.GetObjectKind().GroupVersionKind()
	if gvk.GroupKind() != d.gk {
		return
	}
	if s := d.structural[gvk.Version]; s != nil {
		structuraldefaulting.Default(u.UnstructuredContent(), s)
	}
}

// newAdmissionObjects makes the ObjectInterfaces of def's objects, which
// convert converts.
func newAdmissionObjects(def *apiextensionsv1.CustomResourceDefinition, structural map[string]*structuralschema.Structural, convert runtime.ObjectConvertor) admission.ObjectInterfaces {
	equivalents := runtime.NewEquivalentResourceRegistry()
	names := def.Status.AcceptedNames
	for _, v := range def.Spec.Versions {
		gvr := schema.GroupVersionResource{Group: def.Spec.Group, Version: v.Name, Resource: names.Plural}
		gvk := schema.GroupVersionKind{Group: def.Spec.Group, Version: v.Name, Kind: names.Kind}
		equivalents.RegisterKindFor(gvr, "", gvk)
		if v.Subresources != nil && v.Subresources.Status != nil {
			equivalents.RegisterKindFor(gvr, "status", gvk)
		}
		if v.Subresources != nil && v.Subresources.Scale != nil {
			equivalents.RegisterKindFor(gvr, "scale", schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"})
		}
	}
	return admissionObjects{
		convertor:   convert,
		defaulter:   structuralDefaulter{gk: schema.GroupKind{Group: def.Spec.Group, Kind: names.Kind}, structural: structural},
		equivalents: equivalents,
	}
}

// ObjectInterfaces are what admission converts, creates and defaults the
// definition's objects with.
func (r *Rules) ObjectInterfaces() admission.ObjectInterfaces { return r.objects }

// GVK and GVR are the kind and resource the rules serve.
func (r *Rules) GVK() schema.GroupVersionKind { return r.gvk }

// GVR is the resource the rules serve.
func (r *Rules) GVR() schema.GroupVersionResource { return r.gvr }
