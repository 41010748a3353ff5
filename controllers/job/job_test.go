package job

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/internal/kubelog"
)

func TestMain(m *testing.M) {
	kubelog.ToStderr()
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// api applies the controller's writes to cachetest sources, as the API
// server would: pods get names from their generateName, a deleted pod
// with finalizers stays, marked, until they are removed.
type api struct {
	mu     sync.Mutex
	jobs   *cachetest.Source[*batchv1.Job]
	pods   *cachetest.Source[*corev1.Pod]
	serial int
	events []string
}

func (a *api) Get(_ context.Context, ns, name string) (*batchv1.Job, error) {
	j, ok := a.jobs.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "batch", Resource: "jobs"}, name)
	}
	return j.DeepCopy(), nil
}

func (a *api) UpdateStatus(_ context.Context, j *batchv1.Job) (*batchv1.Job, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur, ok := a.jobs.Get(j.Namespace, j.Name)
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "batch", Resource: "jobs"}, j.Name)
	}
	next := cur.DeepCopy()
	next.Status = *j.Status.DeepCopy()
	next.ResourceVersion = j.ResourceVersion
	return a.jobs.Update(next)
}

func (a *api) CreatePod(_ context.Context, ns string, p *corev1.Pod, _ metav1.CreateOptions) (*corev1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p = p.DeepCopy()
	a.serial++
	p.Namespace = ns
	p.Name = fmt.Sprintf("%s%05d", p.GenerateName, a.serial)
	p.UID = types.UID(p.Name)
	p.Status.Phase = corev1.PodPending
	return a.pods.Create(p)
}

func (a *api) DeletePod(_ context.Context, ns, name string, _ metav1.DeleteOptions) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pods.Get(ns, name)
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	if len(p.Finalizers) == 0 {
		_, err := a.pods.Delete(ns, name)
		return err
	}
	if p.DeletionTimestamp == nil {
		p = p.DeepCopy()
		p.DeletionTimestamp = new(metav1.Now())
		_, err := a.pods.Update(p)
		return err
	}
	return nil
}

func (a *api) PatchPod(_ context.Context, ns, name string, _ types.PatchType, data []byte, _ metav1.PatchOptions) (*corev1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if string(data) != string(removeFinalizerPatch) {
		return nil, fmt.Errorf("unexpected patch %s", data)
	}
	p, ok := a.pods.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	p = p.DeepCopy()
	p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == batchv1.JobTrackingFinalizer })
	if p.DeletionTimestamp != nil && len(p.Finalizers) == 0 {
		return a.pods.Delete(ns, name)
	}
	return a.pods.Update(p)
}

func (a *api) Eventf(obj runtime.Object, _, reason, format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, reason+": "+fmt.Sprintf(format, args...))
}

// finishPods ends every running pod of the source with exit code (0:
// Succeeded, else Failed), as its kubelet would.
func (a *api) finishPods(t *testing.T, code int32) int {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, p := range a.pods.Items() {
		if p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil {
			continue
		}
		p = p.DeepCopy()
		now := metav1.Now()
		p.Status.Phase = corev1.PodSucceeded
		reason := "Completed"
		if code != 0 {
			p.Status.Phase, reason = corev1.PodFailed, "Error"
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: now}}}}
		if _, err := a.pods.Update(p); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

func (a *api) job(t *testing.T, name string) *batchv1.Job {
	t.Helper()
	j, ok := a.jobs.Get("ns", name)
	if !ok {
		t.Fatalf("job %s gone", name)
	}
	return j
}

func (a *api) active() []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range a.pods.Items() {
		if p.Status.Phase == corev1.PodPending && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func (a *api) eventLog() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.events)
}

// run starts the controller over the api with jobs, until the returned
// stop.
func run(t *testing.T, jobs ...*batchv1.Job) (*api, func()) {
	t.Helper()
	a := &api{jobs: cachetest.New[*batchv1.Job](), pods: cachetest.New[*corev1.Pod]()}
	for _, j := range jobs {
		if _, err := a.jobs.Create(j); err != nil {
			t.Fatal(err)
		}
	}
	opts := cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{Logger: quiet}}
	ji := cache.NewSharedIndexInformer[*batchv1.Job](a.jobs, opts)
	pi := cache.NewSharedIndexInformer[*corev1.Pod](a.pods, opts)
	c, err := New(ji, pi, a, Options{Recorder: a, SyncBatchPeriod: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c.opts.Controller.Logger = quiet
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { ji.Run(ctx) })
	wg.Go(func() { pi.Run(ctx) })
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return a, func() { cancel(); wg.Wait() }
}

