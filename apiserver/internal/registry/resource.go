package registry

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/apiserver/internal/crd"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/resources"
	"github.com/listwatch/listwatch/storage"
)

// Scheme holds the built-in types the server serves; it is ours, not
// client-go's, so that only what we register is known.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(resources.AddToScheme(Scheme))
}

// Resource is everything the handlers need to know about one resource.
type Resource struct {
	GVK        schema.GroupVersionKind
	Plural     string
	Singular   string
	ShortNames []string
	Categories []string
	Namespaced bool
	// Custom resources are served as unstructured JSON; no strategic merge
	// patch, no protobuf.
	Custom bool
	// HasStatus: a /status subresource exists and the main resource's
	// writes keep the stored status.
	HasStatus bool
	// Scale is non-nil when a /scale subresource exists.
	Scale *ScaleSpec
	// UnconditionalUpdate allows PUT without metadata.resourceVersion.
	UnconditionalUpdate bool
	// CreateOnUpdate lets PUT create a missing object.
	CreateOnUpdate bool
	// ReturnDeleted answers an immediate delete with the deleted object
	// rather than a Status.
	ReturnDeleted bool
	// OrphanByDefault: a delete without a propagation policy orphans
	// dependents (the legacy default of v1 replicationcontrollers and
	// batch/v1 jobs, as their strategies decide it).
	OrphanByDefault bool
	// Graceful: delete of an object bound to a node waits for the node
	// agent (pods).
	Graceful bool
	// Binding: a /binding subresource assigns the object to a node (pods).
	Binding bool
	// Fields are the field selector labels beyond metadata.name and
	// metadata.namespace, each a dotted path into the object.
	Fields []string
	// Def is the registry's entry of a built-in resource; nil for custom
	// resources.
	Def *resources.Resource
	// StoredAs is the resource whose storage holds this one's objects,
	// another version of them (resources.Resource.StoredAs); nil when the
	// resource is stored as itself.
	StoredAs *Resource
	// Kube holds Kubernetes' own rules of a built-in resource (defaulting,
	// strategies); nil for custom resources.
	Kube *kube.Rules
	// CR holds kube-apiserver's rules of a custom resource served from a
	// CustomResourceDefinition (package crd); nil for built-ins.
	CR *crd.Rules
	// Rules are what the resource does on its writes, when more than its
	// Kube or CR rules do (WriteRules).
	Rules Rules
	// Cache is the watch cache of a custom resource (those of built-ins
	// are kept by the server).
	Cache *Cache
	// CRDName is the CustomResourceDefinition a custom resource is
	// served from; Terminating is set while it is being deleted (creates
	// are refused).
	CRDName     string
	Terminating bool
	// CRDFingerprint identifies the installation of a custom resource's
	// definition, and CRD is the definition installed (shared, not to be
	// changed).
	CRDFingerprint string
	CRD            *apiextensionsv1.CustomResourceDefinition

	// printer is kube's Table form of a built-in resource, made on first
	// use.
	printOnce sync.Once
	printer   *kube.Printer
	printErr  error
}

// ScaleSpec says where a resource keeps what autoscaling/v1 Scale shows.
type ScaleSpec struct {
	// Selector renders the object's selector as a label selector string.
	Selector func(obj map[string]any) (string, error)
	// SpecReplicas and StatusReplicas are where the replicas are; nil
	// means spec.replicas (defaulting to 1) and status.replicas.
	SpecReplicas, StatusReplicas []string
}

// GVR is the resource's group, version and plural.
func (r *Resource) GVR() schema.GroupVersionResource {
	return r.GVK.GroupVersion().WithResource(r.Plural)
}

// GR is the resource's group and plural.
func (r *Resource) GR() schema.GroupResource {
	return schema.GroupResource{Group: r.GVK.Group, Resource: r.Plural}
}

// APIVersion is the apiVersion of the resource's objects.
func (r *Resource) APIVersion() string { return r.GVK.GroupVersion().String() }

// QualifiedKind names the resource in the errors of kube-apiserver's
// generic store: the kind of a built-in object, the plural of a custom
// resource (which it serves as unstructured objects).
func (r *Resource) QualifiedKind() schema.GroupKind {
	if r.CR != nil {
		return schema.GroupKind{Group: r.GVK.Group, Kind: r.Plural}
	}
	return r.GVK.GroupKind()
}

// NewTyped returns an empty typed object of the resource's kind; nil for
// custom resources.
func (r *Resource) NewTyped() runtime.Object {
	if r.Custom {
		return nil
	}
	obj, err := Scheme.New(r.GVK)
	if err != nil {
		return nil
	}
	return obj
}

// Printer is kube's Table form of a built-in resource, made on first use.
func (r *Resource) Printer() (*kube.Printer, error) {
	r.printOnce.Do(func() { r.printer, r.printErr = r.Kube.Printer() })
	return r.printer, r.printErr
}

// ServedAsStored reports whether r's objects are served as they are
// stored but for their resourceVersion: a built-in resource stored at the
// version it serves.
func (r *Resource) ServedAsStored() bool { return r.Kube != nil && r.StoredAs == nil }

