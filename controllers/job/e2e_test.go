package job_test

// End to end: the Job controller as the controller-manager runs it, with
// the pod lifecycle controller standing in for the scheduler and the
// kubelets, against listwatch's own API server.

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/job"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
	"github.com/listwatch/listwatch/envtest"
)

const ns = "e2e"

// startCluster runs the Job and pod lifecycle controllers against a
// server, pods running for runFor, failed pods replaced after a
// millisecond's backoff.
func startCluster(t testing.TB, runFor time.Duration) *client.Client {
	t.Helper()
	env := envtest.Start(t, envtest.Options{
		Controllers:  []string{controllermanager.Job, controllermanager.PodLifecycle},
		PodLifecycle: podlifecycle.Options{StartDelay: time.Millisecond, RunDuration: runFor, TerminationDelay: time.Millisecond},
		Job:          job.Options{PodFailureBackoff: time.Millisecond, SyncBatchPeriod: time.Millisecond},
	})
	if _, err := client.For[*corev1.Namespace](env.Client, "").Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return env.Client
}

func newJob(name string, completions, parallelism int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Completions: &completions,
			Parallelism: &parallelism,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}},
		},
	}
}

// waitFinished waits for the Job to have its Complete or Failed
// condition and returns it.
func waitFinished(t testing.TB, c *client.Client, name string) *batchv1.Job {
	t.Helper()
	jobs := client.For[*batchv1.Job](c, ns)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		j, err := jobs.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range j.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Job %s not finished after 2 minutes: status %+v", name, j.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func conditionTypes(j *batchv1.Job) string {
	var out []string
	for _, c := range j.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(out, ",")
}

