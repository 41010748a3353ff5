package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubestorage "k8s.io/apiserver/pkg/storage"

	"github.com/listwatch/listwatch/apiserver/internal/crd"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
)

// Deletion is how an object goes, as its resource's rules decide
// (Rules.BeforeDelete). The zero Deletion removes it at once, or, while
// finalizers remain, keeps it marked as deleting.
type Deletion struct {
	// Keep, when set, ends the delete: the object stays as Keep, stored
	// first where it differs from what is stored (a namespace or a
	// definition marked as terminating, for its controller to empty).
	Keep *unstructured.Unstructured
	// Pending: a graceful deletion no longer than the one asked for is
	// already under way; the object is answered as it is.
	Pending bool
	// Graceful: the object is deleted gracefully, stored first as
	// Deleting (its deletionTimestamp and grace period set).
	Graceful bool
	Deleting Object
}

// DeleteAdmission is the admission of w's delete with opts of one of r's
// objects: kube's admission plugins, which see a built-in object as its
// internal type and a custom resource as it is stored.
func (r *Resource) DeleteAdmission(w Write, opts *metav1.DeleteOptions) kube.DeleteAdmission {
	switch {
	case r.Kube != nil:
		return r.Kube.DeleteAdmission(w.KubeRequest(), opts)
	case r.CR != nil:
		return w.KubeRequest().CustomDeleteAdmission(r.CR.GVK(), r.CR.GVR(), r.CR.ObjectInterfaces(), opts)
	}
	return kube.DeleteAdmission{}
}

// DeleteWarner is implemented by the rules of a resource whose deletes
// warn of the options they were given, as kube-apiserver's storage of the
// resource does.
type DeleteWarner interface {
	// DeleteWarnings are the warnings of a delete, or of a
	// deletecollection, with opts.
	DeleteWarnings(opts *metav1.DeleteOptions) []string
}

// WarnDelete hands warn the warnings r's rules give a delete or a
// deletecollection with opts, before anything is deleted (a delete of a
// missing object is warned of too, as kube-apiserver warns).
func (r *Resource) WarnDelete(warn func(string), opts *metav1.DeleteOptions) {
	dw, ok := r.WriteRules().(DeleteWarner)
	if !ok || warn == nil {
		return
	}
	for _, text := range dw.DeleteWarnings(opts) {
		warn(text)
	}
}

// Now is the server's clock at the second precision of metav1.Time.
func Now() metav1.Time { return metav1.NewTime(time.Now().UTC().Truncate(time.Second)) }

// BeforeDelete runs kube's BeforeDelete of the resource's strategy on cur:
// the options (422) and their preconditions (409) checked, and a graceful
// deletion (pods) decided.
func (b BuiltinRules) BeforeDelete(ctx context.Context, w Write, cur *unstructured.Unstructured, opts *metav1.DeleteOptions) (Deletion, error) {
	graceful, pending, out, err := b.Kube.BeforeDeleteTyped(ctx, w.KubeRequest(), cur, opts)
	if err != nil || !graceful || pending {
		return Deletion{Pending: pending}, err
	}
	obj, err := AsObject(out)
	return Deletion{Graceful: true, Deleting: obj}, err
}

// BeforeDelete runs kube's BeforeDelete of the custom resource strategy on
// cur: the options and their preconditions checked; custom resources are
// never deleted gracefully.
func (c CustomRules) BeforeDelete(ctx context.Context, w Write, cur *unstructured.Unstructured, opts *metav1.DeleteOptions) (Deletion, error) {
	return Deletion{}, c.CR.BeforeDelete(ctx, w.crd(c.CR), cur, opts)
}

func (n noRules) BeforeDelete(context.Context, Write, *unstructured.Unstructured, *metav1.DeleteOptions) (Deletion, error) {
	return Deletion{}, n.err()
}

