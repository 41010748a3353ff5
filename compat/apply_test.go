package compat_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// TestTypedApplyConfigurations drives server-side apply through
// client-go's typed apply configurations (applyconfigurations/core/v1):
// Apply creates and merges, a second field manager's conflicting apply is
// refused as a Conflict until forced, ApplyStatus writes status alone, and
// ExtractConfigMap reads back what one manager applied.
func TestTypedApplyConfigurations(t *testing.T) {
	for _, b := range backends {
		for _, ct := range []string{mediaJSON, mediaProtobuf} {
			t.Run(b.name+"/"+ct, func(t *testing.T) {
				s := startServer(t, b, serverOptions{})
				cs := s.clientset(ct)
				ctx := t.Context()
				cms := cs.CoreV1().ConfigMaps("default")

				first := corev1ac.ConfigMap("cfg", "default").WithData(map[string]string{"a": "1", "b": "2"})
				got, err := cms.Apply(ctx, first, metav1.ApplyOptions{FieldManager: "first"})
				if err != nil {
					t.Fatalf("apply (create): %v", err)
				}
				if got.Data["a"] != "1" || len(got.ManagedFields) != 1 || got.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
					t.Fatalf("created: data %v, managedFields %v", got.Data, got.ManagedFields)
				}

				second := corev1ac.ConfigMap("cfg", "default").WithData(map[string]string{"a": "9"})
				_, err = cms.Apply(ctx, second, metav1.ApplyOptions{FieldManager: "second"})
				if !apierrors.IsConflict(err) {
					t.Fatalf("conflicting apply: %v, want a Conflict", err)
				}
				got, err = cms.Apply(ctx, second, metav1.ApplyOptions{FieldManager: "second", Force: true})
				if err != nil || got.Data["a"] != "9" || got.Data["b"] != "2" {
					t.Fatalf("forced apply: %v, data %v", err, got.Data)
				}

				// What "first" still owns: b alone.
				extracted, err := corev1ac.ExtractConfigMap(got, "first")
				if err != nil {
					t.Fatal(err)
				}
				if extracted.Data == nil || len(extracted.Data) != 1 || extracted.Data["b"] != "2" {
					t.Errorf("extracted for first: %v", extracted.Data)
				}

				// ApplyStatus on a pod: status written, spec untouched.
				pods := cs.CoreV1().Pods("default")
				p := corev1ac.Pod("p", "default").WithSpec(corev1ac.PodSpec().
					WithContainers(corev1ac.Container().WithName("c").WithImage("busybox")))
				if _, err := pods.Apply(ctx, p, metav1.ApplyOptions{FieldManager: "owner"}); err != nil {
					t.Fatalf("apply pod: %v", err)
				}
				st := corev1ac.Pod("p", "default").WithStatus(corev1ac.PodStatus().
					WithPhase(corev1.PodRunning).
					WithConditions(corev1ac.PodCondition().WithType(corev1.PodReady).WithStatus(corev1.ConditionTrue)))
				out, err := pods.ApplyStatus(ctx, st, metav1.ApplyOptions{FieldManager: "kubelet"})
				if err != nil {
					t.Fatalf("apply status: %v", err)
				}
				if out.Status.Phase != corev1.PodRunning || out.Spec.Containers[0].Image != "busybox" {
					t.Errorf("after ApplyStatus: phase %q, image %q", out.Status.Phase, out.Spec.Containers[0].Image)
				}
				var statusEntry bool
				for _, e := range out.ManagedFields {
					if e.Manager == "kubelet" && e.Subresource == "status" && e.Operation == metav1.ManagedFieldsOperationApply {
						statusEntry = true
					}
				}
				if !statusEntry {
					t.Errorf("no Apply entry of kubelet for status: %v", out.ManagedFields)
				}
			})
		}
	}
}
