package crd

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/util/webhook"
)

// Conversion of custom resources between a definition's versions, as
// kube-apiserver's storage of a custom resource converts them: each
// served version reads what is stored (at the storage version, or at an
// older one) converted to itself, and writes convert to the storage
// version. The converter is apiextensions' (None: the apiVersion alone;
// Webhook: a ConversionReview to the definition's webhook).

// Converters make the definitions' converters (apiextensions'
// CRConverterFactory), calling webhooks as one server calls them.
type Converters struct {
	factory *conversion.CRConverterFactory
}

// NewConverters makes the converters of a server whose webhooks' Service
// references services resolves and whose calls auth authenticates (what
// kube-apiserver gives its admission webhooks too); nil for either is
// none: a Service reference cannot be called.
func NewConverters(services webhook.ServiceResolver, auth webhook.AuthenticationInfoResolverWrapper) (*Converters, error) {
	f, err := conversion.NewCRConverterFactory(services, auth)
	if err != nil {
		return nil, fmt.Errorf("crd: converters: %w", err)
	}
	return &Converters{factory: f}, nil
}

// standalone are the converters of rules made with none given: URL
// webhooks only.
var standalone = sync.OnceValues(func() (*Converters, error) { return NewConverters(nil, nil) })

// converter is one definition's converter: safe copies its input (for
// admission, which keeps it), unsafe may change it.
type converter struct {
	safe, unsafe runtime.ObjectConvertor
	// webhook: conversion between versions calls the definition's
	// webhook, and costs a request.
	webhook bool
}

// newConverter makes def's converter with c (nil: standalone).
func (c *Converters) newConverter(def *apiextensionsv1.CustomResourceDefinition) (converter, error) {
	if c == nil {
		var err error
		if c, err = standalone(); err != nil {
			return converter{}, err
		}
	}
	if def.Spec.Conversion == nil {
		def = def.DeepCopy()
		def.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	}
	safe, unsafe, err := c.factory.NewConverter(def)
	if err != nil {
		return converter{}, fmt.Errorf("crd %s: converter: %w", def.Name, err)
	}
	return converter{safe: safe, unsafe: unsafe, webhook: def.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter}, nil
}

// ConvertsByWebhook reports whether reading or writing the definition's
// objects at another version than they are stored at calls its
// conversion webhook.
func (r *Rules) ConvertsByWebhook() bool { return r.conv.webhook }

// IsStorageVersion reports whether the rules' version is the
// definition's storage version.
func (r *Rules) IsStorageVersion() bool { return r.gvk.GroupVersion().String() == r.storage }

// ToStorage converts u, at the rules' version, to the storage version as
// kube-apiserver's storage encodes a custom resource: u itself when it is
// at it already, else u converted by the definition's converter and
// pruned with the storage version's schema. u may be changed. A
// conversion that fails is answered as kube answers it (a 500 quoting the
// converter).
func (r *Rules) ToStorage(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if u.GetAPIVersion() == r.storage {
		return u, nil
	}
	out, err := r.convert(u, r.storageGV())
	if err != nil {
		return nil, &apierrors.StatusError{ErrStatus: *responsewriters.ErrorToAPIStatus(err)}
	}
	if _, err := r.coerceAt(out, out.GroupVersionKind().Version, false, false); err != nil {
		return nil, err
	}
	return out, nil
}

// FromStorage is what kube-apiserver's storage decoding does to a stored
// custom resource, u, read at the rules' version: its metadata repaired,
// unknown fields pruned and defaults applied with the schema of the
// version it is stored at, then converted to the rules' version and
// pruned with its schema. u may be changed. key is where kube keeps it
// (registry.KubeStorageKey), which a conversion that fails quotes
// (CorruptObject).
func (r *Rules) FromStorage(u *unstructured.Unstructured, key string, rev int64) (*unstructured.Unstructured, error) {
	stored := u.GroupVersionKind()
	if stored.GroupKind() == r.gvk.GroupKind() {
		if _, err := r.coerceAt(u, stored.Version, true, false); err != nil {
			return nil, err
		}
		if s := r.structural[stored.Version]; s != nil {
			defaultWith(u, s)
		}
	}
	out := u
	if stored.GroupVersion() != r.gvk.GroupVersion() {
		var err error
		if out, err = r.convert(u, r.gvk.GroupVersion()); err != nil {
			return nil, CorruptObject(key, rev, err)
		}
	}
	if _, err := r.coerceAt(out, r.gvk.Version, false, false); err != nil {
		return nil, err
	}
	return out, nil
}

// convert converts u to gv with the definition's converter.
func (r *Rules) convert(u *unstructured.Unstructured, gv schema.GroupVersion) (*unstructured.Unstructured, error) {
	obj, err := r.conv.unsafe.ConvertToVersion(u, gv)
	if err != nil {
		return nil, err
	}
	out, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("crd %s: conversion made %T", r.gvr, obj)
	}
	return out, nil
}

func (r *Rules) storageGV() schema.GroupVersion {
	gv, _ := schema.ParseGroupVersion(r.storage) // made by New from the group and version
	return gv
}

// CorruptObject is the error kube-apiserver's storage gives for an
// object at key, at revision rev, that does not decode (a conversion
// webhook that fails): a StorageError of code corrupt object, which a
// read of the object answers as a 500 InternalError.
func CorruptObject(key string, rev int64, err error) error {
	return &corruptObject{StorageError: storage.NewCorruptObjError(key, fmt.Errorf("object not decodable revision=%d: %w", rev, err))}
}

// corruptObject is a StorageError of a corrupt object, answered as
// kube's registry answers it.
type corruptObject struct{ *storage.StorageError }

func (e *corruptObject) Unwrap() error { return e.StorageError }

func (e *corruptObject) Status() metav1.Status {
	return apierrors.NewInternalError(e.StorageError).Status()
}

// CorruptObjects is the error kube-apiserver's list of resource gr
// answers when objects in it do not decode (each error from
// CorruptObject, with the object's full storage key): a 500
// StorageReadError quoting the first and counting the others, each a
// cause.
func CorruptObjects(gr schema.GroupResource, errs []error) error {
	var causes []metav1.StatusCause
	for _, err := range errs {
		var se *storage.StorageError
		if errors.As(err, &se) {
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeUnexpectedServerResponse, Field: se.Key, Message: se.Error()})
		}
	}
	var msg strings.Builder
	fmt.Fprintf(&msg, "failed to read one or more %s from the storage: %v", gr.String(), errs[0])
	if len(errs) > 1 {
		fmt.Fprintf(&msg, " (and %d more)", len(errs)-1)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonStoreReadError,
		Details: &metav1.StatusDetails{Group: gr.Group, Kind: gr.Resource, Name: "list", Causes: causes},
		Message: msg.String(),
	}}
}