// preconditionsFailed is the 409 of a delete whose preconditions cur does
// not meet, in the words of kube's namespace and CustomResourceDefinition
// storages, which check them themselves.
func preconditionsFailed(r *Resource, cur *unstructured.Unstructured, p *metav1.Preconditions) error {
	if p == nil {
		return nil
	}
	var msg string
	switch {
	case p.UID != nil && *p.UID != cur.GetUID():
		msg = fmt.Sprintf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, cur.GetUID())
	case p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion():
		msg = fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, cur.GetResourceVersion())
	default:
		return nil
	}
	return apierrors.NewConflict(r.GR(), cur.GetName(), errors.New(msg))
}

// CheckPreconditions checks a uid and a resourceVersion a request sent ("" for
// none) against the stored object's with kube's own storage check
// (storage.Preconditions.Check), whose invalid-object error, quoting the
// object's etcd key, kube-apiserver answers as a 409 Conflict of the
// object r, namespace and name name.
func CheckPreconditions(r *Resource, namespace, name string, uid types.UID, rv string, storedUID types.UID, storedRV string) error {
	if (uid == "" || uid == storedUID) && (rv == "" || rv == storedRV) {
		return nil
	}
	var p kubestorage.Preconditions
	if uid != "" {
		p.UID = &uid
	}
	if rv != "" {
		p.ResourceVersion = &rv
	}
	stored := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: storedUID, ResourceVersion: storedRV}}
	if err := p.Check(KubeStorageKey(r, namespace, name), stored); err != nil {
		return apierrors.NewConflict(r.GR(), name, err)
	}
	return nil
}

// immortalNamespaces may not be deleted, as kube-apiserver's namespace
// lifecycle admission refuses.
var immortalNamespaces = map[string]bool{
	metav1.NamespaceDefault: true, metav1.NamespaceSystem: true, metav1.NamespacePublic: true,
}

// NamespaceRules are the rules of namespaces: BuiltinRules with the
// deletion of kube-apiserver's namespace storage.
type NamespaceRules struct {
	BuiltinRules
	res *Resource
}

// BeforeDelete refuses the namespaces that may not go, and takes the first
// delete of any other as its storage does: the namespace is marked
// Terminating with a deletionTimestamp and kept while its spec.finalizers
// remain, for the namespace controller to empty it. With none left, it is
// deleted like any object.
func (n NamespaceRules) BeforeDelete(ctx context.Context, w Write, cur *unstructured.Unstructured, opts *metav1.DeleteOptions) (Deletion, error) {
	if immortalNamespaces[cur.GetName()] {
		return Deletion{}, apierrors.NewForbidden(n.res.GR(), cur.GetName(), errors.New("this namespace may not be deleted"))
	}
	if err := preconditionsFailed(n.res, cur, opts.Preconditions); err != nil {
		return Deletion{}, err
	}
	if cur.GetDeletionTimestamp() == nil {
		desired := cur.DeepCopy()
		ts := Now()
		desired.SetDeletionTimestamp(&ts)
		if err := unstructured.SetNestedField(desired.Object, string(corev1.NamespaceTerminating), "status", "phase"); err != nil {
			return Deletion{}, apierrors.NewInternalError(err)
		}
		ApplyPropagation(n.res, desired, *opts)
		return Deletion{Keep: desired}, nil
	}
	if fs, _, _ := unstructured.NestedSlice(cur.Object, "spec", "finalizers"); len(fs) > 0 {
		return Deletion{Keep: cur}, nil
	}
	return n.BuiltinRules.BeforeDelete(ctx, w, cur, opts)
}

// HeldFromRemoval reports whether obj, a namespace being deleted, still
// waits for its spec.finalizers, which hold it from removal as much as its
// metadata.finalizers.
func (n NamespaceRules) HeldFromRemoval(obj Object) bool {
	switch ns := obj.(type) {
	case *corev1.Namespace:
		return len(ns.Spec.Finalizers) > 0
	case *unstructured.Unstructured:
		fs, _, _ := unstructured.NestedSlice(ns.Object, "spec", "finalizers")
		return len(fs) > 0
	}
	return false
}

