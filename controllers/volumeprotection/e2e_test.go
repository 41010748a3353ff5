package volumeprotection_test

// End to end: the pvc-protection controller with the simulated nodes,
// against listwatch's own API server, whose admission puts the finalizer
// on every claim.

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/volumeprotection"
	"github.com/listwatch/listwatch/envtest"
)

// TestE2E: a claim a running pod uses stays, Terminating, when deleted,
// and goes once the pod has.
func TestE2E(t *testing.T) {
	env := envtest.Start(t, envtest.Options{Controllers: []string{controllermanager.PodLifecycle, controllermanager.PVCProtection}})
	ctx := t.Context()
	claims := client.For[*corev1.PersistentVolumeClaim](env.Client, "default")
	pods := client.For[*corev1.Pod](env.Client, "default")
	pvc, err := claims.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pvc.Finalizers, volumeprotection.PVCFinalizer) {
		t.Fatalf("claim created with finalizers %v, want %s", pvc.Finalizers, volumeprotection.PVCFinalizer)
	}
	_, err = pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "user"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
			}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod to be scheduled", func() (bool, error) {
		p, err := pods.Get(ctx, "user", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", err
	})
	if err := claims.Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller has had time to act on the deletion: a second is
	// far more than its sync takes.
	time.Sleep(time.Second)
	got, err := claims.Get(ctx, "data", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("claim in use: %v, %v; want it kept, Terminating", got, err)
	}
	if err := pods.Delete(ctx, "user", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the claim to go", func() (bool, error) {
		_, err := claims.Get(ctx, "data", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
