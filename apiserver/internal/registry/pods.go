package registry

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/apiserver/internal/kube"
)

// Binder is the rules of a resource with a binding subresource (pods):
// kube-apiserver's BindingREST.
type Binder interface {
	// Bind admits b, a Binding of w's object posted to resource (pods,
	// with w.Subresource "binding", or bindings), and returns how the
	// object as stored is bound: the update to run over it, which checks
	// b's UID and resourceVersion as preconditions.
	Bind(ctx context.Context, w Write, resource schema.GroupVersionResource, b *corev1.Binding) (func(cur Object) (Object, error), error)
}

// PodRules are pods' rules: kube's strategies, and binding, which sets a
// pod's node with no strategy, as kube-apiserver's binding storage does.
type PodRules struct {
	BuiltinRules
	r *Resource
}

// Update is BuiltinRules.Update, but for a binding, whose pod (of its Go
// type) is stored as kube's storage reads it back.
func (p PodRules) Update(ctx context.Context, w Write, obj, cur Object) (Object, Finish, error) {
	if w.Subresource != "binding" {
		return p.BuiltinRules.Update(ctx, w, obj, cur)
	}
	if _, isMap := obj.(*unstructured.Unstructured); isMap {
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("apiserver: binding of %s as a map", w.Name))
	}
	out, err := p.Kube.ReadBack(obj)
	if err != nil {
		return nil, nil, err
	}
	o, err := AsObject(out)
	return o, nil, err
}

// Bind runs kube's admission and checks of b (kube.Binding); the update
// it returns assigns the pod as kube does (kube.AssignPod).
func (p PodRules) Bind(ctx context.Context, w Write, resource schema.GroupVersionResource, b *corev1.Binding) (func(cur Object) (Object, error), error) {
	b, err := kube.Binding(ctx, w.KubeRequest(), resource, b)
	if err != nil {
		return nil, err
	}
	if w.Name == "" {
		// kube's storage finds no key for the pod.
		return nil, apierrors.NewBadRequest("Name parameter required.")
	}
	return func(cur Object) (Object, error) {
		if err := CheckPreconditions(p.r, w.Namespace, w.Name, b.UID, b.ResourceVersion, cur.GetUID(), cur.GetResourceVersion()); err != nil {
			return nil, err
		}
		// cur is a private copy of the pod as stored, of its Go type.
		pod, ok := cur.(*corev1.Pod)
		if !ok {
			return nil, apierrors.NewInternalError(fmt.Errorf("apiserver: pod %s as %T", w.Name, cur))
		}
		if err := kube.AssignPod(pod, b); err != nil {
			return nil, err
		}
		return pod, nil
	}, nil
}
