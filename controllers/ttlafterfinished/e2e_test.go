package ttlafterfinished_test

// End to end: the TTL-after-finished controller with the Job controller,
// the garbage collector and the simulated nodes, against listwatch's own
// API server.

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/envtest"
)

// TestE2E: of two Jobs that complete together, the one with
// ttlSecondsAfterFinished 0 is deleted with its pod; the other stays.
func TestE2E(t *testing.T) {
	env := envtest.Start(t, envtest.Options{Controllers: []string{
		controllermanager.Job, controllermanager.PodLifecycle, controllermanager.GarbageCollector, controllermanager.TTLAfterFinished,
	}})
	ctx := t.Context()
	if _, err := client.For[*corev1.Namespace](env.Client, "").Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	jobs := client.For[*batchv1.Job](env.Client, "e2e")
	for name, ttl := range map[string]*int32{"kept": nil, "deleted": new(int32(0))} {
		_, err := jobs.Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: batchv1.JobSpec{
				TTLSecondsAfterFinished: ttl,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
				}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	pods := client.For[*corev1.Pod](env.Client, "e2e")
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := jobs.Get(ctx, "deleted", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the Job with ttlSecondsAfterFinished 0 is still there after a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Foreground deletion: the Job went after its pod.
	left, err := pods.List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=deleted"})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d pods of the deleted Job left", len(left.Items))
	}
	kept, err := jobs.Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Job without TTL: %v", err)
	}
	// It finished with the other (both pods run alike), and stays.
	for kept.Status.CompletionTime == nil {
		if time.Now().After(deadline) {
			t.Fatal("the Job without TTL did not complete")
		}
		time.Sleep(10 * time.Millisecond)
		if kept, err = jobs.Get(ctx, "kept", metav1.GetOptions{}); err != nil {
			t.Fatalf("the Job without TTL: %v", err)
		}
	}
}
