// Package cronjob is the CronJob controller of kube-controller-manager
// (its cronjob controller v2), on listwatch's controller package: at each
// time a CronJob's schedule names (in its time zone) it creates a Job from
// the CronJob's template, named "<cronjob>-<minutes since the epoch of the
// scheduled time>" and annotated with the scheduled time
// (batch.kubernetes.io/cronjob-scheduled-timestamp), unless the CronJob is
// suspended, the time is past startingDeadlineSeconds, or a Job of the
// CronJob still runs and its concurrencyPolicy is Forbid (Replace deletes
// the running Jobs first, Allow runs them side by side). It keeps
// status.active, lastScheduleTime and lastSuccessfulTime, deletes the
// oldest finished Jobs beyond successfulJobsHistoryLimit and
// failedJobsHistoryLimit, and records kube's events (SuccessfulCreate,
// SawCompletedJob, SuccessfulDelete, MissingJob, UnexpectedJob,
// JobAlreadyActive, MissSchedule, UnparseableSchedule, InvalidSchedule,
// UnknownTimeZone, UnsupportedSchedule, TooManyMissedTimes, FailedCreate,
// FailedDelete, FailedGet).
//
// Schedules are parsed by kube's own parser; between schedules a CronJob's
// key waits in the queue until the next one, so no CronJob is polled.
//
// Not done yet: kube's cronjob_job_creation_skew_duration_seconds metric.
package cronjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/defaults"
)

// DefaultWorkers is kube-controller-manager's --concurrent-cron-job-syncs.
const DefaultWorkers = 5

// controllerKind is the kind of the Jobs' controller references.
var controllerKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// Client is what the controller needs of an API client.
type Client interface {
	// GetCronJob reads the CronJob from the server, bypassing any cache.
	GetCronJob(ctx context.Context, namespace, name string) (*batchv1.CronJob, error)
	// UpdateStatus writes the CronJob's status subresource.
	UpdateStatus(ctx context.Context, cj *batchv1.CronJob) (*batchv1.CronJob, error)
	// GetJob reads the Job from the server.
	GetJob(ctx context.Context, namespace, name string) (*batchv1.Job, error)
	// CreateJob creates the Job in namespace.
	CreateJob(ctx context.Context, namespace string, j *batchv1.Job) (*batchv1.Job, error)
	// DeleteJob deletes the Job, its pods after it (background
	// propagation).
	DeleteJob(ctx context.Context, namespace, name string) error
}

// Options tune a Controller; the zero value is kube's.
type Options struct {
	// Recorder receives the events about CronJobs; Controller.Recorder
	// when nil, and none when both are.
	Recorder controller.EventRecorder
	// Now is the controller's clock; time.Now when nil.
	Now func() time.Time
	// Controller tunes the workers (DefaultWorkers when not positive),
	// retries, logs and metrics.
	Controller controller.Options
}

// Controller is the CronJob controller. Make it with New and run it once
// with Run.
type Controller struct {
	*controller.Controller[string]
	cronJobs cache.Informer[*batchv1.CronJob]
	jobs     cache.Informer[*batchv1.Job]
	client   Client
	recorder controller.EventRecorder
	now      func() time.Time
}

// New returns a CronJob controller over the shared CronJob and Job
// informers. It adds controller.ByControllerIndex to the Job informer.
func New(cronJobs cache.Informer[*batchv1.CronJob], jobs cache.Informer[*batchv1.Job], c Client, opts Options) (*Controller, error) {
	if cronJobs == nil || jobs == nil || c == nil {
		return nil, errors.New("cronjob: New needs the CronJob and Job informers and a client")
	}
	defaults.Positive(&opts.Controller.Workers, DefaultWorkers)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Recorder = controller.RecorderOr(opts.Recorder, opts.Controller)
	if err := controller.AddByControllerIndex(jobs.GetIndexer()); err != nil {
		return nil, fmt.Errorf("cronjob: %w", err)
	}
	cc := &Controller{cronJobs: cronJobs, jobs: jobs, client: c, recorder: opts.Recorder, now: opts.Now}
	var err error
	cc.Controller, err = controller.New("cronjob", cc.sync, opts.Controller,
		controller.Handle[string](cronJobs, cache.ResourceEventHandlerFuncs[*batchv1.CronJob]{
			AddFunc:    func(cj *batchv1.CronJob, _ bool) { cc.Queue().Add(key(cj)) },
			UpdateFunc: cc.updateCronJob,
			DeleteFunc: func(cj *batchv1.CronJob, _ bool) { cc.Queue().Add(key(cj)) },
		}),
		controller.Owns(jobs, controllerKind))
	if err != nil {
		return nil, fmt.Errorf("cronjob: %w", err)
	}
	return cc, nil
}

func key(cj *batchv1.CronJob) string { return cj.Namespace + "/" + cj.Name }

// updateCronJob syncs a CronJob at once, unless its schedule or time zone
// changed: then its key waits for the new schedule's next time (a sooner
// wait already queued keeps its time), as kube's controller does, so that
// a schedule edited does not start a Job for a time it missed.
func (cc *Controller) updateCronJob(old, cur *batchv1.CronJob) {
	if old.Spec.Schedule == cur.Spec.Schedule && deref(old.Spec.TimeZone) == deref(cur.Spec.TimeZone) && (old.Spec.TimeZone == nil) == (cur.Spec.TimeZone == nil) {
		cc.Queue().Add(key(cur))
		return
	}
	sched, err := parseSchedule(formatSchedule(cur, nil))
	if err != nil {
		cc.recorder.Eventf(cur, corev1.EventTypeWarning, "UnParseableCronJobSchedule", "unparseable schedule for cronjob: %s", cur.Spec.Schedule)
		return
	}
	cc.Queue().AddAfter(key(cur), nextScheduleWait(cur, cc.now(), sched))
}

// REST is the Client over listwatch's REST client.
type REST struct {
	cronJobs *client.Resource[*batchv1.CronJob]
	jobs     *client.Resource[*batchv1.Job]
}

var _ Client = (*REST)(nil)

// NewClient returns the controller's API access through c.
func NewClient(c *client.Client) *REST {
	return &REST{cronJobs: client.For[*batchv1.CronJob](c, ""), jobs: client.For[*batchv1.Job](c, "")}
}

// GetCronJob reads the CronJob from the server.
func (r *REST) GetCronJob(ctx context.Context, namespace, name string) (*batchv1.CronJob, error) {
	return r.cronJobs.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// UpdateStatus writes the CronJob's status subresource.
func (r *REST) UpdateStatus(ctx context.Context, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	return r.cronJobs.Namespace(cj.Namespace).UpdateStatus(ctx, cj, metav1.UpdateOptions{})
}

// GetJob reads the Job from the server.
func (r *REST) GetJob(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	return r.jobs.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreateJob creates the Job.
func (r *REST) CreateJob(ctx context.Context, namespace string, j *batchv1.Job) (*batchv1.Job, error) {
	return r.jobs.Namespace(namespace).Create(ctx, j, metav1.CreateOptions{})
}

// DeleteJob deletes the Job with background propagation.
func (r *REST) DeleteJob(ctx context.Context, namespace, name string) error {
	return r.jobs.Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)})
}
