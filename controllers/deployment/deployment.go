// Package deployment is the Deployment controller of
// kube-controller-manager, written on listwatch's controller package.
//
// A Deployment runs its pods through ReplicaSets, one per version of its
// pod template, each named after the Deployment and the template's
// pod-template-hash (the same hash kube computes, so a Deployment moved
// between kube and listwatch finds its ReplicaSets). The controller
// behaves as kube's:
//
//   - RollingUpdate scales the new ReplicaSet up within maxSurge and the
//     old ones down within maxUnavailable (counts or percentages of
//     spec.replicas, surge rounded up, unavailability down, and one pod
//     unavailable when both come to zero); Recreate scales the old ones to
//     zero, waits for their pods to be gone, then scales the new one up.
//   - Availability (minReadySeconds) is the ReplicaSets' own: the
//     controller copies minReadySeconds onto the new ReplicaSet and sums
//     the ReplicaSets' available replicas.
//   - Revisions: the new ReplicaSet gets the highest revision plus one,
//     which the Deployment's revision annotation repeats; a ReplicaSet made
//     current again (kubectl rollout undo puts its template back) moves to
//     the top, keeping its old revisions in revision-history; old
//     ReplicaSets beyond revisionHistoryLimit that run nothing are deleted.
//   - A paused Deployment is scaled but does not roll; a change of
//     spec.replicas during a rollout is spread over the ReplicaSets in
//     proportion to their size.
//   - Conditions Available and Progressing, the latter with
//     progressDeadlineSeconds (ProgressDeadlineExceeded when no progress
//     was seen for that long), and status replicas, updatedReplicas,
//     readyReplicas, availableReplicas, unavailableReplicas,
//     terminatingReplicas, observedGeneration and collisionCount.
//
// The ReplicaSets' pods are made by the ReplicaSet controller.
//
// Where kube's controller updates a ReplicaSet with the resourceVersion
// of its cached copy to scale it, this one sends a JSON patch that tests
// the ReplicaSet's uid and generation: the ReplicaSet controller's status
// writes, which come with every pod that starts or stops, then do not
// refuse the scale (with updates, two scales in three of a rollout of
// 1,000 met such a conflict, each retried after a backoff), while a
// change of the ReplicaSet's spec still does. A write refused because the cache was behind asks for no
// retry: the informer's event for the newer object brings the next sync.
// Writes the informers have not shown yet are built on (controller.Writes).
package deployment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
)

// Kind is the group, version and kind of Deployments, as named in the
// controller references of their ReplicaSets.
var Kind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// Client is the controller's access to the API server. Errors must be
// recognisable by k8s.io/apimachinery/pkg/api/errors.
type Client interface {
	// GetDeployment reads a Deployment from the server, not a cache: the
	// check before adopting ReplicaSets that it is not being deleted.
	GetDeployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error)
	// UpdateDeployment writes d (the deprecated rollback annotation).
	UpdateDeployment(ctx context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error)
	// UpdateDeploymentStatus writes d's status subresource (which also
	// takes its annotations, as kube's does), with d's resourceVersion as
	// precondition.
	UpdateDeploymentStatus(ctx context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error)
	// CreateReplicaSet creates rs in its namespace.
	CreateReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error)
	// UpdateReplicaSet writes rs, with its resourceVersion as
	// precondition.
	UpdateReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error)
	// ScaleReplicaSet sets rs's spec.replicas and the given annotations
	// unless rs was replaced or its spec changed since (its
	// metadata.generation moved), which fails with a conflict. Unlike an
	// update with rs's resourceVersion, a change of status alone, which
	// the ReplicaSet controller writes as its pods come and go, does not
	// refuse it.
	ScaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, replicas int32, annotations map[string]string) (*appsv1.ReplicaSet, error)
	// PatchReplicaSet applies a strategic merge patch to a ReplicaSet (to
	// adopt or release it) and returns it as patched.
	PatchReplicaSet(ctx context.Context, namespace, name string, patch []byte) (*appsv1.ReplicaSet, error)
	// DeleteReplicaSet deletes a ReplicaSet.
	DeleteReplicaSet(ctx context.Context, namespace, name string) error
}

// NewClient returns the Client that talks to an API server through c.
func NewClient(c *client.Client) Client {
	return restClient{
		deployments: client.For[*appsv1.Deployment](c, ""),
		replicaSets: client.For[*appsv1.ReplicaSet](c, ""),
	}
}

