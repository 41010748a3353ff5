package cronjob

import (
	"context"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	jobutil "k8s.io/kubernetes/pkg/controller/job/util"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
)

// sync brings one CronJob in line: its finished Jobs beyond the history
// limits deleted, its status matched to its Jobs, and a Job created if a
// schedule time is due; then its key waits for the next schedule time.
// All the changes to the status are written at once.
func (cc *Controller) sync(ctx context.Context, k string) (controller.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(k)
	if err != nil {
		return controller.Result{}, controller.Terminal(err)
	}
	cached, ok, err := cc.cronJobs.GetIndexer().GetByKey(k)
	if err != nil || !ok {
		return controller.Result{}, err
	}
	jobs, err := controller.Controlled(cc.jobs.GetIndexer(), ns, cached.UID)
	if err != nil {
		return controller.Result{}, err
	}
	cj := cached.DeepCopy()
	changed := cc.cleanupFinishedJobs(ctx, cj, jobs)
	wait, synced, syncErr := cc.syncCronJob(ctx, cj, jobs)
	changed = changed || synced
	if syncErr != nil {
		cc.Logger().Debug("reconciling cronjob", "cronjob", k, "err", syncErr)
	}
	if changed {
		if _, err := cc.client.UpdateStatus(ctx, cj); err != nil {
			return controller.Result{}, fmt.Errorf("updating the status of cronjob %s/%s: %w", ns, name, err)
		}
	}
	if wait != nil {
		// Whatever went wrong, the next schedule is when to look
		// again, as kube's controller does.
		return controller.Result{RequeueAfter: max(*wait, time.Nanosecond)}, nil
	}
	return controller.Result{}, syncErr
}