// Storage is the resource whose storage holds r's objects: r itself, or
// the version they are stored as.
func (r *Resource) Storage() *Resource {
	if r.StoredAs != nil {
		return r.StoredAs
	}
	return r
}

// AsMap is obj, an object of r, as a map: obj itself when it is one.
func (r *Resource) AsMap(obj Object) (*unstructured.Unstructured, error) {
	if _, ok := obj.(*unstructured.Unstructured); !ok && r.Kube == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("%v as %T", r.GVK, obj))
	}
	return AsMapWith(r.Kube, obj)
}

// AsMapWith is obj, an object of k's resource, as a map: obj itself when
// it is one.
func AsMapWith(k *kube.Rules, obj Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	u := &unstructured.Unstructured{}
	return u, k.SetUnstructured(u, obj)
}

// DecodeKV reads an object of r from storage, converted from the version
// it is stored as when that is another: a built-in resource's other
// version through Kubernetes' conversions (as kube-apiserver reads
// events.k8s.io/v1 events from core/v1's storage), a custom resource as
// kube-apiserver's storage decodes it for r's version (crd.Rules'
// FromStorage: from whatever version it was stored at, the storage version
// then, converted by its definition's converter, pruned and defaulted). A
// custom resource that does not convert is a corrupt object, as a get
// answers it.
func (r *Resource) DecodeKV(kv storage.KeyValue) (*unstructured.Unstructured, error) {
	return r.decodeKV(kv, func(u *unstructured.Unstructured) string {
		return strings.TrimPrefix(KubeStorageKey(r, u.GetNamespace(), u.GetName()), "/registry")
	})
}

// DecodeObject reads the object stored at kv in r's one representation,
// the form its writes hold it in from storage to storage: a built-in
// resource's Go type, decoded straight from the stored JSON (as kube's
// JSON serializer decodes, and converted from the version it is stored as
// when that is another), a custom resource's map (DecodeKV). Its
// resourceVersion is kv's revision.
func (r *Resource) DecodeObject(kv storage.KeyValue) (Object, error) {
	if !r.HasGoType() {
		return r.DecodeKV(kv)
	}
	st := r.Storage()
	typed := st.NewTyped()
	if typed == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("no Go type for %v", st.GVK))
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(kv.Value, typed); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decode stored %v: %w", st.GVK, err))
	}
	typed.GetObjectKind().SetGroupVersionKind(st.GVK)
	if r.StoredAs != nil {
		converted, err := kube.Convert(typed, r.GVK)
		if err != nil {
			return nil, err
		}
		converted.GetObjectKind().SetGroupVersionKind(r.GVK)
		typed = converted
	}
	obj, err := AsObject(typed)
	if err != nil {
		return nil, err
	}
	obj.SetResourceVersion(strconv.FormatInt(kv.Revision, 10))
	return obj, nil
}

// DecodeListItem is DecodeKV for an object read by a list: one that does
// not convert is a corrupt object as a list quotes it (its full key).
func (r *Resource) DecodeListItem(kv storage.KeyValue) (*unstructured.Unstructured, error) {
	return r.decodeKV(kv, func(u *unstructured.Unstructured) string {
		return KubeStorageKey(r, u.GetNamespace(), u.GetName())
	})
}

func (r *Resource) decodeKV(kv storage.KeyValue, kubeKey func(*unstructured.Unstructured) string) (*unstructured.Unstructured, error) {
	u, err := DecodeKV(kv)
	if err != nil {
		return nil, err
	}
	if r.CR != nil {
		return r.CR.FromStorage(u, kubeKey(u), kv.Revision)
	}
	if r.StoredAs == nil {
		return u, nil
	}
	typed := r.StoredAs.NewTyped()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decode stored %v: %w", r.StoredAs.GVK, err))
	}
	converted, err := kube.Convert(typed, r.GVK)
	if err != nil {
		return nil, err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(converted)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode %v: %w", r.GVK, err))
	}
	out := &unstructured.Unstructured{Object: obj}
	out.SetAPIVersion(r.APIVersion())
	out.SetKind(r.GVK.Kind)
	return out, nil
}

// EncodeStored is obj's storage form, at the version r's objects are
// stored as: a built-in resource's storage version, or a custom
// resource's definition's, as kube-apiserver's storage encodes it
// whatever version the request wrote (crd.Rules' ToStorage: converted by
// the definition's converter). obj is not changed.
func (r *Resource) EncodeStored(obj Object) ([]byte, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok && r.CR != nil {
		if u.GetAPIVersion() == r.CR.StorageAPIVersion() {
			return EncodeStored(u)
		}
		stored, err := r.CR.ToStorage(u.DeepCopy())
		if err != nil {
			return nil, err
		}
		return EncodeStored(stored)
	}
	if r.StoredAs == nil {
		if u, isMap := obj.(*unstructured.Unstructured); isMap && r.HasGoType() {
			// A built-in object is stored as its Go type's JSON whoever
			// hands it over as a map, so that an object has one stored
			// form, and a write that changes nothing is known by its
			// bytes alone.
			typed, err := r.goType(u)
			if err != nil {
				return nil, err
			}
			return EncodeStored(typed)
		}
		return EncodeStored(obj)
	}
	stored, err := r.ToStorage(obj)
	if err != nil {
		return nil, err
	}
	return EncodeStored(stored)
}

