package job

import (
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// finishIndex ends the running pod of index ix with exit code (0:
// Succeeded, else Failed), as its kubelet would.
func (a *api) finishIndex(t *testing.T, ix int, code int32) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pods.Items() {
		if p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil || completionIndex(p) != ix {
			continue
		}
		p = p.DeepCopy()
		phase, reason := corev1.PodSucceeded, "Completed"
		if code != 0 {
			phase, reason = corev1.PodFailed, "Error"
		}
		p.Status.Phase = phase
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: metav1.Now()}}}}
		if _, err := a.pods.Update(p); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no running pod of index %d", ix)
}

// runningOf returns the running pod of index ix, or nil.
func (a *api) runningOf(ix int) *corev1.Pod {
	for _, p := range a.active() {
		if completionIndex(p) == ix {
			return p
		}
	}
	return nil
}

// TestBackoffLimitPerIndex: each index of a Job with backoffLimitPerIndex
// is retried on its own, after its own backoff, its pods counting its
// failures in their annotations, until it fails for good; the Job fails
// once every index has ended and some failed, or once more than
// maxFailedIndexes have.
func TestBackoffLimitPerIndex(t *testing.T) {
	type finish struct {
		ix   int
		code int32
	}
	type retry struct {
		ix               int
		after            time.Duration
		counted, ignored string
	}
	for _, tc := range []struct {
		name                string
		completions         int32
		limit               int32
		maxFailed           *int32
		policy              *batchv1.PodFailurePolicy
		rounds              [][]finish
		retries             []retry
		failedIndexes       string
		completedIndexes    string
		conditions, message string
		failed              int32
	}{{
		name: "an index retried once, then failed", completions: 3, limit: 1,
		rounds:        [][]finish{{{0, 0}, {1, 1}, {2, 0}}, {{1, 1}}},
		retries:       []retry{{ix: 1, after: 10 * time.Second, counted: "1"}},
		failedIndexes: "1", completedIndexes: "0,2", failed: 2,
		conditions: "FailureTarget=True/FailedIndexes,Failed=True/FailedIndexes", message: "FailedIndexes: Job has failed indexes",
	}, {
		name: "the backoff of an index doubles", completions: 1, limit: 2,
		rounds:        [][]finish{{{0, 1}}, {{0, 1}}, {{0, 1}}},
		retries:       []retry{{ix: 0, after: 10 * time.Second, counted: "1"}, {ix: 0, after: 20 * time.Second, counted: "2"}},
		failedIndexes: "0", failed: 3,
		conditions: "FailureTarget=True/FailedIndexes,Failed=True/FailedIndexes", message: "FailedIndexes: Job has failed indexes",
	}, {
		name: "more failed indexes than maxFailedIndexes", completions: 4, limit: 0, maxFailed: new(int32(1)),
		rounds:        [][]finish{{{0, 1}, {1, 1}}},
		failedIndexes: "0,1", failed: 4,
		conditions: "FailureTarget=True/MaxFailedIndexesExceeded,Failed=True/MaxFailedIndexesExceeded", message: "MaxFailedIndexesExceeded: Job has exceeded the specified maximal number of failed indexes",
	}, {
		name: "a FailIndex rule fails the index at once", completions: 2, limit: 3,
		policy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:      batchv1.PodFailurePolicyActionFailIndex,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
		}}},
		rounds:        [][]finish{{{0, 42}, {1, 0}}},
		failedIndexes: "0", completedIndexes: "1", failed: 1,
		conditions: "FailureTarget=True/FailedIndexes,Failed=True/FailedIndexes", message: "FailedIndexes: Job has failed indexes",
	}, {
		name: "an ignored failure is counted apart", completions: 1, limit: 0,
		policy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:      batchv1.PodFailurePolicyActionIgnore,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{7}},
		}}},
		rounds:           [][]finish{{{0, 7}}, {{0, 0}}},
		retries:          []retry{{ix: 0, after: 10 * time.Second, counted: "0", ignored: "1"}},
		failedIndexes:    "",
		completedIndexes: "0",
		conditions:       "SuccessCriteriaMet=True/CompletionsReached,Complete=True/CompletionsReached", message: "Completed: Job completed",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				j := newJob("j", tc.completions, tc.completions, math.MaxInt32)
				j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
				j.Spec.BackoffLimitPerIndex = new(tc.limit)
				j.Spec.MaxFailedIndexes = tc.maxFailed
				j.Spec.PodFailurePolicy = tc.policy
				if tc.policy != nil {
					j.Spec.PodReplacementPolicy = new(batchv1.Failed)
				}
				a, stop := run(t, j)
				defer stop()
				time.Sleep(time.Second)
				synctest.Wait()
				for _, p := range a.active() {
					if got := p.Annotations[batchv1.JobIndexFailureCountAnnotation]; got != "0" {
						t.Fatalf("first pod %s: failure count %q, want 0", p.Name, got)
					}
				}
				retries := tc.retries
				for i, round := range tc.rounds {
					for _, f := range round {
						a.finishIndex(t, f.ix, f.code)
					}
					if i == len(tc.rounds)-1 {
						break
					}
					want := retries[0]
					retries = retries[1:]
					failedAt := time.Now()
					for a.runningOf(want.ix) == nil && time.Since(failedAt) < time.Minute {
						time.Sleep(100 * time.Millisecond)
						synctest.Wait()
						if a.runningOf(want.ix) == nil {
							// The failed pod stays, with its finalizer,
							// until its replacement is made.
							kept := slices.ContainsFunc(a.pods.Items(), func(p *corev1.Pod) bool {
								return completionIndex(p) == want.ix && p.Status.Phase == corev1.PodFailed && hasTrackingFinalizer(p)
							})
							if !kept {
								t.Fatalf("index %d: the failed pod lost its finalizer before a replacement was made", want.ix)
							}
						}
					}
					if got := time.Since(failedAt).Truncate(time.Second); got != want.after {
						t.Errorf("index %d replaced after %v, want %v", want.ix, got, want.after)
					}
					p := a.runningOf(want.ix)
					if p == nil {
						t.Fatalf("index %d never replaced", want.ix)
					}
					if c, ig := p.Annotations[batchv1.JobIndexFailureCountAnnotation], p.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation]; c != want.counted || ig != want.ignored {
						t.Errorf("replacement of index %d: counts %q, ignored %q, want %q, %q", want.ix, c, ig, want.counted, want.ignored)
					}
				}
				time.Sleep(2 * time.Second)
				synctest.Wait()
				got := a.job(t, "j")
				if c := conditions(got); c != tc.conditions {
					t.Errorf("conditions %s, want %s", c, tc.conditions)
				}
				if got.Status.FailedIndexes == nil || *got.Status.FailedIndexes != tc.failedIndexes || got.Status.CompletedIndexes != tc.completedIndexes || got.Status.Failed != tc.failed {
					t.Errorf("failedIndexes %v, completedIndexes %q, failed %d; want %q, %q, %d",
						got.Status.FailedIndexes, got.Status.CompletedIndexes, got.Status.Failed, tc.failedIndexes, tc.completedIndexes, tc.failed)
				}
				if ev := a.eventLog(); !slices.Contains(ev, tc.message) {
					t.Errorf("events %q, want %q", ev, tc.message)
				}
				for _, p := range a.pods.Items() {
					if hasTrackingFinalizer(p) {
						t.Errorf("pod %s keeps the tracking finalizer", p.Name)
					}
				}
			})
		})
	}
}