// syncCronJob reconciles cj (a copy, changed in place) with its Jobs and
// creates the Job of a schedule time that is due. It returns how long to
// wait for the next schedule time (nil: until the CronJob changes) and
// whether the status changed.
func (cc *Controller) syncCronJob(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) (*time.Duration, bool, error) {
	now := cc.now()
	changed := false
	children := make(map[types.UID]bool, len(jobs))
	for _, j := range jobs {
		children[j.UID] = true
		active := inActive(cj, j.UID)
		finished, condition := jobutil.FinishedCondition(j)
		switch {
		case !active && !finished:
			// A running Job the status does not list: the cache may be
			// behind the controller's own status write, so ask the
			// server before calling it unexpected.
			fresh, err := cc.client.GetCronJob(ctx, cj.Namespace, cj.Name)
			if err != nil {
				return nil, changed, err
			}
			if inActive(fresh, j.UID) {
				*cj = *fresh
				continue
			}
			cc.recorder.Eventf(cj, corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		case finished:
			if active {
				removeActive(cj, j.UID)
				cc.recorder.Eventf(cj, corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, condition)
				changed = true
			}
			if jobutil.IsJobSucceeded(j) {
				// A Job that succeeded counts whether listed or not.
				if cj.Status.LastSuccessfulTime == nil {
					cj.Status.LastSuccessfulTime = j.Status.CompletionTime
					changed = true
				}
				if t := j.Status.CompletionTime; t != nil && t.After(cj.Status.LastSuccessfulTime.Time) {
					cj.Status.LastSuccessfulTime = t
					changed = true
				}
			}
		}
	}
	// A Job the status lists but the cache lacks may have been deleted;
	// the server says whether it is gone.
	for _, ref := range slices.Clone(cj.Status.Active) {
		if children[ref.UID] {
			continue
		}
		_, err := cc.client.GetJob(ctx, ref.Namespace, ref.Name)
		switch {
		case apierrors.IsNotFound(err):
			cc.recorder.Eventf(cj, corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", ref.Name)
			removeActive(cj, ref.UID)
			changed = true
		case err != nil:
			return nil, changed, err
		}
	}
	if cj.DeletionTimestamp != nil {
		return nil, changed, nil
	}
	if cj.Spec.TimeZone != nil {
		if _, err := time.LoadLocation(*cj.Spec.TimeZone); err != nil {
			cc.recorder.Eventf(cj, corev1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *cj.Spec.TimeZone, err)
			return nil, changed, nil
		}
	}
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		return nil, changed, nil
	}
	sched, err := parseSchedule(formatSchedule(cj, func() {
		cc.recorder.Eventf(cj, corev1.EventTypeWarning, "UnsupportedSchedule", "CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", cj.Spec.Schedule)
	}))
	if err != nil {
		cc.recorder.Eventf(cj, corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return nil, changed, nil
	}
	_, scheduled, m, err := mostRecentSchedule(cj, now, sched, true)
	if scheduled != nil && m == missedMany {
		cc.recorder.Eventf(cj, corev1.EventTypeWarning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
	}
	if err != nil {
		cc.recorder.Eventf(cj, corev1.EventTypeWarning, "InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err)
		return nil, changed, nil
	}
	next := func() *time.Duration {
		d := nextScheduleWait(cj, now, sched)
		return &d
	}
	if scheduled == nil || scheduled.After(now) {
		return next(), changed, nil
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && scheduled.Add(time.Duration(*d)*time.Second).Before(now) {
		cc.recorder.Eventf(cj, corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		return next(), changed, nil
	}
	if inActiveByName(cj, cj.Namespace, jobName(cj, *scheduled)) || (cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(*scheduled)) {
		return next(), changed, nil
	}
	if cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent && len(cj.Status.Active) > 0 {
		cc.recorder.Eventf(cj, corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
		return next(), changed, nil
	}
	if cj.Spec.ConcurrencyPolicy == batchv1.ReplaceConcurrent {
		for _, ref := range slices.Clone(cj.Status.Active) {
			j, err := cc.client.GetJob(ctx, ref.Namespace, ref.Name)
			if err != nil {
				cc.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedGet", "Get job: %v", err)
				return nil, changed, err
			}
			if !cc.deleteJob(ctx, cj, j) {
				return nil, changed, fmt.Errorf("could not replace job %s/%s", j.Namespace, j.Name)
			}
			changed = true
		}
	}
	want, err := jobFor(cj, *scheduled)
	if err != nil {
		return nil, changed, err
	}
	created, err := cc.client.CreateJob(ctx, cj.Namespace, want)
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, changed, err
	case apierrors.IsAlreadyExists(err):
		// Made by an earlier sync whose status write failed, or by
		// someone else: only the controller's own Job is listed.
		existing, err := cc.client.GetJob(ctx, cj.Namespace, want.Name)
		if err != nil {
			return nil, changed, err
		}
		if !metav1.IsControlledBy(existing, cj) || inActive(cj, existing.UID) {
			return nil, changed, nil
		}
		created = existing
		cc.Logger().Info("job already exists", "cronjob", key(cj), "job", want.Name)
	case err != nil:
		cc.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return nil, changed, err
	default:
		cc.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", created.Name)
	}
	cj.Status.Active = append(cj.Status.Active, jobRef(created))
	cj.Status.LastScheduleTime = &metav1.Time{Time: *scheduled}
	return next(), true, nil
}

// cleanupFinishedJobs deletes the oldest finished Jobs beyond the
// CronJob's history limits, and reports whether its status changed.
func (cc *Controller) cleanupFinishedJobs(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) bool {
	if cj.Spec.SuccessfulJobsHistoryLimit == nil && cj.Spec.FailedJobsHistoryLimit == nil {
		return false
	}
	var succeeded, failed []*batchv1.Job
	for _, j := range jobs {
		switch _, c := jobutil.FinishedCondition(j); c {
		case batchv1.JobComplete:
			succeeded = append(succeeded, j)
		case batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	changed := false
	if l := cj.Spec.SuccessfulJobsHistoryLimit; l != nil && cc.removeOldest(ctx, cj, succeeded, *l) {
		changed = true
	}
	if l := cj.Spec.FailedJobsHistoryLimit; l != nil && cc.removeOldest(ctx, cj, failed, *l) {
		changed = true
	}
	return changed
}

// removeOldest deletes the Jobs that started first beyond keep.
func (cc *Controller) removeOldest(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job, keep int32) bool {
	n := len(jobs) - int(keep)
	if n <= 0 {
		return false
	}
	slices.SortFunc(jobs, byStartTime)
	changed := false
	for _, j := range jobs[:n] {
		if cc.deleteJob(ctx, cj, j) {
			changed = true
		}
	}
	return changed
}

// byStartTime orders Jobs by their start time, those not started last,
// then by name.
func byStartTime(a, b *batchv1.Job) int {
	as, bs := a.Status.StartTime, b.Status.StartTime
	switch {
	case as == nil && bs != nil:
		return 1
	case as != nil && bs == nil:
		return -1
	case as.Equal(bs):
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	case as.Before(bs):
		return -1
	}
	return 1
}

// deleteJob deletes j and drops it from the CronJob's active Jobs,
// reporting success.
func (cc *Controller) deleteJob(ctx context.Context, cj *batchv1.CronJob, j *batchv1.Job) bool {
	if err := cc.client.DeleteJob(ctx, j.Namespace, j.Name); err != nil {
		cc.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		cc.Logger().Error("deleting a cronjob's job", "cronjob", key(cj), "job", j.Name, "err", err)
		return false
	}
	removeActive(cj, j.UID)
	cc.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", j.Name)
	return true
}

func inActive(cj *batchv1.CronJob, uid types.UID) bool {
	return slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == uid })
}

func inActiveByName(cj *batchv1.CronJob, namespace, name string) bool {
	return slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.Name == name && r.Namespace == namespace })
}

// removeActive drops the Job with uid from status.active, which is then
// an empty list rather than nil, as kube leaves it.
func removeActive(cj *batchv1.CronJob, uid types.UID) {
	active := []corev1.ObjectReference{}
	for _, r := range cj.Status.Active {
		if r.UID != uid {
			active = append(active, r)
		}
	}
	cj.Status.Active = active
}

// jobRef is the reference status.active holds to a Job.
func jobRef(j *batchv1.Job) corev1.ObjectReference {
	return corev1.ObjectReference{
		Kind:            "Job",
		APIVersion:      batchv1.SchemeGroupVersion.String(),
		Namespace:       j.Namespace,
		Name:            j.Name,
		UID:             j.UID,
		ResourceVersion: j.ResourceVersion,
	}
}