// AnswersStored reports whether a write of r answers with what storage
// decodes of the value it stored rather than with the object written: a
// custom resource written at another version than its storage version,
// which kube-apiserver answers converted there and back (its webhook
// called twice, the storage version's defaults applied between).
func (r *Resource) AnswersStored() bool { return r.CR != nil && !r.CR.IsStorageVersion() }

// EncodeOnce is EncodeOnce for an object of r: one stored at another
// version than it is served (a built-in resource's other version, a custom
// resource whose storage version is another) is encoded for storage alone,
// its answer not being the same JSON.
func (r *Resource) EncodeOnce(obj Object) (OnceEncoded, error) {
	u, isU := obj.(*unstructured.Unstructured)
	if r.StoredAs == nil && (r.CR == nil || !isU || u.GetAPIVersion() == r.CR.StorageAPIVersion()) {
		return EncodeOnce(obj)
	}
	js, err := r.EncodeStored(obj)
	return OnceEncoded{js: js, at: -1}, err
}

// ToStorage converts obj, of r's version, to the version r is stored as;
// obj is not changed.
func (r *Resource) ToStorage(obj Object) (Object, error) {
	var typed runtime.Object
	if u, ok := obj.(*unstructured.Unstructured); ok {
		t, err := r.goType(u)
		if err != nil {
			return nil, err
		}
		typed = t
	} else {
		// Conversion may share memory with its input: the caller keeps obj.
		typed = obj.DeepCopyObject()
		typed.GetObjectKind().SetGroupVersionKind(r.GVK)
	}
	converted, err := kube.Convert(typed, r.StoredAs.GVK)
	if err != nil {
		return nil, err
	}
	return AsObject(converted)
}

// goType is u, an object of the built-in resource r, as its Go type, as
// it is (no defaults applied).
func (r *Resource) goType(u *unstructured.Unstructured) (Object, error) {
	typed := r.NewTyped()
	if typed == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("no Go type for %v", r.GVK))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("convert %v: %w", r.GVK, err))
	}
	typed.GetObjectKind().SetGroupVersionKind(r.GVK)
	return AsObject(typed)
}

// What the handlers do differently for custom resources, as kube-apiserver's
// custom resource handler does, stated as what it is rather than as a
// question of kind.

// Protobuf reports whether r's objects are served and taken as protobuf
// (not custom resources, which have no protobuf form).
func (r *Resource) Protobuf() bool { return !r.Custom }

// StrategicMerge reports whether r takes strategic merge patches (not
// custom resources, whose schemas carry no patch strategy).
func (r *Resource) StrategicMerge() bool { return !r.Custom }

// HasGoType reports whether r's objects have a Go type (built-in
// resources): bodies are decoded into it, and writes can go through the
// rules as it, with no map on the way.
func (r *Resource) HasGoType() bool { return r.Kube != nil }

// DecodeError is the error kube-apiserver's decoder of r answers for the
// JSON js, nil when it takes it or r has no decoder of kube's own (custom
// resources, whose errors are the server's).
func (r *Resource) DecodeError(js []byte) error {
	if r.Kube == nil {
		return nil
	}
	return r.Kube.DecodeError(js)
}

// BodyError is DecodeError for a request's body, in the words of kube's
// request decoding.
func (r *Resource) BodyError(js []byte) error {
	if r.Kube == nil {
		return nil
	}
	return r.Kube.BodyError(js)
}

// EncodeAsKube is obj (its Go type or a map) as kube-apiserver's codec of
// r encodes it (defaulted, in its field order); an error for a resource
// with no codec of kube's own.
func (r *Resource) EncodeAsKube(obj Object) ([]byte, error) {
	if r.Kube == nil {
		return nil, fmt.Errorf("apiserver: %v has no Kubernetes codec", r.GVR())
	}
	return r.Kube.EncodeJSON(obj)
}

// KeepsBodyKind reports whether a body's kind other than r's is left for
// the rules to refuse (422, custom resources) rather than refused by the
// decoder (400).
func (r *Resource) KeepsBodyKind() bool { return r.CR != nil }

// AlwaysContinue reports whether a list of r always states
// metadata.continue, empty on the last page (custom resources).
func (r *Resource) AlwaysContinue() bool { return r.CR != nil }

// UnknownSubresourceNotFound reports whether a request for a subresource
// r does not have is answered as a missing object (custom resources)
// rather than as a path not found.
func (r *Resource) UnknownSubresourceNotFound() bool { return r.CR != nil }

// UnconditionalScale reports whether a Scale written without a
// resourceVersion is written unconditionally (custom resources) rather
// than refused as a conflict-free update would be.
func (r *Resource) UnconditionalScale() bool { return r.CR != nil }
