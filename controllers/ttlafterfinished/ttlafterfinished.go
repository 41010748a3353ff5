// Package ttlafterfinished is the TTL-after-finished controller of
// kube-controller-manager, on listwatch's controller package: a Job with
// spec.ttlSecondsAfterFinished is deleted that many seconds after it
// finished (the lastTransitionTime of its Complete or Failed condition),
// as kube deletes it: after reading it afresh from the server to check
// that its TTL did expire, with foreground propagation (its pods go
// first) and its uid as precondition, so that a Job created anew under
// the same name is not deleted in its stead. Between the finish and the
// expiry the Job's key waits in the queue; no Job is polled.
//
// Not done yet: kube's job_deletion_duration_seconds metric.
package ttlafterfinished

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobutil "k8s.io/kubernetes/pkg/controller/job/util"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/defaults"
)

// DefaultWorkers is kube-controller-manager's
// --concurrent-ttl-after-finished-syncs.
const DefaultWorkers = 5

// Client is what the controller needs of an API client.
type Client interface {
	// GetJob reads the Job from the server, bypassing any cache.
	GetJob(ctx context.Context, namespace, name string) (*batchv1.Job, error)
	// DeleteJob deletes the Job with the given options.
	DeleteJob(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
}

// Options tune a Controller; the zero value is kube's.
type Options struct {
	// Now is the controller's clock; time.Now when nil.
	Now func() time.Time
	// Controller tunes the workers (DefaultWorkers when not positive),
	// retries, logs and metrics.
	Controller controller.Options
}

// Controller is the TTL-after-finished controller. Make it with New and
// run it once with Run.
type Controller struct {
	*controller.Controller[string]
	jobs   cache.Informer[*batchv1.Job]
	client Client
	now    func() time.Time
}

// New returns the controller over the shared Job informer.
func New(jobs cache.Informer[*batchv1.Job], c Client, opts Options) (*Controller, error) {
	if jobs == nil || c == nil {
		return nil, errors.New("ttlafterfinished: New needs the Job informer and a client")
	}
	defaults.Positive(&opts.Controller.Workers, DefaultWorkers)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	tc := &Controller{jobs: jobs, client: c, now: opts.Now}
	enqueue := func(j *batchv1.Job) {
		if j.DeletionTimestamp == nil && needsCleanup(j) {
			tc.Queue().Add(j.Namespace + "/" + j.Name)
		}
	}
	var err error
	tc.Controller, err = controller.New("ttl-after-finished", tc.sync, opts.Controller,
		controller.Handle[string](jobs, cache.ResourceEventHandlerFuncs[*batchv1.Job]{
			AddFunc:    func(j *batchv1.Job, _ bool) { enqueue(j) },
			UpdateFunc: func(_, j *batchv1.Job) { enqueue(j) },
		}))
	if err != nil {
		return nil, fmt.Errorf("ttlafterfinished: %w", err)
	}
	return tc, nil
}

// sync deletes the Job at key if its TTL has expired, or looks at it
// again when it will have.
func (tc *Controller) sync(ctx context.Context, key string) (controller.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return controller.Result{}, controller.Terminal(err)
	}
	cached, ok, err := tc.jobs.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return controller.Result{}, err
	}
	if left, err := tc.timeLeft(cached); err != nil || left == nil || *left > 0 {
		return requeue(left), err
	}
	// The cache says the TTL expired, but the TTL may have been changed
	// since: the server's copy decides.
	fresh, err := tc.client.GetJob(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if left, err := tc.timeLeft(fresh); err != nil || left == nil || *left > 0 {
		return requeue(left), err
	}
	err = tc.client.DeleteJob(ctx, ns, name, metav1.DeleteOptions{
		PropagationPolicy: new(metav1.DeletePropagationForeground),
		Preconditions:     &metav1.Preconditions{UID: &fresh.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return controller.Result{}, fmt.Errorf("deleting job %s after its TTL: %w", key, err)
	}
	return controller.Result{}, nil
}

func requeue(left *time.Duration) controller.Result {
	if left == nil || *left <= 0 {
		return controller.Result{}
	}
	return controller.Result{RequeueAfter: *left}
}

// timeLeft is how long until j's TTL expires (zero or less: it has), nil
// when j is not to be cleaned up (being deleted, not finished, no TTL).
func (tc *Controller) timeLeft(j *batchv1.Job) (*time.Duration, error) {
	if j.DeletionTimestamp != nil || !needsCleanup(j) {
		return nil, nil
	}
	finishedAt, err := finishTime(j)
	if err != nil {
		return nil, err
	}
	now := tc.now()
	if finishedAt.After(now) {
		tc.Logger().Info("job finished in the future, likely a clock skew in the cluster; its cleanup is deferred", "job", j.Namespace+"/"+j.Name)
	}
	left := finishedAt.Add(time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second).Sub(now)
	return &left, nil
}

// needsCleanup reports whether j has finished and has a TTL.
func needsCleanup(j *batchv1.Job) bool {
	return j.Spec.TTLSecondsAfterFinished != nil && jobutil.IsJobFinished(j)
}

// finishTime is when the finished Job j finished: its Complete or Failed
// condition's last transition.
func finishTime(j *batchv1.Job) (time.Time, error) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			if c.LastTransitionTime.IsZero() {
				return time.Time{}, fmt.Errorf("unable to find the time when the Job %s/%s finished", j.Namespace, j.Name)
			}
			return c.LastTransitionTime.Time, nil
		}
	}
	return time.Time{}, fmt.Errorf("unable to find the status of the finished Job %s/%s", j.Namespace, j.Name)
}

// REST is the Client over listwatch's REST client.
type REST struct {
	jobs *client.Resource[*batchv1.Job]
}

var _ Client = (*REST)(nil)

// NewClient returns the controller's API access through c.
func NewClient(c *client.Client) *REST { return &REST{jobs: client.For[*batchv1.Job](c, "")} }

// GetJob reads the Job from the server.
func (r *REST) GetJob(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	return r.jobs.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// DeleteJob deletes the Job.
func (r *REST) DeleteJob(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return r.jobs.Namespace(namespace).Delete(ctx, name, opts)
}