type restClient struct {
	deployments *client.Resource[*appsv1.Deployment]
	replicaSets *client.Resource[*appsv1.ReplicaSet]
}

func (r restClient) GetDeployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error) {
	return r.deployments.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (r restClient) UpdateDeployment(ctx context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	return r.deployments.Namespace(d.Namespace).Update(ctx, d, metav1.UpdateOptions{})
}

func (r restClient) UpdateDeploymentStatus(ctx context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	return r.deployments.Namespace(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
}

func (r restClient) CreateReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	return r.replicaSets.Namespace(rs.Namespace).Create(ctx, rs, metav1.CreateOptions{})
}

func (r restClient) UpdateReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	return r.replicaSets.Namespace(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{})
}

// scaleOp is one operation of a JSON patch (RFC 6902).
type scaleOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

func (r restClient) ScaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, replicas int32, annotations map[string]string) (*appsv1.ReplicaSet, error) {
	ops := []scaleOp{
		{Op: "test", Path: "/metadata/uid", Value: rs.UID},
		{Op: "test", Path: "/metadata/generation", Value: rs.Generation},
		{Op: "replace", Path: "/spec/replicas", Value: replicas},
	}
	if rs.Annotations == nil {
		ops = append(ops, scaleOp{Op: "add", Path: "/metadata/annotations", Value: annotations})
	} else {
		for k, v := range annotations {
			ops = append(ops, scaleOp{Op: "add", Path: "/metadata/annotations/" + jsonPointerEscaper.Replace(k), Value: v})
		}
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	out, err := r.replicaSets.Namespace(rs.Namespace).Patch(ctx, rs.Name, types.JSONPatchType, data, metav1.PatchOptions{})
	if testFailed(err) {
		// The ReplicaSet is not the one rs shows.
		return nil, apierrors.NewConflict(appsv1.Resource("replicasets"), rs.Name, err)
	}
	return out, err
}

// jsonPointerEscaper escapes "~" and "/" in a JSON pointer's reference
// token (RFC 6901).
var jsonPointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// testFailed tells a JSON patch refused because a "test" operation
// failed from other refusals: kube-apiserver answers both 422 Invalid,
// but a patch that does not apply with no field causes, where validation
// names the fields.
func testFailed(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || len(d.Causes) == 0
}

func (r restClient) PatchReplicaSet(ctx context.Context, namespace, name string, patch []byte) (*appsv1.ReplicaSet, error) {
	return r.replicaSets.Namespace(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
}

func (r restClient) DeleteReplicaSet(ctx context.Context, namespace, name string) error {
	return r.replicaSets.Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// errStale marks a write the server refused because the cache it was
// decided on is behind: the informer's event for the newer object brings
// another sync, so such a failure asks for no retry (and no backoff) of
// its own.
var errStale = errors.New("the cache is behind the server")

// EventRecorder records events about Deployments; record.Recorder is one.
type EventRecorder interface {
	Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any)
}

// DefaultWorkers is the number of workers when Options.Controller.Workers
// is not positive, as kube-controller-manager's --concurrent-deployment-syncs.
const DefaultWorkers = 5

// Options tune the controller. The zero value works.
type Options struct {
	// Recorder, when set, receives the controller's events
	// (ScalingReplicaSet and the warnings).
	Recorder EventRecorder
	// Controller tunes the workers (DefaultWorkers when not positive),
	// retries, logs and metrics.
	Controller controller.Options
}

// Controller is the Deployment controller. Make it with New and run it
// once with Run.
type Controller struct {
	*controller.Controller[string]
	deployments cache.Lister[*appsv1.Deployment]
	replicaSets cache.Lister[*appsv1.ReplicaSet]
	pods        cache.Lister[*corev1.Pod]
	client      Client
	recorder    EventRecorder
	// dWrites and rsWrites hold the controller's writes of Deployments
	// and ReplicaSets that the informers have not shown yet.
	dWrites  controller.Writes[*appsv1.Deployment]
	rsWrites controller.Writes[*appsv1.ReplicaSet]
}

// New returns the controller of the Deployments of deployments, over the
// ReplicaSets of replicaSets and the pods of pods (read only to see the
// pods of a Recreate rollout gone). None of the informers may be filtered
// by labels. A Deployment is synced when it changes, when a ReplicaSet it
// controls (or an orphan its selector matches) changes, and, for
// Recreate, when one of its pods is deleted.
func New(deployments cache.Informer[*appsv1.Deployment], replicaSets cache.Informer[*appsv1.ReplicaSet],
	pods cache.Informer[*corev1.Pod], api Client, opts Options) (*Controller, error) {
	if deployments == nil || replicaSets == nil || pods == nil || api == nil {
		return nil, errors.New("deployment: New needs three informers and a client")
	}
	if opts.Controller.Workers <= 0 {
		opts.Controller.Workers = DefaultWorkers
	}
	c := &Controller{
		deployments: cache.NewLister(deployments.GetIndexer(), appsv1.Resource("deployments")),
		replicaSets: cache.NewLister(replicaSets.GetIndexer(), appsv1.Resource("replicasets")),
		pods:        cache.NewLister(pods.GetIndexer(), corev1.Resource("pods")),
		client:      api,
		recorder:    opts.Recorder,
	}
	var err error
	c.Controller, err = controller.New("deployment", c.sync, opts.Controller,
		controller.For(deployments),
		controller.Watches(replicaSets, c.keysForReplicaSet),
		controller.Handle[string](pods, cache.ResourceEventHandlerFuncs[*corev1.Pod]{DeleteFunc: c.deletePod}),
		// A deleted ReplicaSet's last write is of no more use.
		controller.Handle[string](replicaSets, cache.ResourceEventHandlerFuncs[*appsv1.ReplicaSet]{DeleteFunc: func(rs *appsv1.ReplicaSet, _ bool) {
			c.rsWrites.Forget(rs.Namespace + "/" + rs.Name)
		}}))
	if err != nil {
		return nil, fmt.Errorf("deployment: %w", err)
	}
	return c, nil
}

// keysForReplicaSet maps a ReplicaSet to the Deployments to sync: its
// controller when it has one, else every Deployment of its namespace
// whose selector matches it (one of them may adopt it).
func (c *Controller) keysForReplicaSet(rs *appsv1.ReplicaSet) []string {
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		if !isDeploymentRef(ref) {
			return nil
		}
		return []string{rs.Namespace + "/" + ref.Name}
	}
	if len(rs.Labels) == 0 {
		return nil
	}
	ds, err := c.deployments.Namespace(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var keys []string
	for _, d := range ds {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		// A Deployment with no selector matches nothing, not everything.
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(rs.Labels)) {
			continue
		}
		keys = append(keys, d.Namespace+"/"+d.Name)
	}
	return keys
}

func isDeploymentRef(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == Kind.Group && ref.Kind == Kind.Kind
}

// deletePod syncs the Deployment of a deleted pod's ReplicaSet when it
// rolls by Recreate, which waits for the old pods to be gone.
func (c *Controller) deletePod(pod *corev1.Pod, _ bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := c.replicaSets.Namespace(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	dref := metav1.GetControllerOfNoCopy(rs)
	if dref == nil || !isDeploymentRef(dref) {
		return
	}
	d, err := c.deployments.Namespace(rs.Namespace).Get(dref.Name)
	if err != nil || d.UID != dref.UID {
		return
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.Queue().Add(d.Namespace + "/" + d.Name)
	}
}

func (c *Controller) event(d *appsv1.Deployment, eventType, reason, format string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(d, eventType, reason, format, args...)
	}
}

// sync brings the Deployment of key in line: its ReplicaSets claimed,
// then, in kube's order, status only for one being deleted, paused and
// scaling events (scale, no rollout), the deprecated rollback
// annotation, and the rollout of its strategy.
func (c *Controller) sync(ctx context.Context, key string) (controller.Result, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return controller.Result{}, controller.Terminal(err)
	}
	cached, err := c.deployments.Namespace(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.dWrites.Forget(key)
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	base := c.dWrites.Latest(key, cached)
	r := &run{c: c, ctx: ctx, d: base.DeepCopy(), requeueAfter: -1}
	err = r.syncDeployment()
	if r.wroteD != nil {
		c.dWrites.Replaced(key, base, r.wroteD)
	}
	if errors.Is(err, errStale) {
		c.Logger().Debug("waiting for the cache", "deployment", key, "err", err)
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	res := controller.Result{}
	if r.requeueAfter >= 0 {
		res.RequeueAfter = max(r.requeueAfter, time.Millisecond)
	}
	return res, nil
}
