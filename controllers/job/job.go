// Package job is the Job controller of kube-controller-manager, on
// listwatch's controller package: it runs a Job's pods until enough of
// them succeed (completions, parallelism, NonIndexed and Indexed), or
// until the Job fails (backoffLimit, backoffLimitPerIndex and
// maxFailedIndexes, podFailurePolicy, activeDeadlineSeconds), and
// reports it as kube's does: the batch.kubernetes.io/job-tracking
// finalizer on every pod until it is counted,
// status.uncountedTerminatedPods between the two, the counts (active,
// ready, terminating, succeeded, failed, completedIndexes,
// failedIndexes), the conditions (SuccessCriteriaMet then Complete,
// FailureTarget then Failed, Suspended) and the events
// (SuccessfulCreate, SuccessfulDelete, Completed, BackoffLimitExceeded,
// FailedIndexes, MaxFailedIndexesExceeded, DeadlineExceeded, Suspended,
// Resumed).
//
// Pods are named as kube names them: "<job>-<random>", and
// "<job>-<index>-<random>" for an Indexed Job, whose pods also carry
// their completion index as an annotation and a label, in the
// JOB_COMPLETION_INDEX variable, and as their hostname "<job>-<index>".
//
// Not done yet: the adoption of orphan pods that a Job's selector
// matches (pods made by another Job controller are released only when
// it is deleted), and the Workload and PodGroup objects of gang
// scheduling.
package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/defaults"
)

// Defaults, kube-controller-manager's.
const (
	// DefaultWorkers is --concurrent-job-syncs.
	DefaultWorkers = 5
	// DefaultPodFailureBackoff is the wait before the first pod that
	// replaces a failed one; it doubles with each failure after it.
	DefaultPodFailureBackoff = 10 * time.Second
	// MaxPodFailureBackoff caps that wait.
	MaxPodFailureBackoff = 10 * time.Minute
	// DefaultSyncBatchPeriod is kube's SyncJobBatchPeriod.
	DefaultSyncBatchPeriod = time.Second
	// MaxUncountedPods caps the pods one sync adds to
	// status.uncountedTerminatedPods, which keeps the status small and
	// one big Job from starving the others.
	MaxUncountedPods = 500
	// MaxPodCreateDeletePerSync caps the pods one sync creates or
	// deletes.
	MaxPodCreateDeletePerSync = 500
)

// controllerKind is the kind of the Jobs' controller references.
var controllerKind = batchv1.SchemeGroupVersion.WithKind("Job")

// Client is what the controller needs of an API client: its Jobs read
// afresh and their status written, and pods created, deleted and
// patched.
type Client interface {
	// Get reads the Job from the server, bypassing any cache.
	Get(ctx context.Context, namespace, name string) (*batchv1.Job, error)
	// UpdateStatus writes the Job's status subresource, with its
	// resourceVersion as precondition.
	UpdateStatus(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error)
	controller.PodClient
}

// Options tune a Controller; the zero value is kube's.
type Options struct {
	// Recorder receives the events about Jobs, pod creations and
	// deletions included; Controller.Recorder
	// when nil, and none when both are.
	Recorder controller.EventRecorder
	// PodFailureBackoff and MaxPodFailureBackoff time the wait before a
	// failed pod is replaced; DefaultPodFailureBackoff and
	// MaxPodFailureBackoff when not positive.
	PodFailureBackoff, MaxPodFailureBackoff time.Duration
	// SyncBatchPeriod is how long a Job's sync waits after a change of
	// one of its pods, or of its status alone, so that the changes of
	// that period make one sync and one status write, as kube's
	// controller batches them (its SyncJobBatchPeriod); a new Job or a
	// change of its spec syncs at once. DefaultSyncBatchPeriod when zero,
	// no wait when negative.
	SyncBatchPeriod time.Duration
	// Controller tunes the workers (DefaultWorkers when not positive),
	// retries, logs and metrics.
	Controller controller.Options
}

// podControl is the pod control the controller writes pods through:
// controller.RealPodControl's, with the generateName of Indexed Jobs.
type podControl interface {
	controller.PodControl
	CreatePodsWithGenerateName(ctx context.Context, namespace string, template *corev1.PodTemplateSpec, controllerObject runtime.Object, controllerRef *metav1.OwnerReference, generateName string) error
}