// newJob is a Job as the API server stores it, defaulted.
func newJob(name string, completions, parallelism, backoffLimit int32) *batchv1.Job {
	uid := types.UID("uid-" + name)
	sel := map[string]string{batchv1.ControllerUidLabel: string(uid)}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid},
		Spec: batchv1.JobSpec{
			Completions: &completions, Parallelism: &parallelism, BackoffLimit: &backoffLimit,
			CompletionMode:       new(batchv1.NonIndexedCompletion),
			PodReplacementPolicy: new(batchv1.TerminatingOrFailed),
			Suspend:              new(false),
			Selector:             &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
			},
		},
	}
}

func conditions(j *batchv1.Job) string {
	var out []string
	for _, c := range j.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(out, ",")
}

// TestFailedPodsBackOff: a failed pod is replaced after 10 s, the next
// after 20 s, as kube's backoff doubles; at backoffLimit the Job fails.
func TestFailedPodsBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, stop := run(t, newJob("j", 1, 1, 2))
		defer stop()
		time.Sleep(time.Second)
		synctest.Wait()
		start := time.Now()
		var replaced []time.Duration
		for range 3 {
			if len(a.active()) != 1 {
				t.Fatalf("%d active pods, want 1", len(a.active()))
			}
			a.finishPods(t, 1)
			failedAt := time.Now()
			for len(a.active()) == 0 && time.Since(start) < 5*time.Minute {
				time.Sleep(100 * time.Millisecond)
				synctest.Wait()
				if finished(a.job(t, "j")) {
					break
				}
			}
			if finished(a.job(t, "j")) {
				break
			}
			replaced = append(replaced, time.Since(failedAt).Truncate(time.Second))
		}
		if want := []time.Duration{10 * time.Second, 20 * time.Second}; !slices.Equal(replaced, want) {
			t.Errorf("failed pods replaced after %v, want %v", replaced, want)
		}
		j := a.job(t, "j")
		if got := conditions(j); got != "FailureTarget=True/BackoffLimitExceeded,Failed=True/BackoffLimitExceeded" {
			t.Errorf("conditions %s", got)
		}
		if j.Status.Failed != 3 || j.Status.Active != 0 || len(a.pods.Items()) != 3 {
			t.Errorf("status %+v with %d pods", j.Status, len(a.pods.Items()))
		}
		for _, p := range a.pods.Items() {
			if len(p.Finalizers) != 0 {
				t.Errorf("pod %s keeps finalizers %v", p.Name, p.Finalizers)
			}
		}
	})
}

// TestActiveDeadline: pods still running at activeDeadlineSeconds are
// deleted and the Job fails with DeadlineExceeded once they are gone.
func TestActiveDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := newJob("j", 4, 2, 6)
		j.Spec.ActiveDeadlineSeconds = new(int64(30))
		a, stop := run(t, j)
		defer stop()
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if got := a.job(t, "j"); len(got.Status.Conditions) != 0 || got.Status.Active != 2 {
			t.Fatalf("before the deadline: %+v", got.Status)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		got := a.job(t, "j")
		if c := conditions(got); c != "FailureTarget=True/DeadlineExceeded,Failed=True/DeadlineExceeded" {
			t.Fatalf("after the deadline: conditions %s", c)
		}
		if got.Status.Failed != 2 || got.Status.Active != 0 || *got.Status.Terminating != 0 || len(a.pods.Items()) != 0 {
			t.Errorf("status %+v, %d pods left", got.Status, len(a.pods.Items()))
		}
		if ev := a.eventLog(); !slices.Contains(ev, "DeadlineExceeded: Job was active longer than specified deadline") {
			t.Errorf("events %q", ev)
		}
	})
}

