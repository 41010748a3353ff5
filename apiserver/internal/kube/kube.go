// Package kube applies kube-apiserver's own rules to the writes of built-in
// resources: defaulting from k8s.io/kubernetes/pkg/apis/.../v1, and the
// strategies of k8s.io/kubernetes/pkg/registry (what create and update
// reset, validation, what a status update may change) through
// k8s.io/apiserver's BeforeCreate and BeforeUpdate, exactly as
// kube-apiserver runs them. Nothing here restates a rule of Kubernetes'.
//
// The server keeps objects as unstructured maps of their served version;
// this package converts them to the internal types the strategies work on
// and back. Five packages of listwatch import k8s.io/kubernetes, all of
// them the server's: this one; apiserver/auth (kube's RBAC authorizer,
// review storages and service account tokens); apiserver/bootstrap (the
// bootstrap RBAC policy, the "kubernetes" Service's controller and
// reconciler, the system priority classes); apiserver/internal/registry
// (kube's storage keys, kubeapiserver); and apiserver itself (a pod's
// binding: kube's pod helpers and feature gates). No client-side package
// imports any of them.
package kube

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"

	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/certificates/install"
	_ "k8s.io/kubernetes/pkg/apis/coordination/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/discovery/install"
	_ "k8s.io/kubernetes/pkg/apis/events/install"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	_ "k8s.io/kubernetes/pkg/apis/node/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"
)

var scheme = legacyscheme.Scheme

// Rules is kube-apiserver's handling of one built-in resource served at
// one version. The zero value is not usable; get one from For.
type Rules struct {
	gvr   schema.GroupVersionResource
	gvk   schema.GroupVersionKind
	entry entry
	// objects are what admission converts objects with; nil for kube's
	// scheme alone (SetEquivalents).
	objects admission.ObjectInterfaces
}

// For returns the rules of the built-in resource gvr served with objects
// of kind gvk, or false when Kubernetes has no strategy for it.
func For(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) (*Rules, bool) {
	e, ok := strategies[gvr.GroupResource()]
	if !ok {
		return nil, false
	}
	return &Rules{gvr: gvr, gvk: gvk, entry: e}, true
}

// Request says what a write is, for the strategies that look at it
// (declarative validation reads the subresource; some strategies read the
// user).
type Request struct {
	Verb        string
	Namespace   string
	Name        string
	Subresource string
	// User is who makes the request; a zero User is none.
	User User
	// Warn receives the warnings of the strategies (kube-apiserver sends
	// them as Warning headers); nil drops them.
	Warn func(text string)
	// Admission runs the admission plugins (nil: those reading only the
	// object); DryRun says the write will not be stored (admission.go).
	Admission *Admission
	DryRun    bool
	// Options are the write's options as the client gave them, which
	// admission webhooks receive.
	Options WriteOptions
	// Check, when set, is a check of the write that kube-apiserver makes in
	// the resource's storage, after mutating admission and before the
	// strategy (the escalation checks of RBAC roles and bindings): it gets
	// the internal object and, on update, the internal stored one (nil on
	// create).
	Check func(ctx context.Context, obj, old runtime.Object) error
}

// WriteOptions are the options of a create, update or patch that
// admission webhooks receive besides dryRun: the fieldManager and
// fieldValidation query parameters, as given.
type WriteOptions struct {
	FieldManager, FieldValidation string
}

// User is an authenticated identity.
type User struct {
	Name, UID string
	Groups    []string
}

// context carries what the strategies read from a request's context.
func (k *Rules) context(ctx context.Context, req Request) context.Context {
	ctx = genericapirequest.WithNamespace(ctx, req.Namespace)
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true,
		Verb:              req.Verb,
		APIPrefix:         apiPrefix(k.gvr.Group),
		APIGroup:          k.gvr.Group,
		APIVersion:        k.gvr.Version,
		Namespace:         req.Namespace,
		Resource:          k.gvr.Resource,
		Subresource:       req.Subresource,
		Name:              req.Name,
	})
	if req.User.Name != "" {
		ctx = genericapirequest.WithUser(ctx, &user.DefaultInfo{Name: req.User.Name, UID: req.User.UID, Groups: req.User.Groups})
	}
	if req.Warn != nil {
		ctx = warning.WithWarningRecorder(ctx, warnFunc(req.Warn))
	}
	return ctx
}

func apiPrefix(group string) string {
	if group == "" {
		return "api"
	}
	return "apis"
}

// warnFunc is a warning.Recorder that hands each warning's text on.
type warnFunc func(string)

func (f warnFunc) AddWarning(_, text string) { f(text) }

