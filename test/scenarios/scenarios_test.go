package scenarios

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
)

// scenarios are the goldens, each recorded in testdata/<name>.json.
var scenarios = []scenario{
	{
		// A Job of 3 completions, 2 at a time, runs to Complete.
		name: "job-complete",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			_, err := client.For[*batchv1.Job](c, ns).Create(ctx, &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "pi"},
				Spec: batchv1.JobSpec{
					Completions: new(int32(3)),
					Parallelism: new(int32(2)),
					Template:    podTemplate(),
				},
			}, metav1.CreateOptions{})
			return err
		},
		done: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			return jobFinished(ctx, c, ns, "pi")
		},
	},
}

// podTemplate is the scenarios' pod: one container, not restarted, which
// the stand-in kubelet runs to success.
func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"true"}}},
	}}
}

// jobFinished reports whether the Job has its Complete or Failed
// condition.
func jobFinished(ctx context.Context, c *client.Client, ns, name string) (bool, error) {
	j, err := client.For[*batchv1.Job](c, ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return finished(j), nil
}

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
