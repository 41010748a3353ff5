package job

import (
	"math"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// An Indexed Job with spec.backoffLimitPerIndex retries each index on its
// own: a failed pod's replacement carries, in the
// batch.kubernetes.io/job-index-failure-count annotation, how many pods of
// its index failed before it (and in job-index-ignored-failure-count how
// many failures the podFailurePolicy ignored), waits out a backoff of its
// own index, and an index whose failures exceed the limit (or whose pod
// matched a FailIndex rule) is failed: listed in status.failedIndexes and
// not retried. The Job fails once more than maxFailedIndexes indexes have
// failed, or once every index has either succeeded or failed and some
// failed.

func perIndex(j *batchv1.Job) bool { return j.Spec.BackoffLimitPerIndex != nil }

// failureCounts reads a pod's index failure counts: the failures that
// counted against backoffLimitPerIndex and those the podFailurePolicy
// ignored. A missing, malformed or out-of-range value reads as 0, as kube
// reads it.
func failureCounts(p *corev1.Pod) (counted, ignored int32) {
	return annotationCount(p, batchv1.JobIndexFailureCountAnnotation), annotationCount(p, batchv1.JobIndexIgnoredFailureCountAnnotation)
}

func annotationCount(p *corev1.Pod, key string) int32 {
	v, err := strconv.Atoi(p.Annotations[key])
	if err != nil || v < 0 || v > math.MaxInt32 {
		return 0
	}
	return int32(v)
}

// indexFailed reports whether a pod fails its index: it failed, and
// either matched a FailIndex rule or was the index's last allowed try.
func indexFailed(j *batchv1.Job, p *corev1.Pod) bool {
	if !podFailed(p, j) {
		return false
	}
	v := judgeFailure(j.Spec.PodFailurePolicy, p)
	if v.action != nil && *v.action == batchv1.PodFailurePolicyActionFailIndex {
		return true
	}
	counted, _ := failureCounts(p)
	return v.counts && counted >= *j.Spec.BackoffLimitPerIndex
}

// failedIndexes is status.failedIndexes with the indexes failed since: by
// pods not counted yet (they carry the tracking finalizer).
func failedIndexes(j *batchv1.Job, pods []*corev1.Pod) indexSet {
	completions := int(*j.Spec.Completions)
	var prev indexSet
	if j.Status.FailedIndexes != nil {
		prev = parseIndexSet(*j.Status.FailedIndexes, completions)
	}
	var ixs []int
	for _, p := range pods {
		if ix := completionIndex(p); ix != noIndex && ix < completions && hasTrackingFinalizer(p) && indexFailed(j, p) {
			ixs = append(ixs, ix)
		}
	}
	return prev.with(ixs...)
}

// delayedDeletions picks, for each index still to be retried, the failed
// pod its replacement takes its failure counts from: that pod keeps its
// tracking finalizer, and so stays, until the replacement is made. The
// latest failure of the index wins.
func (s *state) delayedDeletions() map[int]*corev1.Pod {
	completions := int(*s.job.Spec.Completions)
	running := indexSet(nil).with(indexesOf(s.active)...)
	out := map[int]*corev1.Pod{}
	for _, p := range s.pods {
		if !hasTrackingFinalizer(p) || s.finalizerGone.has(p.UID) || !podFailed(p, s.job) {
			continue
		}
		ix := completionIndex(p)
		if ix == noIndex || ix >= completions || s.succeededIdx.has(ix) || s.failedIdx.has(ix) || running.has(ix) {
			continue
		}
		if last, ok := out[ix]; !ok || (absoluteFailures(last) <= absoluteFailures(p) && !finishedAt(p, p.CreationTimestamp.Time).Before(finishedAt(last, last.CreationTimestamp.Time))) {
			out[ix] = p
		}
	}
	return out
}

func absoluteFailures(p *corev1.Pod) int32 {
	counted, ignored := failureCounts(p)
	return counted + ignored
}

// replacementCounts are the failure counts of the pod that replaces
// failed (nil for an index's first pod).
func replacementCounts(j *batchv1.Job, failed *corev1.Pod) (counted, ignored int32) {
	if failed == nil {
		return 0, 0
	}
	counted, ignored = failureCounts(failed)
	if judgeFailure(j.Spec.PodFailurePolicy, failed).counts {
		counted++
	} else {
		ignored++
	}
	return counted, ignored
}

// indexBackoff is how long, at now, an index must wait before its pod
// that replaces failed is made: the Job's pod failure backoff for the
// index's failures so far.
func indexBackoff(failed *corev1.Pod, now time.Time, base, limit time.Duration) time.Duration {
	if failed == nil {
		return 0
	}
	last := finishedAt(failed, failed.CreationTimestamp.Time)
	return backoff{failures: absoluteFailures(failed) + 1, lastFailure: &last}.remaining(now, base, limit)
}