// HeldFromRemoval reports whether r's rules hold obj, being deleted with
// no metadata.finalizers left, from removal all the same (namespaces with
// spec.finalizers).
func (r *Resource) HeldFromRemoval(obj Object) bool {
	h, ok := r.WriteRules().(interface{ HeldFromRemoval(Object) bool })
	return ok && h.HeldFromRemoval(obj)
}

// CRDRules are the rules of CustomResourceDefinitions: BuiltinRules with
// the deletion of apiextensions-apiserver's storage.
type CRDRules struct {
	BuiltinRules
	res *Resource
}

// BeforeDelete takes the first delete of a definition as its storage
// does: the definition gets a deletionTimestamp, the
// customresourcecleanup.apiextensions.k8s.io finalizer and a Terminating
// condition, and is kept for the CRD controller to delete its custom
// resources. A definition already deleting is deleted like any object.
func (c CRDRules) BeforeDelete(ctx context.Context, w Write, cur *unstructured.Unstructured, opts *metav1.DeleteOptions) (Deletion, error) {
	if err := preconditionsFailed(c.res, cur, opts.Preconditions); err != nil {
		return Deletion{}, err
	}
	if cur.GetDeletionTimestamp() != nil {
		return c.BuiltinRules.BeforeDelete(ctx, w, cur, opts)
	}
	obj, err := crd.FromUnstructured(cur)
	if err != nil {
		return Deletion{}, apierrors.NewInternalError(err)
	}
	ts := metav1.Now()
	obj.DeletionTimestamp = &ts
	if !apiextensionshelpers.CRDHasFinalizer(obj, apiextensionsv1.CustomResourceCleanupFinalizer) {
		obj.Finalizers = append(obj.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer)
	}
	apiextensionshelpers.SetCRDCondition(obj, apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
		Reason: "InstanceDeletionPending", Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
	})
	desired, err := crd.ToUnstructured(obj)
	if err != nil {
		return Deletion{}, apierrors.NewInternalError(err)
	}
	desired.SetResourceVersion(cur.GetResourceVersion())
	return Deletion{Keep: desired}, nil
}

// ApplyPropagation records a delete's propagation policy as the garbage
// collector's finalizers on u: orphan, foregroundDeletion, or neither.
func ApplyPropagation(r *Resource, u metav1.Object, opts metav1.DeleteOptions) {
	var policy metav1.DeletionPropagation
	switch {
	case opts.PropagationPolicy != nil:
		policy = *opts.PropagationPolicy
	//lint:ignore SA1019 still part of the API
	case opts.OrphanDependents != nil:
		policy = metav1.DeletePropagationBackground
		//lint:ignore SA1019 still part of the API
		if *opts.OrphanDependents {
			policy = metav1.DeletePropagationOrphan
		}
	case slices.Contains(u.GetFinalizers(), metav1.FinalizerOrphanDependents) || slices.Contains(u.GetFinalizers(), metav1.FinalizerDeleteDependents):
		// A deletion already in progress keeps its policy.
		return
	case r.OrphanByDefault:
		policy = metav1.DeletePropagationOrphan
	default:
		return
	}
	setFinalizer(u, metav1.FinalizerOrphanDependents, policy == metav1.DeletePropagationOrphan)
	setFinalizer(u, metav1.FinalizerDeleteDependents, policy == metav1.DeletePropagationForeground)
}

// setFinalizer adds (on) or removes f.
func setFinalizer(u metav1.Object, f string, on bool) {
	fs := u.GetFinalizers()
	has := slices.Contains(fs, f)
	switch {
	case on && !has:
		u.SetFinalizers(append(fs, f))
	case !on && has:
		fs = slices.DeleteFunc(fs, func(s string) bool { return s == f })
		if len(fs) == 0 {
			fs = nil
		}
		u.SetFinalizers(fs)
	}
}
