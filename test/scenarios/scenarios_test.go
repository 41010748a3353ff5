package scenarios

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
)

// scenarios are the goldens, each recorded in testdata/<name>.json.
var scenarios = []scenario{
	// First, while the nodes hold no pod: its ReplicaSet's pods go one
	// to a node on both sides.
	drainWithBudget(),
	budgetStatus(),
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
	{
		// An Indexed Job whose first pod fails with exit code 42 is
		// failed by its podFailurePolicy, with no retry.
		name: "job-indexed-pod-failure-policy",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			tmpl := podTemplate()
			tmpl.Annotations = map[string]string{podlifecycle.ExitCodeAnnotation: "42"}
			_, err := client.For[*batchv1.Job](c, ns).Create(ctx, &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "indexed"},
				Spec: batchv1.JobSpec{
					Completions:    new(int32(3)),
					Parallelism:    new(int32(1)),
					CompletionMode: new(batchv1.IndexedCompletion),
					PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
						Action:      batchv1.PodFailurePolicyActionFailJob,
						OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
					}}},
					Template: tmpl,
				},
			}, metav1.CreateOptions{})
			return err
		},
		done: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			return jobFinished(ctx, c, ns, "indexed")
		},
	},
	{
		// An Indexed Job with backoffLimitPerIndex 1 whose pods all fail:
		// each index is retried once, 10 s later, by a pod that carries
		// the index's failure count, then fails; the Job fails with
		// FailedIndexes once both have.
		name: "job-backoff-limit-per-index",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			tmpl := podTemplate()
			tmpl.Annotations = map[string]string{podlifecycle.ExitCodeAnnotation: "1"}
			_, err := client.For[*batchv1.Job](c, ns).Create(ctx, &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "per-index"},
				Spec: batchv1.JobSpec{
					Completions:          new(int32(2)),
					Parallelism:          new(int32(2)),
					CompletionMode:       new(batchv1.IndexedCompletion),
					BackoffLimitPerIndex: new(int32(1)),
					Template:             tmpl,
				},
			}, metav1.CreateOptions{})
			return err
		},
		done: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			return jobFinished(ctx, c, ns, "per-index")
		},
	},
	{
		// A Job whose pod fails, with backoffLimit 0, fails at once.
		name: "job-backoff-limit-exceeded",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			tmpl := podTemplate()
			tmpl.Annotations = map[string]string{podlifecycle.ExitCodeAnnotation: "1"}
			_, err := client.For[*batchv1.Job](c, ns).Create(ctx, &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "failing"},
				Spec:       batchv1.JobSpec{BackoffLimit: new(int32(0)), Template: tmpl},
			}, metav1.CreateOptions{})
			return err
		},
		done: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			return jobFinished(ctx, c, ns, "failing")
		},
	},
	{
		// A Job created suspended makes no pod and says why.
		name: "job-suspended",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			_, err := client.For[*batchv1.Job](c, ns).Create(ctx, &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "paused"},
				Spec:       batchv1.JobSpec{Suspend: new(true), Template: podTemplate()},
			}, metav1.CreateOptions{})
			return err
		},
		done: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			j, err := client.For[*batchv1.Job](c, ns).Get(ctx, "paused", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		},
	},
	{
		// A Job whose pod outruns activeDeadlineSeconds fails, its pod
		// deleted.
		name: "job-active-deadline",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			tmpl := podTemplate()
			tmpl.Annotations = map[string]string{podlifecycle.RunDurationAnnotation: "1h"}
			_, err := client.For[*batchv1.Job](c, ns).Create(ctx, &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "slow"},
				Spec:       batchv1.JobSpec{ActiveDeadlineSeconds: new(int64(2)), Template: tmpl},
			}, metav1.CreateOptions{})
			return err
		},
		done: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			finished, err := jobFinished(ctx, c, ns, "slow")
			if err != nil || !finished {
				return false, err
			}
			pods, err := client.For[*corev1.Pod](c, ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, err
		},
	},
	{
		// A Job with ttlSecondsAfterFinished 0 is deleted, its pods
		// first, once it completes.
		name: "job-ttl-after-finished",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			_, err := client.For[*batchv1.Job](c, ns).Create(ctx, &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "short-lived"},
				Spec: batchv1.JobSpec{
					TTLSecondsAfterFinished: new(int32(0)),
					Template:                podTemplate(),
				},
			}, metav1.CreateOptions{})
			return err
		},
		done: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			jobs, err := client.For[*batchv1.Job](c, ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			pods, err := client.For[*corev1.Pod](c, ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			return len(jobs.Items) == 0 && len(pods.Items) == 0, nil
		},
	},
	statefulSetScaleRoll(),
	statefulSetParallelPartition(),
	statefulSetClaims(),
	resourceQuotaStatus(),
	serviceEndpoints(),
	serviceEndpointsMirrored(),
	daemonSetTaintedNode(),
	concurrencyScenario("cronjob-replace", batchv1.ReplaceConcurrent),
	concurrencyScenario("cronjob-forbid", batchv1.ForbidConcurrent),
	{
		// A CronJob of every minute runs its first Job to Complete.
		name: "cronjob-first-run",
		create: func(ctx context.Context, c *client.Client, ns string, env *replay) error {
			env.nearNextMinute(time.Now())
			_, err := client.For[*batchv1.CronJob](c, ns).Create(ctx, &batchv1.CronJob{
				ObjectMeta: metav1.ObjectMeta{Name: "hello"},
				Spec: batchv1.CronJobSpec{
					Schedule: "*/1 * * * *",
					JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
						Template: podTemplate(),
					}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		done: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			cj, err := client.For[*batchv1.CronJob](c, ns).Get(ctx, "hello", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return cj.Status.LastSuccessfulTime != nil && len(cj.Status.Active) == 0, nil
		},
	},
}

// concurrencyScenario is a CronJob of every minute, of the given
// concurrencyPolicy, whose Jobs run for ten minutes: its first Job runs,
// and at the second minute the policy decides (Replace: the first Job
// deleted and a second made; Forbid: the minute skipped, with kube's
// JobAlreadyActive event). Between the two, the CronJob is annotated on
// both sides: on listwatch, that is what makes its controller look again
// once its clock is moved to the second minute.
func concurrencyScenario(name string, policy batchv1.ConcurrencyPolicy) scenario {
	const cronJob = "every-minute"
	var first string // the first Job's name
	cronJobs := func(c *client.Client, ns string) *client.Resource[*batchv1.CronJob] {
		return client.For[*batchv1.CronJob](c, ns)
	}
	return scenario{
		name: name,
		create: func(ctx context.Context, c *client.Client, ns string, env *replay) error {
			env.nearNextMinute(time.Now())
			tmpl := podTemplate()
			tmpl.Annotations = map[string]string{podlifecycle.RunDurationAnnotation: "10m"}
			_, err := cronJobs(c, ns).Create(ctx, &batchv1.CronJob{
				ObjectMeta: metav1.ObjectMeta{Name: cronJob},
				Spec: batchv1.CronJobSpec{
					Schedule:          "*/1 * * * *",
					ConcurrencyPolicy: policy,
					JobTemplate:       batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		done: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			cj, err := cronJobs(c, ns).Get(ctx, cronJob, metav1.GetOptions{})
			if err != nil || len(cj.Status.Active) != 1 {
				return false, err
			}
			first = cj.Status.Active[0].Name
			// The first Job settled (its pod ready), as it has long been
			// on kube at the second minute: a change of it after that
			// minute would sync the CronJob again (for Forbid, a second
			// JobAlreadyActive).
			j, err := client.For[*batchv1.Job](c, ns).Get(ctx, first, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && j.Status.Ready != nil && *j.Status.Ready == 1, err
		},
		then: []step{{
			do: func(ctx context.Context, c *client.Client, ns string, env *replay) error {
				cj, err := cronJobs(c, ns).Get(ctx, cronJob, metav1.GetOptions{})
				if err != nil {
					return err
				}
				env.nearNextMinute(cj.Status.LastScheduleTime.Time)
				_, err = cronJobs(c, ns).Patch(ctx, cronJob, types.MergePatchType, []byte(`{"metadata":{"annotations":{"scenario.listwatch.io/step":"second-minute"}}}`), metav1.PatchOptions{})
				return err
			},
			until: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
				cj, err := cronJobs(c, ns).Get(ctx, cronJob, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if policy == batchv1.ForbidConcurrent {
					events, err := client.For[*corev1.Event](c, ns).List(ctx, metav1.ListOptions{})
					if err != nil {
						return false, err
					}
					for _, e := range events.Items {
						if e.Reason == "JobAlreadyActive" {
							return true, nil
						}
					}
					return false, nil
				}
				if len(cj.Status.Active) != 1 || cj.Status.Active[0].Name == first {
					return false, nil
				}
				_, err = client.For[*batchv1.Job](c, ns).Get(ctx, first, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true, nil
				}
				return false, err
			},
		}},
	}
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