// jobEvents returns "reason: message" of the events about the Job,
// sorted, waiting until there are at least want.
func jobEvents(t *testing.T, c *client.Client, name string, want int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := client.For[*corev1.Event](c, ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Job" && e.InvolvedObject.Name == name {
				for range max(e.Count, 1) {
					out = append(out, e.Reason+": "+e.Message)
				}
			}
		}
		if len(out) >= want || time.Now().After(deadline) {
			sort.Strings(out)
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func jobPods(t *testing.T, c *client.Client, j *batchv1.Job) []*corev1.Pod {
	t.Helper()
	list, err := client.For[*corev1.Pod](c, ns).List(t.Context(), metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(j.UID)})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func TestE2E(t *testing.T) {
	c := startCluster(t, 20*time.Millisecond)
	jobs := client.For[*batchv1.Job](c, ns)

	t.Run("completions 5 parallelism 2 completes", func(t *testing.T) {
		created, err := jobs.Create(t.Context(), newJob("pi", 5, 2), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Never more than parallelism pods at once.
		pods := client.For[*corev1.Pod](c, ns)
		maxActive := 0
		for {
			list, err := pods.List(t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=pi"})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, p := range list.Items {
				if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					n++
				}
			}
			maxActive = max(maxActive, n)
			j, err := jobs.Get(t.Context(), "pi", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if j.Status.CompletionTime != nil {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		if maxActive > 2 {
			t.Errorf("%d pods active at once, parallelism 2", maxActive)
		}
		j := waitFinished(t, c, "pi")
		st := j.Status
		if got, want := conditionTypes(j), "SuccessCriteriaMet=True/CompletionsReached,Complete=True/CompletionsReached"; got != want {
			t.Errorf("conditions %s, want %s", got, want)
		}
		if st.Succeeded != 5 || st.Failed != 0 || st.Active != 0 || *st.Ready != 0 || *st.Terminating != 0 ||
			st.StartTime == nil || st.CompletionTime == nil || len(st.UncountedTerminatedPods.Succeeded)+len(st.UncountedTerminatedPods.Failed) != 0 {
			t.Errorf("status %+v", st)
		}
		ps := jobPods(t, c, created)
		if len(ps) != 5 {
			t.Fatalf("%d pods, want 5", len(ps))
		}
		for _, p := range ps {
			if !strings.HasPrefix(p.Name, "pi-") || len(p.Name) != len("pi-")+5 {
				t.Errorf("pod name %s, want pi-<5 random>", p.Name)
			}
			if p.Status.Phase != corev1.PodSucceeded || len(p.Finalizers) != 0 {
				t.Errorf("pod %s: phase %s finalizers %v, want Succeeded and none", p.Name, p.Status.Phase, p.Finalizers)
			}
			if p.Labels["job-name"] != "pi" || p.Labels[batchv1.JobNameLabel] != "pi" || p.Labels["controller-uid"] != string(created.UID) {
				t.Errorf("pod %s labels %v", p.Name, p.Labels)
			}
			ref := metav1.GetControllerOf(p)
			if ref == nil || ref.Kind != "Job" || ref.UID != created.UID || !*ref.BlockOwnerDeletion {
				t.Errorf("pod %s controller %+v", p.Name, ref)
			}
			if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.Reason != "Completed" {
				t.Errorf("pod %s containers %+v", p.Name, cs)
			}
		}
		events := jobEvents(t, c, "pi", 6)
		want := []string{"Completed: Job completed"}
		for _, p := range ps {
			want = append(want, "SuccessfulCreate: Created pod: "+p.Name)
		}
		sort.Strings(want)
		if !slices.Equal(events, want) {
			t.Errorf("events\n%q\nwant\n%q", events, want)
		}
	})

	t.Run("an Indexed Job completes every index", func(t *testing.T) {
		j := newJob("indexed", 4, 2)
		j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
		created, err := jobs.Create(t.Context(), j, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		done := waitFinished(t, c, "indexed")
		if got := conditionTypes(done); got != "SuccessCriteriaMet=True/CompletionsReached,Complete=True/CompletionsReached" {
			t.Errorf("conditions %s", got)
		}
		if done.Status.CompletedIndexes != "0-3" || done.Status.Succeeded != 4 {
			t.Errorf("completedIndexes %q succeeded %d, want 0-3 and 4", done.Status.CompletedIndexes, done.Status.Succeeded)
		}
		seen := map[string]bool{}
		for _, p := range jobPods(t, c, created) {
			ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
			seen[ix] = true
			if p.Labels[batchv1.JobCompletionIndexAnnotation] != ix || p.Spec.Hostname != "indexed-"+ix || !strings.HasPrefix(p.Name, "indexed-"+ix+"-") {
				t.Errorf("pod %s: index %s, label %q, hostname %q", p.Name, ix, p.Labels[batchv1.JobCompletionIndexAnnotation], p.Spec.Hostname)
			}
			env := p.Spec.Containers[0].Env
			if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" || env[0].ValueFrom.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/job-completion-index']" {
				t.Errorf("pod %s env %+v", p.Name, env)
			}
		}
		if len(seen) != 4 {
			t.Errorf("indexes %v, want 0 to 3", seen)
		}
	})

	t.Run("a failing Job fails at its backoffLimit", func(t *testing.T) {
		j := newJob("fails", 1, 1)
		j.Spec.BackoffLimit = new(int32(2))
		j.Spec.Template.Annotations = map[string]string{podlifecycle.ExitCodeAnnotation: "3"}
		created, err := jobs.Create(t.Context(), j, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		done := waitFinished(t, c, "fails")
		if got, want := conditionTypes(done), "FailureTarget=True/BackoffLimitExceeded,Failed=True/BackoffLimitExceeded"; got != want {
			t.Errorf("conditions %s, want %s", got, want)
		}
		if done.Status.Failed != 3 || done.Status.Succeeded != 0 || done.Status.Active != 0 || done.Status.CompletionTime != nil {
			t.Errorf("status %+v", done.Status)
		}
		ps := jobPods(t, c, created)
		if len(ps) != 3 {
			t.Errorf("%d pods, want 3", len(ps))
		}
		for _, p := range ps {
			if cs := p.Status.ContainerStatuses; p.Status.Phase != corev1.PodFailed || len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 3 {
				t.Errorf("pod %s: %s %+v", p.Name, p.Status.Phase, cs)
			}
		}
		events := jobEvents(t, c, "fails", 4)
		if !slices.Contains(events, "BackoffLimitExceeded: Job has reached the specified backoff limit") {
			t.Errorf("events %q", events)
		}
	})

	t.Run("the pods of a deleted Job lose the tracking finalizer", func(t *testing.T) {
		j := newJob("deleted", 2, 2)
		j.Spec.Template.Annotations = map[string]string{podlifecycle.RunDurationAnnotation: "1h"}
		created, err := jobs.Create(t.Context(), j, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := jobs.Get(t.Context(), "deleted", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Active == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("status %+v", got.Status)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// No garbage collector runs here: the pods stay, and only the
		// Job controller can let them go.
		orphan := metav1.DeletePropagationOrphan
		if err := jobs.Delete(t.Context(), "deleted", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
			t.Fatal(err)
		}
		for {
			held := 0
			ps := jobPods(t, c, created)
			for _, p := range ps {
				if slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
					held++
				}
			}
			if held == 0 && len(ps) == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d pods keep the tracking finalizer", held, len(ps))
			}
			time.Sleep(5 * time.Millisecond)
		}
	})

	t.Run("a podFailurePolicy FailJob rule fails an Indexed Job at once", func(t *testing.T) {
		j := newJob("policy", 3, 3)
		j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
		j.Spec.BackoffLimit = new(int32(6))
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:      batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
		}}}
		j.Spec.Template.Annotations = map[string]string{podlifecycle.ExitCodeAnnotation: "42"}
		if _, err := jobs.Create(t.Context(), j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		done := waitFinished(t, c, "policy")
		if got, want := conditionTypes(done), "FailureTarget=True/PodFailurePolicy,Failed=True/PodFailurePolicy"; got != want {
			t.Errorf("conditions %s, want %s", got, want)
		}
		msg := done.Status.Conditions[1].Message
		if !strings.HasPrefix(msg, "Container main for pod e2e/policy-") || !strings.HasSuffix(msg, " failed with exit code 42 matching FailJob rule at index 0") {
			t.Errorf("message %q", msg)
		}
	})
}