// ReturnDeleted reports whether a delete answers with the deleted object
// rather than a Status, as kube-apiserver's store for the resource does.
func (k *Rules) ReturnDeleted() bool { return k.entry.returnDeleted }

// AllowUnconditionalUpdate reports whether an update without
// metadata.resourceVersion is accepted.
func (k *Rules) AllowUnconditionalUpdate() bool {
	return k.entry.main.AllowUnconditionalUpdate(context.Background())
}

// AllowCreateOnUpdate reports whether an update of a missing object
// creates it.
func (k *Rules) AllowCreateOnUpdate() bool {
	return k.entry.main.AllowCreateOnUpdate(context.Background())
}

// OrphanByDefault reports whether a delete without a propagation policy
// orphans the object's dependents (the resource's default garbage
// collection policy at this version).
func (k *Rules) OrphanByDefault() bool {
	gc, ok := k.entry.main.(rest.GarbageCollectionDeleteStrategy)
	if !ok {
		return false
	}
	ctx := k.context(context.Background(), Request{Verb: "delete"})
	return gc.DefaultGarbageCollectionPolicy(ctx) == rest.OrphanDependents
}

// Graceful reports whether the resource's deletes may wait out a grace
// period (pods).
func (k *Rules) Graceful() bool {
	_, ok := k.entry.main.(rest.RESTGracefulDeleteStrategy)
	return ok
}

// Default fills in u the defaults kube-apiserver sets when it decodes an
// object of the resource (a request body, or an object read from
// storage).
func (k *Rules) Default(u *unstructured.Unstructured) error {
	ext, err := k.External(u)
	if err != nil {
		return err
	}
	return k.SetUnstructured(u, ext)
}

// Create applies defaulting and the resource's create strategy to obj, a
// new object of the resource's Go type at its served version carrying the
// metadata the server set (uid, creationTimestamp, name), as
// kube-apiserver's BeforeCreate does: admission, PrepareForCreate,
// validation, canonicalisation. It returns the object as kube-apiserver's
// storage reads it back (see readBack), which is what the server stores and
// answers; obj itself is spent. A rule broken is a 422 Invalid with kube's
// causes.
//
// Create takes and returns the typed object, with no unstructured form on
// the way: converting a pod to and from a map costs a quarter of a create
// (BenchmarkCreatePod: 430 µs with the maps, see the note of issue 16).
func (k *Rules) Create(ctx context.Context, req Request, obj runtime.Object) (runtime.Object, error) {
	scheme.Default(obj)
	in, err := k.toInternal(obj)
	if err != nil {
		return nil, err
	}
	ctx = k.context(ctx, req)
	if err := k.admit(ctx, req, in, nil); err != nil {
		return nil, err
	}
	if req.Check != nil {
		if err := req.Check(ctx, in, nil); err != nil {
			return nil, err
		}
	}
	if err := rest.BeforeCreate(k.strategiesFor(req).main, ctx, in); err != nil {
		return nil, err
	}
	if err := k.validate(ctx, req, in, nil); err != nil {
		return nil, err
	}
	return k.served(in)
}

// Update applies defaulting and the update strategy of req.Subresource
// ("" for the main resource, "status", "finalize", "approval", "scale") to
// u over the stored old (its Go type or a map, not changed), in place, as
// kube-apiserver's BeforeUpdate does: what the write may not change is
// taken from old, the generation moves when the spec does, and the result
// is validated against old.
func (k *Rules) Update(ctx context.Context, req Request, u *unstructured.Unstructured, old runtime.Object) error {
	ext, err := k.External(u)
	if err != nil {
		return err
	}
	out, err := k.UpdateTyped(ctx, req, ext, old)
	if err != nil {
		return err
	}
	return k.SetUnstructured(u, out)
}

// UpdateTyped is Update for ext, the written object as External makes it
// (its Go type at the served version, defaulted), which it spends: it
// returns the object to store, as kube-apiserver's storage reads it back.
// It saves an update the conversions of the object to and from a map
// where the caller holds it typed already (BenchmarkUpdatePod).
func (k *Rules) UpdateTyped(ctx context.Context, req Request, ext, old runtime.Object) (runtime.Object, error) {
	strategy, err := k.updateStrategy(req)
	if err != nil {
		return nil, err
	}
	in, err := k.toInternal(ext)
	if err != nil {
		return nil, err
	}
	oldIn, err := k.storedInternal(old)
	if err != nil {
		return nil, err
	}
	ctx = k.context(ctx, req)
	if err := k.admit(ctx, req, in, oldIn); err != nil {
		return nil, err
	}
	if req.Check != nil {
		if err := req.Check(ctx, in, oldIn); err != nil {
			return nil, err
		}
	}
	if err := rest.BeforeUpdate(strategy, ctx, in, oldIn); err != nil {
		return nil, err
	}
	if err := k.validate(ctx, req, in, oldIn); err != nil {
		return nil, err
	}
	return k.served(in)
}

