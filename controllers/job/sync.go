package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
)

// removeFinalizerPatch is the strategic merge patch that takes the
// tracking finalizer, and only it, off a pod.
var removeFinalizerPatch = []byte(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["` + batchv1.JobTrackingFinalizer + `"]}}`)

func hasTrackingFinalizer(p *corev1.Pod) bool {
	return slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer)
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// finished reports whether the Job has its Complete or Failed condition.
func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func indexed(j *batchv1.Job) bool {
	return j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion
}

func suspended(j *batchv1.Job) bool { return j.Spec.Suspend != nil && *j.Spec.Suspend }

// onlyReplaceFailed reports whether the Job replaces a pod only once it
// has failed, not while it terminates (podReplacementPolicy Failed, the
// default with a podFailurePolicy).
func onlyReplaceFailed(j *batchv1.Job) bool {
	return j.Spec.PodReplacementPolicy != nil && *j.Spec.PodReplacementPolicy == batchv1.Failed
}

// podFailed reports whether the Job counts pod as failed: Failed, or
// being deleted before it succeeded (unless the Job waits for such pods
// to fail).
func podFailed(p *corev1.Pod, j *batchv1.Job) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	if onlyReplaceFailed(j) {
		return false
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded
}

func terminating(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func condition(j *batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == typ {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func isTrue(c *batchv1.JobCondition) bool { return c != nil && c.Status == corev1.ConditionTrue }

func newCondition(typ batchv1.JobConditionType, reason, message string, now time.Time) *batchv1.JobCondition {
	t := metav1.NewTime(now)
	return &batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastProbeTime: t, LastTransitionTime: t}
}

// setCondition makes j's condition typ have status, reason and message,
// and reports whether that changed anything. A condition not there is
// added unless its status would be False.
func setCondition(j *batchv1.Job, typ batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) bool {
	next := newCondition(typ, reason, message, now)
	next.Status = status
	if c := condition(j, typ); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == message {
			return false
		}
		*c = *next
		return true
	}
	if status == corev1.ConditionFalse {
		return false
	}
	j.Status.Conditions = append(j.Status.Conditions, *next)
	return true
}

// state is what one sync knows of a Job and its pods.
type state struct {
	key  string
	job  *batchv1.Job
	pods []*corev1.Pod
	// active are the pods neither finished nor being deleted.
	active      []*corev1.Pod
	ready       int32
	terminating int32
	// uncountedSucceeded and uncountedFailed are the UIDs of
	// status.uncountedTerminatedPods as the sync started.
	uncountedSucceeded, uncountedFailed uidSet
	// finalizerGone are pods whose finalizer this controller removed
	// and has not seen removed.
	finalizerGone uidSet
	// succeeded and failed count what the Job will have counted once
	// every finished pod is.
	succeeded, failed int32
	// prevSucceededIdx and succeededIdx are an Indexed Job's succeeded
	// indexes before and after the pods finished since.
	prevSucceededIdx, succeededIdx indexSet
	// failedIdx are the failed indexes of a Job with
	// backoffLimitPerIndex, and delayed the failed pod whose failure
	// counts each index to be retried hands to its next pod.
	failedIdx indexSet
	delayed   map[int]*corev1.Pod
	// finishing is the condition the Job is on its way to: a
	// SuccessCriteriaMet or FailureTarget to write first, or the Failed
	// that follows a FailureTarget written before.
	finishing *batchv1.JobCondition
	backoff   backoff
	// requeue asks for another sync after it (a deadline, a backoff).
	requeue time.Duration
}

func (s *state) after(d time.Duration) {
	if d > 0 && (s.requeue == 0 || d < s.requeue) {
		s.requeue = d
	}
}

// sync brings the Job at key one step closer to done, as kube's
// syncJob does.
func (jc *Controller) sync(ctx context.Context, key string) (controller.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || ns == "" || name == "" {
		return controller.Result{}, controller.Terminal(fmt.Errorf("malformed Job key %q", key))
	}
	cached, ok, err := jc.jobs.GetIndexer().GetByKey(key)
	if err != nil {
		return controller.Result{}, err
	}
	if !ok {
		jc.expectations.DeleteExpectations(key)
		jc.finalizers.forget(key)
		jc.backoffs.forget(key)
		jc.writes.Forget(key)
		return controller.Result{}, nil
	}
	if m := cached.Spec.ManagedBy; m != nil && *m != batchv1.JobControllerName {
		return controller.Result{}, nil
	}
	cached = jc.writes.Latest(key, cached)
	if finished(cached) {
		jc.backoffs.forget(key)
		return controller.Result{}, nil
	}
	if m := cached.Spec.CompletionMode; m != nil && *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
		jc.event(cached, corev1.EventTypeWarning, "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")
		return controller.Result{}, nil
	}
	if cached.Spec.BackoffLimit == nil || cached.Spec.Parallelism == nil || (indexed(cached) && cached.Spec.Completions == nil) {
		// The API server defaults them: a Job without is not one it
		// served.
		return controller.Result{}, controller.Terminal(fmt.Errorf("job %s lacks the fields the API server defaults", key))
	}
	job := cached.DeepCopy()
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	now := time.Now()

	// Expectations are read before the pods, so that a pod created in
	// between is seen by the next sync rather than missed by this one.
	satisfied := jc.expectations.SatisfiedExpectations(key)
	// So are the finalizer removals not yet seen: one seen between the
	// two reads is then in the pods read, while the other order could
	// take a pod the cache still shows with its finalizer for one not
	// counted yet, and count it twice.
	finalizerGone := jc.finalizers.pending(key)
	pods, err := jc.podsOf(job)
	if err != nil {
		return controller.Result{}, err
	}
	s := &state{
		key:                key,
		job:                job,
		pods:               pods,
		active:             controller.FilterActivePods(pods),
		uncountedSucceeded: newUIDSet(job.Status.UncountedTerminatedPods.Succeeded...),
		uncountedFailed:    newUIDSet(job.Status.UncountedTerminatedPods.Failed...),
		finalizerGone:      finalizerGone,
	}
	for _, p := range s.active {
		if controller.IsPodReady(p) {
			s.ready++
		}
	}
	for _, p := range pods {
		if terminating(p) {
			s.terminating++
		}
	}
	active := int32(len(s.active))
	newSucceeded, newFailed := s.newlyFinished()
	s.succeeded = job.Status.Succeeded + int32(len(newSucceeded)) + int32(len(s.uncountedSucceeded))
	s.failed = job.Status.Failed + int32(countedFailures(job, newFailed)) + int32(len(s.uncountedFailed))
	if job.Status.StartTime == nil && !suspended(job) {
		t := metav1.NewTime(now)
		job.Status.StartTime = &t
	}
	s.backoff = jc.backoffs.get(key).next(newSucceeded, newFailed, now)

	// How the Job ends, first what earlier syncs decided, then failures,
	// then successes.
	s.finishing = condition(job, batchv1.JobSuccessCriteriaMet)
	if !isTrue(s.finishing) {
		s.finishing = nil
		if target := condition(job, batchv1.JobFailureTarget); isTrue(target) {
			s.finishing = newCondition(batchv1.JobFailed, target.Reason, target.Message, now)
		} else if msg := failJobMessage(job, pods); msg != nil {
			s.finishing = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, *msg, now)
		}
	}
	if s.finishing == nil {
		switch {
		case s.failed > *job.Spec.BackoffLimit || pastBackoffLimitOnFailure(job, pods):
			s.finishing = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit", now)
		case job.Spec.ActiveDeadlineSeconds != nil && job.Status.StartTime != nil && !suspended(job):
			left := time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second - now.Sub(job.Status.StartTime.Time)
			if left <= 0 {
				s.finishing = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline", now)
			} else {
				s.after(left)
			}
		}
	}
	if indexed(job) {
		completions := int(*job.Spec.Completions)
		s.prevSucceededIdx = parseIndexSet(job.Status.CompletedIndexes, completions)
		var ixs []int
		for _, p := range pods {
			if ix := completionIndex(p); p.Status.Phase == corev1.PodSucceeded && ix != noIndex && ix < completions && hasTrackingFinalizer(p) {
				ixs = append(ixs, ix)
			}
		}
		s.succeededIdx = s.prevSucceededIdx.with(ixs...)
		s.succeeded = int32(s.succeededIdx.total())
		if perIndex(job) {
			s.failedIdx = failedIndexes(job, pods)
			if s.finishing == nil {
				failed := s.failedIdx.total()
				if m := job.Spec.MaxFailedIndexes; m != nil && failed > int(*m) {
					s.finishing = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes", now)
				} else if failed > 0 && failed+s.succeededIdx.total() >= completions {
					s.finishing = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, "Job has failed indexes", now)
				}
			}
			s.delayed = s.delayedDeletions()
		}
		if s.finishing == nil {
			if msg, met := matchSuccessPolicy(job.Spec.SuccessPolicy, completions, s.succeededIdx); met {
				s.finishing = newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, msg, now)
			}
		}
	}

	suspendChanged := false
	var manageErr error
	if s.finishing != nil {
		// Whatever runs goes; the Job is declared finished once every
		// pod is gone and counted.
		deletedReady, deleted, err := jc.deleteActive(ctx, job, s.active)
		if deleted != active || !satisfied {
			s.finishing = nil
		}
		active -= deleted
		s.terminating += deleted
		s.ready -= deletedReady
		manageErr = err
	} else {
		managed := false
		if satisfied && job.DeletionTimestamp == nil {
			active, manageErr = jc.manage(ctx, s)
			managed = true
		}
		complete := false
		if job.Spec.Completions == nil {
			// Any success ends a Job without completions, once what
			// runs has stopped.
			complete = s.succeeded > 0 && active == 0
		} else {
			complete = s.succeeded >= *job.Spec.Completions && active == 0
		}
		switch {
		case complete:
			s.finishing = newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods", now)
		case managed && suspended(job):
			if setCondition(job, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now) {
				suspendChanged = true
				jc.event(job, corev1.EventTypeNormal, "Suspended", "Job suspended")
				// Kube 1.36+ (MutableSchedulingDirectivesForSuspendedJobs)
				// forgets the start of a suspended Job.
				job.Status.StartTime = nil
			}
		case managed:
			if setCondition(job, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now) {
				suspendChanged = true
				jc.event(job, corev1.EventTypeNormal, "Resumed", "Job resumed")
				// activeDeadlineSeconds counts from the resumption.
				t := metav1.NewTime(now)
				job.Status.StartTime = &t
			}
		}
	}

	needsFlush := suspendChanged || active != job.Status.Active || job.Status.Ready == nil || *job.Status.Ready != s.ready ||
		job.Status.Terminating == nil || *job.Status.Terminating != s.terminating
	job.Status.Active = active
	job.Status.Ready = &s.ready
	job.Status.Terminating = &s.terminating
	if err := jc.track(ctx, s, needsFlush, now); err != nil {
		return controller.Result{}, errors.Join(manageErr, fmt.Errorf("tracking the status of Job %s: %w", key, err))
	}
	return controller.Result{RequeueAfter: s.requeue}, manageErr
}

// dueIndexes returns those of ixs whose backoff is over, or, when none
// is, none, and the sync is asked for again when the first one's ends.
func (jc *Controller) dueIndexes(s *state, ixs []int, now time.Time) []int {
	var due []int
	var wait time.Duration
	for _, ix := range ixs {
		d := indexBackoff(s.delayed[ix], now, jc.opts.PodFailureBackoff, jc.opts.MaxPodFailureBackoff)
		if d == 0 {
			due = append(due, ix)
		} else if wait == 0 || d < wait {
			wait = d
		}
	}
	if len(due) == 0 {
		s.after(wait)
	}
	return due
}

func equalPtr[T comparable](a, b *T) bool { return a == b || (a != nil && b != nil && *a == *b) }

// podsOf returns the pods the Job controls, from the cache.
func (jc *Controller) podsOf(job *batchv1.Job) ([]*corev1.Pod, error) {
	pods, err := controller.ControlledPods(jc.pods.GetIndexer(), job.Namespace, job.UID)
	if err != nil {
		return nil, fmt.Errorf("reading the pods of Job %s: %w", jobKey(job), err)
	}
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return nil, controller.Terminal(fmt.Errorf("selector of Job %s: %w", jobKey(job), err))
	}
	// A pod whose labels were changed so that the selector no longer
	// matches is no longer the Job's (kube releases it); it is left out.
	out := pods[:0:0]
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

// newlyFinished returns the Job's pods that succeeded and failed and are
// not counted yet: they carry the finalizer, are not in
// uncountedTerminatedPods and, for an Indexed Job, have a valid index.
func (s *state) newlyFinished() (succeeded, failed []*corev1.Pod) {
	for _, p := range s.pods {
		if !hasTrackingFinalizer(p) || s.finalizerGone.has(p.UID) {
			continue
		}
		if indexed(s.job) {
			if ix := completionIndex(p); ix == noIndex || ix >= int(*s.job.Spec.Completions) {
				continue
			}
		}
		switch {
		case p.Status.Phase == corev1.PodSucceeded && !s.uncountedSucceeded.has(p.UID):
			succeeded = append(succeeded, p)
		case podFailed(p, s.job) && !s.uncountedFailed.has(p.UID):
			failed = append(failed, p)
		}
	}
	return succeeded, failed
}

// countedFailures counts the failed pods the podFailurePolicy does not
// ignore.
func countedFailures(job *batchv1.Job, failed []*corev1.Pod) int {
	n := 0
	for _, p := range failed {
		if judgeFailure(job.Spec.PodFailurePolicy, p).counts {
			n++
		}
	}
	return n
}

// failJobMessage is the message of the first FailJob rule a failed pod
// matches, if any.
func failJobMessage(job *batchv1.Job, pods []*corev1.Pod) *string {
	if job.Spec.PodFailurePolicy == nil {
		return nil
	}
	for _, p := range pods {
		if podFailed(p, job) {
			if v := judgeFailure(job.Spec.PodFailurePolicy, p); v.failJob != nil {
				return v.failJob
			}
		}
	}
	return nil
}

// pastBackoffLimitOnFailure reports whether the restarts of the running
// or pending pods of a Job whose pods restart OnFailure reach
// backoffLimit (exceed it, for a limit of 0).
func pastBackoffLimitOnFailure(job *batchv1.Job, pods []*corev1.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var restarts int32
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, cs := range p.Status.InitContainerStatuses {
			restarts += cs.RestartCount
		}
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
	}
	if *job.Spec.BackoffLimit == 0 {
		return restarts > 0
	}
	return restarts >= *job.Spec.BackoffLimit
}

// manage creates or deletes pods so that the Job has as many running as
// it should, and returns how many are active then.
func (jc *Controller) manage(ctx context.Context, s *state) (int32, error) {
	job := s.job
	active := int32(len(s.active))
	if suspended(job) {
		victims := victimsOf(job, s.active, int(active))
		deletedReady, deleted, err := jc.deletePods(ctx, s.key, job, victims)
		s.terminating += deleted
		s.ready -= deletedReady
		return active - deleted, err
	}
	parallelism := *job.Spec.Parallelism
	var want int32
	switch {
	case job.Spec.Completions == nil && s.succeeded > 0:
		// A success ends such a Job: what runs is left to finish, and
		// nothing new starts.
		want = active
	case job.Spec.Completions == nil:
		want = parallelism
	default:
		want = max(min(*job.Spec.Completions-s.succeeded, parallelism), 0)
	}

	if victims := victimsOf(job, s.active, int(max(active-want, 0))); len(victims) > 0 {
		if len(victims) > MaxPodCreateDeletePerSync {
			victims = victims[:MaxPodCreateDeletePerSync]
		}
		// One sync either deletes or creates; deleting goes first.
		deletedReady, deleted, err := jc.deletePods(ctx, s.key, job, victims)
		s.terminating += deleted
		s.ready -= deletedReady
		return active - deleted, err
	}

	var replacing int32
	if onlyReplaceFailed(job) {
		replacing = s.terminating
	}
	diff := want - replacing - active
	if diff <= 0 {
		return active, nil
	}
	now := time.Now()
	if !perIndex(job) {
		if wait := s.backoff.remaining(now, jc.opts.PodFailureBackoff, jc.opts.MaxPodFailureBackoff); wait > 0 {
			s.after(wait)
			return active, nil
		}
	}
	diff = min(diff, MaxPodCreateDeletePerSync)
	var ixs []int
	if indexed(job) {
		taken := s.succeededIdx.with(indexesOf(s.active)...)
		if onlyReplaceFailed(job) {
			var terms []*corev1.Pod
			for _, p := range s.pods {
				if terminating(p) {
					terms = append(terms, p)
				}
			}
			taken = taken.with(indexesOf(terms)...)
		}
		ixs = pendingIndexes(int(diff), int(*job.Spec.Completions), taken.union(s.failedIdx))
		if perIndex(job) {
			ixs = jc.dueIndexes(s, ixs, now)
		}
		diff = int32(len(ixs))
		if diff == 0 {
			return active, nil
		}
	}

	template := job.Spec.Template.DeepCopy()
	if indexed(job) {
		addIndexEnv(template)
	}
	if !slices.Contains(template.Finalizers, batchv1.JobTrackingFinalizer) {
		template.Finalizers = append(template.Finalizers, batchv1.JobTrackingFinalizer)
	}
	ref := controller.NewControllerRef(job, controllerKind)
	// Expected before created: the informer may show a pod before its
	// create returns.
	jc.expectations.ExpectCreations(s.key, int(diff))
	created, err := controller.SlowStartBatch(ctx, int(diff), controller.SlowStartInitialBatchSize, 0, func(ctx context.Context, i int) error {
		t, generateName := template, ""
		if ixs != nil {
			t = template.DeepCopy()
			ix := ixs[i]
			v := strconv.Itoa(ix)
			if t.Annotations == nil {
				t.Annotations = map[string]string{}
			}
			t.Annotations[batchv1.JobCompletionIndexAnnotation] = v
			if t.Labels == nil {
				t.Labels = map[string]string{}
			}
			t.Labels[batchv1.JobCompletionIndexAnnotation] = v
			t.Spec.Hostname = job.Name + "-" + v
			generateName = indexedGenerateName(job.Name, ix)
			if perIndex(job) {
				counted, ignored := replacementCounts(job, s.delayed[ix])
				t.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(counted))
				if ignored > 0 {
					t.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
				}
			}
		}
		err := jc.podControl.CreatePodsWithGenerateName(ctx, job.Namespace, t, job, ref, generateName)
		if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// The namespace goes, and the Job with it.
			return nil
		}
		return err
	})
	if skipped := int(diff) - created; skipped > 0 {
		// Failed and never-tried creations will not be observed.
		jc.expectations.LowerExpectations(s.key, skipped, 0)
	}
	return active + int32(created), err
}

// indexedGenerateName is "<job>-<index>-", the job's name cut so that
// the index and the server's random suffix fit in a name.
func indexedGenerateName(name string, ix int) string {
	suffix := "-" + strconv.Itoa(ix) + "-"
	const maxGenerated = 63 - 5
	if len(name)+len(suffix) > maxGenerated {
		name = name[:maxGenerated-len(suffix)]
	}
	return name + suffix
}

// addIndexEnv gives every container the JOB_COMPLETION_INDEX variable,
// from the pod's completion index label.
func addIndexEnv(t *corev1.PodTemplateSpec) {
	add := func(cs []corev1.Container) {
		for i := range cs {
			if slices.ContainsFunc(cs[i].Env, func(e corev1.EnvVar) bool { return e.Name == "JOB_COMPLETION_INDEX" }) {
				continue
			}
			cs[i].Env = append(cs[i].Env, corev1.EnvVar{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + batchv1.JobCompletionIndexAnnotation + "']"},
			}})
		}
	}
	add(t.Spec.InitContainers)
	add(t.Spec.Containers)
}

// victimsOf picks at least n of the active pods to delete: for an
// Indexed Job first those of an index out of range or repeated, then the
// pods a ReplicaSet would delete first.
func victimsOf(job *batchv1.Job, active []*corev1.Pod, n int) []*corev1.Pod {
	var victims, rest []*corev1.Pod
	if indexed(job) {
		completions := int(*job.Spec.Completions)
		byIndex := map[int][]*corev1.Pod{}
		for _, p := range active {
			ix := completionIndex(p)
			if ix == noIndex || ix >= completions {
				victims = append(victims, p)
				continue
			}
			byIndex[ix] = append(byIndex[ix], p)
		}
		for _, ps := range byIndex {
			if len(ps) == 1 {
				rest = append(rest, ps[0])
				continue
			}
			// Keep the pod of the index that is furthest along.
			ps = slices.Clone(ps)
			controller.SortPodsForDeletion(ps)
			victims = append(victims, ps[:len(ps)-1]...)
			rest = append(rest, ps[len(ps)-1])
		}
	} else {
		rest = slices.Clone(active)
	}
	if len(victims) < n {
		controller.SortPodsForDeletion(rest)
		victims = append(victims, rest[:n-len(victims)]...)
	}
	return victims
}

// deletePods takes the tracking finalizer off the pods and deletes them,
// expecting their deletions, and returns how many ready pods and how
// many pods it deleted.
func (jc *Controller) deletePods(ctx context.Context, key string, job *batchv1.Job, pods []*corev1.Pod) (int32, int32, error) {
	keys := make([]string, len(pods))
	for i, p := range pods {
		keys[i] = podKey(p)
	}
	jc.expectations.ExpectDeletions(key, keys)
	return jc.forEachPod(pods, func(p *corev1.Pod) error {
		err := func() error {
			if hasTrackingFinalizer(p) {
				if err := jc.podControl.PatchPod(ctx, p.Namespace, p.Name, removeFinalizerPatch); err != nil {
					return fmt.Errorf("removing the tracking finalizer: %w", err)
				}
			}
			return jc.podControl.DeletePod(ctx, p.Namespace, p.Name, job)
		}()
		if err != nil {
			// This deletion will not be observed.
			jc.expectations.DeletionObserved(key, podKey(p))
		}
		return err
	})
}

// deleteActive deletes the pods of a Job that is finishing, keeping
// their finalizers: track counts and removes them.
func (jc *Controller) deleteActive(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod) (int32, int32, error) {
	return jc.forEachPod(pods, func(p *corev1.Pod) error {
		return jc.podControl.DeletePod(ctx, p.Namespace, p.Name, job)
	})
}

// forEachPod runs del on each pod concurrently and counts the ready pods
// and the pods it deleted (a pod already gone counts as deleted).
func (jc *Controller) forEachPod(pods []*corev1.Pod, del func(p *corev1.Pod) error) (int32, int32, error) {
	var ready, deleted atomic.Int32
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			if err := del(p); err != nil && !apierrors.IsNotFound(err) {
				errs[i] = err
				return
			}
			deleted.Add(1)
			if controller.IsPodReady(p) {
				ready.Add(1)
			}
		})
	}
	wg.Wait()
	return ready.Load(), deleted.Load(), errors.Join(errs...)
}

// track counts the finished pods, as kube's
// trackJobStatusAndRemoveFinalizers does: each is first added to
// status.uncountedTerminatedPods (written), then its finalizer is
// removed, then it moves from there to the succeeded or failed count
// (written); the conditions on the way to the end (SuccessCriteriaMet,
// FailureTarget) are written with the first write, and the last
// (Complete, Failed) once no pod is left uncounted or terminating.
func (jc *Controller) track(ctx context.Context, s *state, needsFlush bool, now time.Time) error {
	job := s.job
	isIndexed := indexed(job)
	pods := s.pods
	if isIndexed {
		pods = slices.Clone(pods)
		slices.SortStableFunc(pods, func(a, b *corev1.Pod) int { return completionIndex(a) - completionIndex(b) })
	}
	withFinalizer := uidSet{}
	for _, p := range pods {
		if hasTrackingFinalizer(p) && !s.finalizerGone.has(p.UID) {
			withFinalizer[p.UID] = struct{}{}
		}
	}
	if countRemoved(&job.Status, withFinalizer) {
		needsFlush = true
	}
	uncounted := job.Status.UncountedTerminatedPods
	var toRelease []*corev1.Pod
	var newIdx []int
	full := false
	for _, p := range pods {
		if !hasTrackingFinalizer(p) || s.finalizerGone.has(p.UID) {
			continue
		}
		failed := podFailed(p, job)
		if !(job.DeletionTimestamp != nil || s.finishing != nil || p.Status.Phase == corev1.PodSucceeded || failed) {
			continue
		}
		if job.DeletionTimestamp == nil && s.finishing == nil && p.Status.Phase != corev1.PodSucceeded {
			// A failed pod whose index is retried stays until its
			// replacement carries its failure counts on.
			if d, ok := s.delayed[completionIndex(p)]; ok && d.UID == p.UID {
				continue
			}
		}
		toRelease = append(toRelease, p)
		ix := completionIndex(p)
		switch {
		case p.Status.Phase == corev1.PodSucceeded && !s.uncountedFailed.has(p.UID):
			if isIndexed {
				if ix != noIndex && ix < int(*job.Spec.Completions) && !s.prevSucceededIdx.has(ix) {
					newIdx = append(newIdx, ix)
					needsFlush = true
				}
			} else if !s.uncountedSucceeded.has(p.UID) {
				uncounted.Succeeded = append(uncounted.Succeeded, p.UID)
				needsFlush = true
			}
		case failed || (s.finishing != nil && s.finishing.Type != batchv1.JobSuccessCriteriaMet):
			// A Job that fails counts every pod that has not succeeded
			// as failed.
			if s.uncountedFailed.has(p.UID) || (isIndexed && (ix == noIndex || ix >= int(*job.Spec.Completions))) {
				break
			}
			if judgeFailure(job.Spec.PodFailurePolicy, p).counts {
				uncounted.Failed = append(uncounted.Failed, p.UID)
				needsFlush = true
			}
		}
		if len(newIdx)+len(uncounted.Succeeded)+len(uncounted.Failed) >= MaxUncountedPods {
			// The rest waits for the next sync, which the writes queue.
			full = true
			break
		}
	}
	if isIndexed {
		s.succeededIdx = s.succeededIdx.with(newIdx...)
		if str := s.succeededIdx.String(); str != job.Status.CompletedIndexes {
			job.Status.CompletedIndexes = str
			needsFlush = true
		}
		job.Status.Succeeded = int32(s.succeededIdx.total())
		var failedStr *string
		if perIndex(job) {
			str := s.failedIdx.String()
			failedStr = &str
		}
		if !equalPtr(failedStr, job.Status.FailedIndexes) {
			job.Status.FailedIndexes = failedStr
			needsFlush = true
		}
	}
	// The interim condition goes with the first write; the final one is
	// prepared for when every pod is counted.
	if s.finishing != nil && s.finishing.Type == batchv1.JobFailureTarget {
		job.Status.Conditions = append(job.Status.Conditions, *s.finishing)
		needsFlush = true
		s.finishing = newCondition(batchv1.JobFailed, s.finishing.Reason, s.finishing.Message, now)
	}
	if s.finishing != nil && s.finishing.Type == batchv1.JobSuccessCriteriaMet {
		if !isTrue(condition(job, batchv1.JobSuccessCriteriaMet)) {
			job.Status.Conditions = append(job.Status.Conditions, *s.finishing)
			needsFlush = true
		}
		s.finishing = newCondition(batchv1.JobComplete, s.finishing.Reason, s.finishing.Message, now)
	}

	if needsFlush {
		if err := jc.writeStatus(ctx, s); err != nil {
			return fmt.Errorf("adding uncounted pods to status: %w", err)
		}
		jc.backoffs.set(s.key, s.backoff)
		needsFlush = false
	}
	var releaseErr error
	if len(toRelease) > 0 {
		uids := make([]types.UID, len(toRelease))
		for i, p := range toRelease {
			uids[i] = p.UID
		}
		jc.finalizers.expect(s.key, uids)
		errs := make([]error, len(toRelease))
		var wg sync.WaitGroup
		for i, p := range toRelease {
			wg.Go(func() {
				err := jc.podControl.PatchPod(ctx, p.Namespace, p.Name, removeFinalizerPatch)
				if err != nil {
					jc.finalizers.observed(s.key, p.UID)
					if !apierrors.IsNotFound(err) {
						errs[i] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for i, p := range toRelease {
			if errs[i] == nil {
				delete(withFinalizer, p.UID)
			}
		}
		releaseErr = errors.Join(errs...)
	}
	if countRemoved(&s.job.Status, withFinalizer) {
		needsFlush = true
	}
	if releaseErr != nil {
		if needsFlush {
			if err := jc.writeStatus(ctx, s); err != nil {
				return errors.Join(releaseErr, fmt.Errorf("removing uncounted pods from status: %w", err))
			}
		}
		return releaseErr
	}
	done := !full && jc.finish(s, now)
	if done || needsFlush {
		if err := jc.writeStatus(ctx, s); err != nil {
			return fmt.Errorf("removing uncounted pods from status: %w", err)
		}
	}
	if done {
		jc.recordFinished(s.job, s.finishing)
	}
	return nil
}

// countRemoved moves the UIDs of uncountedTerminatedPods whose pods no
// longer carry the finalizer to the succeeded and failed counts, and
// reports whether it moved any.
func countRemoved(st *batchv1.JobStatus, withFinalizer uidSet) bool {
	u := st.UncountedTerminatedPods
	keep := func(uids []types.UID) []types.UID {
		var out []types.UID
		for _, id := range uids {
			if withFinalizer.has(id) {
				out = append(out, id)
			}
		}
		return out
	}
	changed := false
	if k := keep(u.Succeeded); len(k) != len(u.Succeeded) {
		st.Succeeded += int32(len(u.Succeeded) - len(k))
		u.Succeeded = k
		changed = true
	}
	if k := keep(u.Failed); len(k) != len(u.Failed) {
		st.Failed += int32(len(u.Failed) - len(k))
		u.Failed = k
		changed = true
	}
	return changed
}

// finish sets the Job's final condition (and completionTime) once no pod
// is left uncounted or terminating, and reports whether it did.
func (jc *Controller) finish(s *state, now time.Time) bool {
	c := s.finishing
	if c == nil {
		return false
	}
	job := s.job
	if u := job.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
		return false
	}
	if s.terminating > 0 {
		return false
	}
	setCondition(job, c.Type, c.Status, c.Reason, c.Message, now)
	if c.Type == batchv1.JobComplete {
		t := condition(job, batchv1.JobComplete).LastTransitionTime
		job.Status.CompletionTime = &t
	}
	return true
}

// recordFinished records the event of a Job that ended.
func (jc *Controller) recordFinished(job *batchv1.Job, c *batchv1.JobCondition) {
	if c.Type != batchv1.JobComplete {
		jc.event(job, corev1.EventTypeWarning, c.Reason, c.Message)
		return
	}
	if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
		jc.event(job, corev1.EventTypeWarning, "TooManySucceededPods", "Too many succeeded pods running after completion count reached")
	}
	jc.event(job, corev1.EventTypeNormal, "Completed", "Job completed")
}

// writeStatus writes s.job's status and carries on from what the server
// returned.
func (jc *Controller) writeStatus(ctx context.Context, s *state) error {
	base := s.job
	written, err := jc.client.UpdateStatus(ctx, base)
	if err != nil {
		return err
	}
	jc.writes.Replaced(s.key, base, written)
	// The sync goes on changing the Job: not the copy the writes hold.
	s.job = written.DeepCopy()
	if s.job.Status.UncountedTerminatedPods == nil {
		s.job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	return nil
}

func (jc *Controller) event(obj *batchv1.Job, typ, reason, msg string) {
	jc.recorder.Eventf(obj, typ, reason, "%s", msg)
}