// TestSuspend: a suspended Job runs nothing and says so; resumed, it
// starts its pods and its clock.
func TestSuspend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := newJob("j", 2, 2, 6)
		j.Spec.Suspend = new(true)
		a, stop := run(t, j)
		defer stop()
		time.Sleep(time.Second)
		synctest.Wait()
		got := a.job(t, "j")
		if c := conditions(got); c != "Suspended=True/JobSuspended" || len(a.pods.Items()) != 0 || got.Status.StartTime != nil {
			t.Fatalf("suspended: conditions %s, %d pods, start %v", c, len(a.pods.Items()), got.Status.StartTime)
		}
		got = got.DeepCopy()
		got.Spec.Suspend = new(false)
		if _, err := a.jobs.Update(got); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		got = a.job(t, "j")
		if c := conditions(got); c != "Suspended=False/JobResumed" || len(a.active()) != 2 || got.Status.StartTime == nil {
			t.Fatalf("resumed: conditions %s, %d pods, start %v", c, len(a.active()), got.Status.StartTime)
		}
		a.finishPods(t, 0)
		time.Sleep(time.Second)
		synctest.Wait()
		if c := conditions(a.job(t, "j")); c != "Suspended=False/JobResumed,SuccessCriteriaMet=True/CompletionsReached,Complete=True/CompletionsReached" {
			t.Fatalf("conditions %s", c)
		}
		ev := a.eventLog()
		if !slices.Contains(ev, "Suspended: Job suspended") || !slices.Contains(ev, "Resumed: Job resumed") || !slices.Contains(ev, "Completed: Job completed") {
			t.Errorf("events %q", ev)
		}
	})
}

// TestSuccessPolicy: an Indexed Job whose successPolicy wants index 0
// succeeds when it does; the other pods are deleted, and, deleted before
// they ended, counted neither way (as kube counts them).
func TestSuccessPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := newJob("j", 3, 3, 6)
		j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
		j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: new("0")}}}
		a, stop := run(t, j)
		defer stop()
		time.Sleep(time.Second)
		synctest.Wait()
		for _, p := range a.active() {
			if completionIndex(p) == 0 {
				p = p.DeepCopy()
				p.Status.Phase = corev1.PodSucceeded
				if _, err := a.pods.Update(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		time.Sleep(time.Second)
		synctest.Wait()
		got := a.job(t, "j")
		if c := conditions(got); c != "SuccessCriteriaMet=True/SuccessPolicy,Complete=True/SuccessPolicy" {
			t.Fatalf("conditions %s", c)
		}
		if got.Status.CompletedIndexes != "0" || got.Status.Succeeded != 1 || got.Status.Failed != 0 || got.Status.Conditions[1].Message != "Matched rules at index 0" {
			t.Errorf("status %+v", got.Status)
		}
	})
}

func TestIndexSet(t *testing.T) {
	tests := []struct {
		in          string
		completions int
		add         []int
		want        string
		total       int
	}{
		{"", 5, nil, "", 0},
		{"1,3-5,7", 10, nil, "1,3-5,7", 5},
		{"1,3-5,7", 6, nil, "1,3-5", 4},
		{"0,1", 10, []int{2}, "0-2", 3},
		{"0", 10, []int{1}, "0,1", 2},
		{"x,2", 10, []int{4, 3}, "2-4", 3},
		{"3-9", 5, nil, "3,4", 2},
	}
	for _, tt := range tests {
		s := parseIndexSet(tt.in, tt.completions).with(tt.add...)
		if s.String() != tt.want || s.total() != tt.total {
			t.Errorf("%q + %v (completions %d) = %q (%d), want %q (%d)", tt.in, tt.add, tt.completions, s, s.total(), tt.want, tt.total)
		}
	}
	a, b := parseIndexSet("0-4,8", 10), parseIndexSet("3-8", 10)
	if got := a.overlap(b); got != 3 {
		t.Errorf("overlap %d, want 3", got)
	}
	if !a.has(8) || a.has(5) || a.has(9) {
		t.Error("has")
	}
	if got := pendingIndexes(3, 10, a); !slices.Equal(got, []int{5, 6, 7}) {
		t.Errorf("pending %v", got)
	}
}
