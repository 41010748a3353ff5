package job

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// failurePolicyVerdict is what a Job's podFailurePolicy says of a failed
// pod: the message that fails the Job (FailJob), whether the failure
// counts against backoffLimit (not for Ignore), and the action of the
// rule that matched (nil for none).
type failurePolicyVerdict struct {
	failJob *string
	counts  bool
	action  *batchv1.PodFailurePolicyAction
}

// judgeFailure applies policy's rules, first match wins, to a failed pod.
func judgeFailure(policy *batchv1.PodFailurePolicy, pod *corev1.Pod) failurePolicyVerdict {
	if policy == nil {
		return failurePolicyVerdict{counts: true}
	}
	for i, rule := range policy.Rules {
		var failJob func() string
		switch {
		case rule.OnExitCodes != nil:
			cs := matchExitCodes(pod, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			failJob = func() string {
				return fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
					cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
			}
		case rule.OnPodConditions != nil:
			cond := matchPodConditions(pod, rule.OnPodConditions)
			if cond == nil {
				continue
			}
			failJob = func() string {
				return fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d", pod.Namespace, pod.Name, cond.Type, rule.Action, i)
			}
		default:
			continue
		}
		action := rule.Action
		v := failurePolicyVerdict{counts: true, action: &action}
		switch action {
		case batchv1.PodFailurePolicyActionIgnore:
			v.counts = false
		case batchv1.PodFailurePolicyActionFailJob:
			msg := failJob()
			v.failJob = &msg
		case batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyActionCount:
		default:
			// An action this version does not know: the rule is
			// skipped, as kube skips it.
			continue
		}
		return v
	}
	return failurePolicyVerdict{counts: true}
}

// matchExitCodes returns the first terminated container (regular, then
// init) whose non-zero exit code req matches.
func matchExitCodes(pod *corev1.Pod, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			cs := &list[i]
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 || (req.ContainerName != nil && *req.ContainerName != cs.Name) {
				continue
			}
			in := slices.Contains(req.Values, t.ExitCode)
			if (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && in) || (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpNotIn && !in) {
				return cs
			}
		}
	}
	return nil
}

// matchPodConditions returns the first of pod's conditions a pattern
// matches.
func matchPodConditions(pod *corev1.Pod, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		for _, p := range patterns {
			if c.Type == p.Type && c.Status == p.Status {
				return c
			}
		}
	}
	return nil
}

// matchSuccessPolicy returns the message of the first rule of policy the
// succeeded indexes meet, and whether one does.
func matchSuccessPolicy(policy *batchv1.SuccessPolicy, completions int, succeeded indexSet) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		met := false
		switch {
		case rule.SucceededIndexes != nil:
			want := parseIndexSet(*rule.SucceededIndexes, completions)
			if len(want) == 0 {
				continue
			}
			have := want.overlap(succeeded)
			met = have == want.total() || (rule.SucceededCount != nil && have >= int(*rule.SucceededCount))
		case rule.SucceededCount != nil:
			met = succeeded.total() >= int(*rule.SucceededCount)
		}
		if met {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

// backoff is a Job's record of failures since its last success, which
// spaces out the pods that replace failed ones.
type backoff struct {
	failures    int32
	lastFailure *time.Time
}

// backoffs holds each Job's record, by key, between syncs.
type backoffs struct {
	mu sync.Mutex
	m  map[string]backoff
}

func (b *backoffs) get(key string) backoff {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.m[key]
}

func (b *backoffs) set(key string, r backoff) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]backoff{}
	}
	b.m[key] = r
}

func (b *backoffs) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, key)
}

// next is rec with the pods that finished since it was made: a success
// resets the count to the failures after the last success.
func (rec backoff) next(succeeded, failed []*corev1.Pod, now time.Time) backoff {
	if len(failed) == 0 {
		if len(succeeded) > 0 {
			return backoff{}
		}
		return rec
	}
	failed = slices.Clone(failed)
	sortByFinish(failed, now)
	if len(succeeded) == 0 {
		last := finishedAt(failed[len(failed)-1], now)
		return backoff{failures: rec.failures + int32(len(failed)), lastFailure: &last}
	}
	succeeded = slices.Clone(succeeded)
	sortByFinish(succeeded, now)
	lastSuccess := finishedAt(succeeded[len(succeeded)-1], now)
	out := backoff{}
	for i := len(failed) - 1; i >= 0; i-- {
		t := finishedAt(failed[i], now)
		if !t.After(lastSuccess) {
			break
		}
		if out.lastFailure == nil {
			out.lastFailure = &t
		}
		out.failures++
	}
	return out
}

// remaining is how long to wait, at now, before creating a pod: base
// doubled for each failure after the first, capped at limit, from the
// last failure.
func (rec backoff) remaining(now time.Time, base, limit time.Duration) time.Duration {
	if rec.failures == 0 || rec.lastFailure == nil {
		return 0
	}
	d := base
	for i := int32(1); i < rec.failures && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	left := d - now.Sub(*rec.lastFailure)
	return max(left, 0)
}

func sortByFinish(pods []*corev1.Pod, now time.Time) {
	sort.SliceStable(pods, func(i, j int) bool { return finishedAt(pods[i], now).Before(finishedAt(pods[j], now)) })
}

// finishedAt is when pod finished: its containers' last finish, else
// when it stopped being Ready, else its deletion, else now.
func finishedAt(pod *corev1.Pod, now time.Time) time.Time {
	var last *time.Time
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for _, cs := range list {
			if t := cs.State.Terminated; t != nil && (last == nil || t.FinishedAt.After(*last)) {
				f := t.FinishedAt.Time
				last = &f
			}
		}
	}
	if last != nil {
		return *last
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if pod.DeletionTimestamp != nil {
		return pod.DeletionTimestamp.Time
	}
	return now
}

// uidSet is a set of pod UIDs.
type uidSet map[types.UID]struct{}

func newUIDSet(uids ...types.UID) uidSet {
	s := make(uidSet, len(uids))
	for _, u := range uids {
		s[u] = struct{}{}
	}
	return s
}

func (s uidSet) has(u types.UID) bool { _, ok := s[u]; return ok }

// finalizerExpectations holds, per Job key, the pods whose tracking
// finalizer the controller removed and has not yet seen removed: such a
// pod is counted already, and must not be counted again from a cache
// that lags.
type finalizerExpectations struct {
	mu sync.Mutex
	m  map[string]uidSet
}

func (f *finalizerExpectations) expect(key string, uids []types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]uidSet{}
	}
	s := f.m[key]
	if s == nil {
		s = uidSet{}
		f.m[key] = s
	}
	for _, u := range uids {
		s[u] = struct{}{}
	}
}

func (f *finalizerExpectations) observed(key string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.m[key]; s != nil {
		delete(s, uid)
		if len(s) == 0 {
			delete(f.m, key)
		}
	}
}

func (f *finalizerExpectations) pending(key string) uidSet {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := uidSet{}
	for u := range f.m[key] {
		out[u] = struct{}{}
	}
	return out
}

func (f *finalizerExpectations) forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, key)
}
