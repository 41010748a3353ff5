package registry

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/apiserver/internal/crd"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
)

// Rules are what one resource does to the objects written to it, between
// the handlers (which decode, run the field manager and store) and
// Kubernetes' own code: kube-apiserver's rest.Storage and strategy split.
// A built-in resource's are BuiltinRules over kube's strategies, a custom
// resource's CustomRules over apiextensions'; a resource that does more
// (services, which allocate) wraps them.
//
// Create and Update may return a Finish: the handler calls it with true
// once the object is stored, with false when the write is given up or
// tried again, so that what the rules took for it (a service's IPs) is
// kept or given back.
type Rules interface {
	// Create prepares obj, a new object with its server-owned metadata set
	// (name, uid, creationTimestamp), to be stored: admission, the
	// strategy, validation. It returns the object to store, obj itself
	// when it changed obj in place.
	Create(ctx context.Context, w Write, obj Object) (Object, Finish, error)
	// Update prepares obj, the object a client wrote, to be stored over
	// cur, the object stored, both in the resource's representation
	// (Resource.DecodeObject): it returns the object to store, obj itself
	// when it changed obj in place. cur is not changed.
	Update(ctx context.Context, w Write, obj, cur Object) (Object, Finish, error)
	// BeforeDelete decides how cur, as stored, is deleted (Deletion),
	// checking opts (422) and their preconditions (409); it may complete
	// opts as kube does.
	BeforeDelete(ctx context.Context, w Write, cur *unstructured.Unstructured, opts *metav1.DeleteOptions) (Deletion, error)
	// Deleted is told of obj, removed from storage; its resourceVersion is
	// the revision of the removal.
	Deleted(ctx context.Context, obj Object)
}

// Finish ends what Rules.Create or Update started: true once the object
// is stored, false when it is not. A nil Finish does nothing.
type Finish = kube.Finish

// Write describes one write to a resource's rules.
type Write struct {
	Verb, Namespace, Name, Subresource string
	// User is who makes the request; a zero User is none.
	User kube.User
	// Warn receives the rules' warnings (sent as Warning headers); nil
	// drops them.
	Warn func(text string)
	// DryRun says the write will not be stored.
	DryRun bool
	// Options are the write's options as the client gave them.
	Options kube.WriteOptions
	// Admission runs kube's admission plugins on built-in resources (nil:
	// only those reading the object alone).
	Admission *kube.Admission
	// Check is the check kube-apiserver makes in a built-in resource's
	// storage after mutating admission (kube.Request.Check).
	Check func(ctx context.Context, obj, old runtime.Object) error
}

// KubeRequest is w as kube.Rules take it.
func (w Write) KubeRequest() kube.Request {
	return kube.Request{Verb: w.Verb, Namespace: w.Namespace, Name: w.Name, Subresource: w.Subresource,
		User: w.User, Warn: w.Warn, Admission: w.Admission, DryRun: w.DryRun, Options: w.Options, Check: w.Check}
}

// crd is w as the rules r of a custom resource take it, with kube's
// admission of the write.
func (w Write) crd(r *crd.Rules) crd.Request {
	admit, validate := w.KubeRequest().CustomAdmission(r.GVK(), r.GVR(), r.ObjectInterfaces())
	return crd.Request{Verb: w.Verb, Namespace: w.Namespace, Name: w.Name, Subresource: w.Subresource,
		User: w.User.Name, UID: w.User.UID, Groups: w.User.Groups, Warn: w.Warn, Admit: admit, Validate: validate}
}

// BuiltinRules are a built-in resource's rules: Kubernetes' defaulting,
// admission and strategies (kube.Rules).
type BuiltinRules struct{ Kube *kube.Rules }

// Create runs kube's create strategy on obj, as its Go type.
func (b BuiltinRules) Create(ctx context.Context, w Write, obj Object) (Object, Finish, error) {
	stored, err := b.Kube.Create(ctx, w.KubeRequest(), obj)
	if err != nil {
		return nil, nil, err
	}
	out, err := AsObject(stored)
	return out, nil, err
}

// Update runs kube's update strategy of w's subresource on obj, of its
// Go type (a map is an internal error), over cur: it returns the object
// to store.
func (b BuiltinRules) Update(ctx context.Context, w Write, obj, cur Object) (Object, Finish, error) {
	if _, isMap := obj.(*unstructured.Unstructured); isMap {
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("%s of %s as a map", w.Verb, w.Name))
	}
	out, err := b.Kube.UpdateTyped(ctx, w.KubeRequest(), obj, cur)
	if err != nil {
		return nil, nil, err
	}
	o, err := AsObject(out)
	return o, nil, err
}

// Deleted does nothing: kube's strategies keep nothing of an object.
func (BuiltinRules) Deleted(context.Context, Object) {}

// CustomRules are the rules of one served version of a custom resource:
// apiextensions-apiserver's strategies (crd.Rules), over objects held as
// maps.
type CustomRules struct{ CR *crd.Rules }

// errNotMap is the internal error of a custom resource given as a Go type.
func errNotMap(obj Object) error {
	return apierrors.NewInternalError(fmt.Errorf("custom resource as %T", obj))
}

// Create runs the custom resource strategy's BeforeCreate on obj, in
// place: status dropped with a status subresource, generation 1,
// validation by the schema, CEL rules and metadata rules.
func (c CustomRules) Create(ctx context.Context, w Write, obj Object) (Object, Finish, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, errNotMap(obj)
	}
	return u, nil, c.CR.Create(ctx, w.crd(c.CR), u)
}

// Update runs the custom resource strategy (its status strategy for
// /status) on obj over cur, in place.
func (c CustomRules) Update(ctx context.Context, w Write, obj, cur Object) (Object, Finish, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, errNotMap(obj)
	}
	old, ok := cur.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, errNotMap(cur)
	}
	u.SetNamespace(old.GetNamespace())
	u.SetSelfLink("")
	return u, nil, c.CR.Update(ctx, w.crd(c.CR), u, old)
}

// Deleted does nothing.
func (CustomRules) Deleted(context.Context, Object) {}

// errNoRules is the internal error of a resource served with no rules.
var errNoRules = errors.New("no write rules")

// noRules are the rules of a resource that has none (a bug): every write
// fails.
type noRules struct{ r *Resource }

func (n noRules) err() error {
	return apierrors.NewInternalError(fmt.Errorf("apiserver: resource %v: %w", n.r.GVR(), errNoRules))
}

func (n noRules) Create(context.Context, Write, Object) (Object, Finish, error) {
	return nil, nil, n.err()
}

func (n noRules) Update(context.Context, Write, Object, Object) (Object, Finish, error) {
	return nil, nil, n.err()
}

func (noRules) Deleted(context.Context, Object) {}

// WriteRules are r's rules: Rules when set, else those of its Kube or CR.
func (r *Resource) WriteRules() Rules {
	switch {
	case r.Rules != nil:
		return r.Rules
	case r.Kube != nil:
		return BuiltinRules{r.Kube}
	case r.CR != nil:
		return CustomRules{r.CR}
	}
	return noRules{r}
}