// Controller is the Job controller. Make it with New and run it once with
// Run.
type Controller struct {
	*controller.Controller[string]
	// orphans removes the tracking finalizer of pods whose Job is gone
	// or finished, by pod key.
	orphans *controller.Controller[string]

	jobs       cache.Informer[*batchv1.Job]
	pods       cache.Informer[*corev1.Pod]
	client     Client
	podControl podControl
	recorder   controller.EventRecorder
	opts       Options
	log        *slog.Logger

	// writes holds the status writes the informer has not shown yet.
	writes       controller.Writes[*batchv1.Job]
	expectations *controller.UIDTrackingControllerExpectations
	finalizers   finalizerExpectations
	backoffs     backoffs
}

// New returns a Job controller over the shared Job and pod informers. It
// adds controller.PodsByControllerIndex to the pod informer.
func New(jobs cache.Informer[*batchv1.Job], pods cache.Informer[*corev1.Pod], c Client, opts Options) (*Controller, error) {
	if jobs == nil || pods == nil || c == nil {
		return nil, errors.New("job: New needs the Job and pod informers and a client")
	}
	defaults.Positive(&opts.Controller.Workers, DefaultWorkers)
	defaults.Positive(&opts.PodFailureBackoff, DefaultPodFailureBackoff)
	defaults.Positive(&opts.MaxPodFailureBackoff, MaxPodFailureBackoff)
	switch {
	case opts.SyncBatchPeriod == 0:
		opts.SyncBatchPeriod = DefaultSyncBatchPeriod
	case opts.SyncBatchPeriod < 0:
		opts.SyncBatchPeriod = 0
	}
	if err := controller.AddPodsByControllerIndex(pods.GetIndexer()); err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	opts.Recorder = controller.RecorderOr(opts.Recorder, opts.Controller)
	jc := &Controller{
		jobs:         jobs,
		pods:         pods,
		client:       c,
		recorder:     opts.Recorder,
		opts:         opts,
		expectations: &controller.UIDTrackingControllerExpectations{},
	}
	jc.podControl = &controller.RealPodControl{Client: c, Recorder: opts.Recorder, Logger: opts.Controller.Logger}
	var err error
	jc.Controller, err = controller.New("job", jc.sync, opts.Controller,
		controller.Handle[string](jobs, cache.ResourceEventHandlerFuncs[*batchv1.Job]{
			AddFunc:    func(j *batchv1.Job, _ bool) { jc.Queue().Add(jobKey(j)) },
			UpdateFunc: jc.updateJob,
			DeleteFunc: jc.deleteJob,
		}),
		controller.Handle[string](pods, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc:    jc.addPod,
			UpdateFunc: jc.updatePod,
			DeleteFunc: jc.deletePod,
		}))
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	jc.log = jc.Logger()
	orphanOpts := opts.Controller
	orphanOpts.Workers = 1
	jc.orphans, err = controller.New("job-orphan-pod", jc.syncOrphan, orphanOpts,
		controller.WaitFor[string](pods.HasSynced, jobs.HasSynced))
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	return jc, nil
}

// Run runs the workers until ctx ends and returns once they have
// stopped.
func (jc *Controller) Run(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- jc.orphans.Run(ctx) }()
	err := jc.Controller.Run(ctx)
	return errors.Join(err, <-done)
}

func jobKey(j *batchv1.Job) string { return j.Namespace + "/" + j.Name }

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// jobOf returns the key of the Job that controls pod, if its controller
// reference names a Job the cache holds (with that UID).
func (jc *Controller) jobOf(pod *corev1.Pod) (string, *batchv1.Job, bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return "", nil, false
	}
	key := pod.Namespace + "/" + ref.Name
	j, ok, err := jc.jobs.GetIndexer().GetByKey(key)
	if err != nil || !ok || j.UID != ref.UID {
		return key, nil, false
	}
	return key, j, true
}

func (jc *Controller) addPod(pod *corev1.Pod, _ bool) {
	key, _, ok := jc.jobOf(pod)
	if !ok {
		jc.maybeOrphan(pod)
		return
	}
	if pod.DeletionTimestamp != nil {
		jc.expectations.DeletionObserved(key, podKey(pod))
	} else {
		jc.expectations.CreationObserved(key)
	}
	jc.enqueueBatched(key)
}

func (jc *Controller) updatePod(old, cur *corev1.Pod) {
	if oldRef, curRef := metav1.GetControllerOfNoCopy(old), metav1.GetControllerOfNoCopy(cur); oldRef != nil && (curRef == nil || curRef.UID != oldRef.UID) {
		if key, _, ok := jc.jobOf(old); ok {
			jc.enqueueBatched(key)
		}
	}
	key, _, ok := jc.jobOf(cur)
	if !ok {
		jc.maybeOrphan(cur)
		return
	}
	if cur.DeletionTimestamp != nil && old.DeletionTimestamp == nil {
		jc.expectations.DeletionObserved(key, podKey(cur))
	}
	if hasTrackingFinalizer(old) && !hasTrackingFinalizer(cur) {
		jc.finalizers.observed(key, cur.UID)
	}
	jc.enqueueBatched(key)
}