func (k *Rules) updateStrategy(req Request) (rest.RESTUpdateStrategy, error) {
	e := k.strategiesFor(req)
	var s rest.RESTUpdateStrategy
	switch req.Subresource {
	case "", "scale":
		s = e.main
	case "status":
		s = e.status
	case "finalize":
		s = e.finalize
	case "approval":
		s = e.approval
	}
	if s == nil {
		return nil, apierrors.NewNotFound(k.gvr.GroupResource(), req.Subresource)
	}
	return s, nil
}

// External is u, an object of the resource, as its Go type at the served
// version with kube's defaults applied: what kube-apiserver's decoder
// makes of a request's object. u is not changed.
func (k *Rules) External(u *unstructured.Unstructured) (runtime.Object, error) {
	ext, err := scheme.New(k.gvk)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("no Go type for %v: %w", k.gvk, err))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ext); err != nil {
		return nil, badRequest(k.gvk, err)
	}
	scheme.Default(ext)
	return ext, nil
}

// internal is u as the internal type the strategies take, defaulted.
func (k *Rules) internal(u *unstructured.Unstructured) (runtime.Object, error) {
	ext, err := k.External(u)
	if err != nil {
		return nil, err
	}
	return k.toInternal(ext)
}

// storedInternal is old, a stored object of the resource (its Go type at
// the served version, or a map), as the internal type the strategies
// take, defaulted as kube-apiserver's storage decodes it. old is not
// changed: the conversion may share its memory, so a Go type is copied.
func (k *Rules) storedInternal(old runtime.Object) (runtime.Object, error) {
	if u, isMap := old.(*unstructured.Unstructured); isMap {
		return k.internal(u)
	}
	ext := old.DeepCopyObject()
	scheme.Default(ext)
	return k.toInternal(ext)
}

// toInternal converts ext, of the served version, to the internal type.
func (k *Rules) toInternal(ext runtime.Object) (runtime.Object, error) {
	in, err := scheme.New(k.gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("no internal type for %v: %w", k.gvk, err))
	}
	if err := scheme.Convert(ext, in, nil); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("convert %v to internal: %w", k.gvk, err))
	}
	return in, nil
}

// served is in, of the internal version, at the served version as
// kube-apiserver's storage reads it back, with its apiVersion and kind set.
func (k *Rules) served(in runtime.Object) (runtime.Object, error) {
	ext, err := scheme.New(k.gvk)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := scheme.Convert(in, ext, nil); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("convert %v from internal: %w", k.gvk, err))
	}
	return k.ReadBack(ext)
}

// SetUnstructured sets u to ext, an object of the resource's Go type at
// the served version.
func (k *Rules) SetUnstructured(u *unstructured.Unstructured, ext runtime.Object) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ext)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("encode %v: %w", k.gvk, err))
	}
	u.Object = obj
	u.SetAPIVersion(k.gvk.GroupVersion().String())
	u.SetKind(k.gvk.Kind)
	return nil
}

// badRequest is kube-apiserver's answer to a body its decoder refuses.
func badRequest(gvk schema.GroupVersionKind, err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest,
		Message: fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, err),
	}}
}

// BeforeDeleteTyped runs kube-apiserver's BeforeDelete on u: it validates
// opts (422) and its preconditions (409), and, for a resource deleted
// gracefully, returns u with its deletionTimestamp and grace period set,
// as its Go type at the served version as kube-apiserver's storage reads
// it back (graceful true), or reports a graceful deletion already pending
// with a period no longer than asked (pending true). u is not changed; opts
// is completed as kube completes it.
func (k *Rules) BeforeDeleteTyped(ctx context.Context, req Request, u *unstructured.Unstructured, opts *metav1.DeleteOptions) (graceful, pending bool, out runtime.Object, err error) {
	in, err := k.internal(u)
	if err != nil {
		return false, false, nil, err
	}
	graceful, pending, err = rest.BeforeDelete(k.entry.main, k.context(ctx, req), in, opts)
	if err != nil {
		return false, false, nil, err
	}
	if graceful {
		if out, err = k.served(in); err != nil {
			return false, false, nil, err
		}
	}
	return graceful, pending, out, nil
}

// FieldLabelError is kube-apiserver's refusal of a field selector on
// label=value for the resource: its scheme's field label conversion's
// error, nil when the scheme takes the label.
func (k *Rules) FieldLabelError(label, value string) error {
	_, _, err := scheme.ConvertFieldLabel(k.gvk, label, value)
	return err
}
