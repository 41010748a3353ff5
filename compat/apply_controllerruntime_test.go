package compat_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// TestControllerRuntimeApply drives server-side apply the way
// controller-runtime's users write it: Client.Apply with an apply
// configuration and a FieldOwner, a second owner's conflicting apply
// refused until ForceOwnership, the older Patch(obj, client.Apply) form,
// and Status().Apply writing status alone.
func TestControllerRuntimeApply(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, serverOptions{})
			c, err := crclient.New(s.restConfig(mediaJSON), crclient.Options{Scheme: scheme.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			key := types.NamespacedName{Namespace: "default", Name: "cr-apply"}

			cm := corev1ac.ConfigMap(key.Name, key.Namespace).WithData(map[string]string{"a": "1", "b": "2"})
			if err := c.Apply(ctx, cm, crclient.FieldOwner("first")); err != nil {
				t.Fatalf("apply (create): %v", err)
			}
			var got corev1.ConfigMap
			if err := c.Get(ctx, key, &got); err != nil {
				t.Fatal(err)
			}
			if got.Data["a"] != "1" || len(got.ManagedFields) != 1 || got.ManagedFields[0].Manager != "first" || got.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
				t.Fatalf("created: data %v, managedFields %v", got.Data, got.ManagedFields)
			}

			second := corev1ac.ConfigMap(key.Name, key.Namespace).WithData(map[string]string{"a": "9"})
			err = c.Apply(ctx, second, crclient.FieldOwner("second"))
			if !apierrors.IsConflict(err) {
				t.Fatalf("conflicting apply: %v, want a Conflict", err)
			}
			if err := c.Apply(ctx, second, crclient.FieldOwner("second"), crclient.ForceOwnership); err != nil {
				t.Fatalf("forced apply: %v", err)
			}
			if err := c.Get(ctx, key, &got); err != nil || got.Data["a"] != "9" || got.Data["b"] != "2" {
				t.Fatalf("after the forced apply: %v, data %v", err, got.Data)
			}

			// The form controllers wrote before Client.Apply: a typed
			// object patched with client.Apply. Leaving b out of first's
			// next apply removes it, first owning nothing else.
			old := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}, Data: map[string]string{"c": "3"}}
			//lint:ignore SA1019 the deprecated form is what existing controllers call
			if err := c.Patch(ctx, old, crclient.Apply, crclient.FieldOwner("first")); err != nil {
				t.Fatalf("patch with client.Apply: %v", err)
			}
			if err := c.Get(ctx, key, &got); err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"a": "9", "c": "3"}; len(got.Data) != len(want) || got.Data["a"] != "9" || got.Data["c"] != "3" {
				t.Errorf("data %v, want %v", got.Data, want)
			}

			// Status().Apply on a pod: status written, spec untouched.
			pod := corev1ac.Pod("cr-apply", "default").WithSpec(corev1ac.PodSpec().
				WithContainers(corev1ac.Container().WithName("c").WithImage("busybox")))
			if err := c.Apply(ctx, pod, crclient.FieldOwner("owner")); err != nil {
				t.Fatalf("apply pod: %v", err)
			}
			status := corev1ac.Pod("cr-apply", "default").WithStatus(corev1ac.PodStatus().
				WithConditions(corev1ac.PodCondition().WithType("Example").WithStatus(corev1.ConditionTrue)))
			if err := c.Status().Apply(ctx, status, crclient.FieldOwner("kubelet-ish"), crclient.ForceOwnership); err != nil {
				t.Fatalf("status apply: %v", err)
			}
			var p corev1.Pod
			if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "cr-apply"}, &p); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, cond := range p.Status.Conditions {
				found = found || (cond.Type == "Example" && cond.Status == corev1.ConditionTrue)
			}
			if !found || len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != "busybox" {
				t.Errorf("pod after status apply: conditions %v, containers %v", p.Status.Conditions, p.Spec.Containers)
			}
		})
	}
}