func (jc *Controller) deletePod(pod *corev1.Pod, _ bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != controllerKind.Kind {
		return
	}
	key := pod.Namespace + "/" + ref.Name
	jc.expectations.DeletionObserved(key, podKey(pod))
	jc.finalizers.observed(key, pod.UID)
	jc.enqueueBatched(key)
}

// updateJob syncs a Job whose spec changed at once, and one whose status
// alone changed (its own status writes among them) after the batch
// period, as kube's controller does.
func (jc *Controller) updateJob(old, cur *batchv1.Job) {
	if cur.Generation == old.Generation {
		jc.enqueueBatched(jobKey(cur))
		return
	}
	jc.Queue().Add(jobKey(cur))
}

// enqueueBatched queues key once the batch period has passed; a key
// already due sooner keeps its time.
func (jc *Controller) enqueueBatched(key string) {
	jc.Queue().AddAfter(key, jc.opts.SyncBatchPeriod)
}

// deleteJob queues the Job's key, so that its records are dropped, and
// its pods that still carry the tracking finalizer, so that it is
// removed and they can go.
func (jc *Controller) deleteJob(j *batchv1.Job, _ bool) {
	jc.Queue().Add(jobKey(j))
	pods, err := controller.ControlledPods(jc.pods.GetIndexer(), j.Namespace, j.UID)
	if err != nil {
		jc.log.Warn("listing the pods of a deleted Job", "job", jobKey(j), "err", err)
		return
	}
	for _, p := range pods {
		if hasTrackingFinalizer(p) {
			jc.orphans.Queue().Add(podKey(p))
		}
	}
}

// maybeOrphan queues a pod that carries the tracking finalizer but whose
// Job the cache does not hold.
func (jc *Controller) maybeOrphan(pod *corev1.Pod) {
	if hasTrackingFinalizer(pod) {
		jc.orphans.Queue().Add(podKey(pod))
	}
}

// syncOrphan removes the tracking finalizer of the pod at key unless a
// Job that is not finished controls it (that Job's sync removes it once
// it counts the pod).
func (jc *Controller) syncOrphan(ctx context.Context, key string) (controller.Result, error) {
	pod, ok, err := jc.pods.GetIndexer().GetByKey(key)
	if err != nil || !ok || !hasTrackingFinalizer(pod) {
		return controller.Result{}, err
	}
	if _, j, ok := jc.jobOf(pod); ok && !finished(j) {
		return controller.Result{}, nil
	}
	if err := jc.podControl.PatchPod(ctx, pod.Namespace, pod.Name, removeFinalizerPatch); err != nil && !isNotFound(err) {
		return controller.Result{}, fmt.Errorf("removing the tracking finalizer of orphan pod %s: %w", key, err)
	}
	return controller.Result{}, nil
}

// REST is the Client over listwatch's REST client.
type REST struct {
	jobs *client.Resource[*batchv1.Job]
	pods *client.Resource[*corev1.Pod]
}

var _ Client = (*REST)(nil)

// NewClient returns the controller's API access through c.
func NewClient(c *client.Client) *REST {
	return &REST{jobs: client.For[*batchv1.Job](c, ""), pods: client.For[*corev1.Pod](c, "")}
}

// Get reads the Job from the server.
func (r *REST) Get(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	return r.jobs.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// UpdateStatus writes the Job's status subresource.
func (r *REST) UpdateStatus(ctx context.Context, j *batchv1.Job) (*batchv1.Job, error) {
	return r.jobs.Namespace(j.Namespace).UpdateStatus(ctx, j, metav1.UpdateOptions{})
}

// CreatePod creates the pod in namespace.
func (r *REST) CreatePod(ctx context.Context, namespace string, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error) {
	return r.pods.Namespace(namespace).Create(ctx, pod, opts)
}

// DeletePod deletes the pod namespace/name.
func (r *REST) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return r.pods.Namespace(namespace).Delete(ctx, name, opts)
}

// PatchPod patches the pod namespace/name.
func (r *REST) PatchPod(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*corev1.Pod, error) {
	return r.pods.Namespace(namespace).Patch(ctx, name, pt, data, opts)
}
