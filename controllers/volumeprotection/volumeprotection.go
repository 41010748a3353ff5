// Package volumeprotection holds kube-controller-manager's pvc-protection
// and pv-protection controllers, on listwatch's controller package.
//
// The API server puts the kubernetes.io/pvc-protection finalizer on every
// PersistentVolumeClaim and kubernetes.io/pv-protection on every
// PersistentVolume it creates (StorageObjectInUseProtection admission), so
// that a volume in use is not deleted under the pods that use it. The
// controllers take the finalizer off once the object is being deleted and
// nothing uses it any more — a claim once no pod scheduled to a node
// names it (the cache is asked first and, when it shows none, the server,
// since a pod the cache has not seen yet may use it), a volume once it is
// no longer Bound — and put it back on an object that lost it while not
// being deleted. The claim controller also keeps a Bound claim's Unused
// condition (kube 1.37's PersistentVolumeClaimUnusedSinceTime, on by
// default): True with reason NoPodsUsingPVC when no pod that has not
// terminated names it, False with reason PodUsingPVC when one does.
package volumeprotection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/kubernetes/pkg/controller/util/protectionutil"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/defaults"
)

// The finalizers, as the API server's admission sets them.
const (
	PVCFinalizer = "kubernetes.io/pvc-protection"
	PVFinalizer  = "kubernetes.io/pv-protection"
)

// DefaultWorkers is the workers of each controller, as kube runs them.
const DefaultWorkers = 1

// Client is what the controllers need of an API client.
type Client interface {
	UpdateClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error
	UpdateClaimStatus(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error
	// ListPods reads the pods of a namespace from the server, bypassing
	// any cache.
	ListPods(ctx context.Context, namespace string) ([]*corev1.Pod, error)
	UpdateVolume(ctx context.Context, pv *corev1.PersistentVolume) error
}

// Options tune the controllers; the zero value is kube's.
type Options struct {
	// Now is the clock of the Unused condition's transitions; time.Now
	// when nil.
	Now func() time.Time
	// Controller tunes the workers (DefaultWorkers when not positive),
	// retries, logs and metrics.
	Controller controller.Options
}

// Claims is the pvc-protection controller. Make it with NewClaims and
// run it once with Run.
type Claims struct {
	*controller.Controller[string]
	claims cache.Informer[*corev1.PersistentVolumeClaim]
	pods   cache.Informer[*corev1.Pod]
	client Client
	now    func() time.Time
}

// NewClaims returns the pvc-protection controller over the shared claim
// and pod informers.
func NewClaims(claims cache.Informer[*corev1.PersistentVolumeClaim], pods cache.Informer[*corev1.Pod], c Client, opts Options) (*Claims, error) {
	if claims == nil || pods == nil || c == nil {
		return nil, errors.New("volumeprotection: NewClaims needs the claim and pod informers and a client")
	}
	defaults.Positive(&opts.Controller.Workers, DefaultWorkers)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	pc := &Claims{claims: claims, pods: pods, client: c, now: opts.Now}
	onClaim := func(pvc *corev1.PersistentVolumeClaim) {
		if unusedCondition(pvc) == nil || protectionutil.NeedToAddFinalizer(pvc, PVCFinalizer) || protectionutil.IsDeletionCandidate(pvc, PVCFinalizer) {
			pc.Queue().Add(pvc.Namespace + "/" + pvc.Name)
		}
	}
	// With the Unused condition kept, any change of a pod may change a
	// claim's; kube enqueues every claim a pod names.
	onPod := func(p *corev1.Pod) {
		for i := range p.Spec.Volumes {
			if name := claimName(p, &p.Spec.Volumes[i]); name != "" {
				pc.Queue().Add(p.Namespace + "/" + name)
			}
		}
	}
	var err error
	pc.Controller, err = controller.New("pvcprotection", pc.sync, opts.Controller,
		controller.Handle[string](claims, cache.ResourceEventHandlerFuncs[*corev1.PersistentVolumeClaim]{
			AddFunc:    func(pvc *corev1.PersistentVolumeClaim, _ bool) { onClaim(pvc) },
			UpdateFunc: func(_, pvc *corev1.PersistentVolumeClaim) { onClaim(pvc) },
		}),
		controller.Handle[string](pods, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc: func(p *corev1.Pod, _ bool) { onPod(p) },
			UpdateFunc: func(old, p *corev1.Pod) {
				onPod(p)
				if old.UID != p.UID {
					onPod(old)
				}
			},
			DeleteFunc: func(p *corev1.Pod, _ bool) { onPod(p) },
		}))
	if err != nil {
		return nil, fmt.Errorf("volumeprotection: %w", err)
	}
	return pc, nil
}

// claimName is the claim a pod's volume names: its persistentVolumeClaim,
// or the claim made for its ephemeral volume; "" for other volumes.
func claimName(p *corev1.Pod, v *corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return ephemeral.VolumeClaimName(p, v)
	}
	return ""
}

// sync brings the claim at key's finalizer and Unused condition in line
// with the pods that use it.
func (pc *Claims) sync(ctx context.Context, key string) (controller.Result, error) {
	pvc, ok, err := pc.claims.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return controller.Result{}, err
	}
	// The server's list of the namespace's pods, read once a sync at
	// most, when the cache shows no pod using the claim.
	var live []*corev1.Pod
	listed := false
	used := func(uses func(*corev1.Pod, *corev1.PersistentVolumeClaim) bool) (bool, error) {
		pods, err := pc.pods.GetIndexer().ByIndex(cache.NamespaceIndex, pvc.Namespace)
		if err != nil {
			return false, err
		}
		if slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return uses(p, pvc) }) {
			return true, nil
		}
		if !listed {
			if live, err = pc.client.ListPods(ctx, pvc.Namespace); err != nil {
				return false, fmt.Errorf("live list of pods failed: %w", err)
			}
			listed = true
		}
		return slices.ContainsFunc(live, func(p *corev1.Pod) bool { return uses(p, pvc) }), nil
	}
	if pvc.DeletionTimestamp == nil && pvc.Status.Phase == corev1.ClaimBound {
		inUse, err := used(referencesClaim)
		if err != nil {
			return controller.Result{}, err
		}
		if err := pc.setUnused(ctx, pvc, !inUse); err != nil {
			return controller.Result{}, err
		}
	}
	if protectionutil.IsDeletionCandidate(pvc, PVCFinalizer) {
		inUse, err := used(blocksDeletion)
		if err != nil {
			return controller.Result{}, err
		}
		if !inUse {
			next := pvc.DeepCopy()
			next.Finalizers = slices.DeleteFunc(next.Finalizers, func(f string) bool { return f == PVCFinalizer })
			return controller.Result{}, ignoreGone(pc.client.UpdateClaim(ctx, next))
		}
	}
	if protectionutil.NeedToAddFinalizer(pvc, PVCFinalizer) {
		next := pvc.DeepCopy()
		next.Finalizers = append(next.Finalizers, PVCFinalizer)
		return controller.Result{}, ignoreGone(pc.client.UpdateClaim(ctx, next))
	}
	return controller.Result{}, nil
}

// blocksDeletion reports whether pod keeps pvc from being deleted: it is
// scheduled to a node and names the claim (an ephemeral volume's claim
// only while the pod is not shut down, and only the claim made for it).
func blocksDeletion(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	shutDown := pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
			return true
		}
		if !shutDown && v.Ephemeral != nil && ephemeral.VolumeClaimName(pod, v) == pvc.Name && ephemeral.VolumeIsForPod(pod, pvc) == nil {
			return true
		}
	}
	return false
}

// referencesClaim reports whether a pod that has not terminated names
// pvc, for the Unused condition.
func referencesClaim(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool {
	if terminated(pod) {
		return false
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name ||
			v.Ephemeral != nil && ephemeral.VolumeClaimName(pod, v) == pvc.Name && ephemeral.VolumeIsForPod(pod, pvc) == nil {
			return true
		}
	}
	return false
}

// terminated is kube's test of a pod whose volumes are no longer in use:
// Succeeded or Failed, or being deleted with no container running.
func terminated(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return true
	}
	notRunning := func(cs []corev1.ContainerStatus) bool {
		return !slices.ContainsFunc(cs, func(s corev1.ContainerStatus) bool { return s.State.Terminated == nil && s.State.Waiting == nil })
	}
	st := &pod.Status
	return pod.DeletionTimestamp != nil && notRunning(st.InitContainerStatuses) && notRunning(st.ContainerStatuses) && notRunning(st.EphemeralContainerStatuses)
}

func unusedCondition(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaimCondition {
	for i := range pvc.Status.Conditions {
		if pvc.Status.Conditions[i].Type == corev1.PersistentVolumeClaimUnused {
			return &pvc.Status.Conditions[i]
		}
	}
	return nil
}

// setUnused writes the claim's Unused condition when it is missing or
// says otherwise.
func (pc *Claims) setUnused(ctx context.Context, pvc *corev1.PersistentVolumeClaim, unused bool) error {
	cond := corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimUnused, Status: corev1.ConditionFalse,
		Reason: "PodUsingPVC", Message: "A pod is currently referencing this PVC",
		LastTransitionTime: metav1.NewTime(pc.now()),
	}
	if unused {
		cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, "NoPodsUsingPVC", "No pods are currently referencing this PVC"
	}
	if c := unusedCondition(pvc); c != nil && (c.Status == corev1.ConditionTrue) == unused {
		return nil
	}
	next := pvc.DeepCopy()
	if c := unusedCondition(next); c != nil {
		*c = cond
	} else {
		next.Status.Conditions = append(next.Status.Conditions, cond)
	}
	return ignoreGone(pc.client.UpdateClaimStatus(ctx, next))
}

// Volumes is the pv-protection controller. Make it with NewVolumes and
// run it once with Run.
type Volumes struct {
	*controller.Controller[string]
	volumes cache.Informer[*corev1.PersistentVolume]
	client  Client
}

// NewVolumes returns the pv-protection controller over the shared
// volume informer.
func NewVolumes(volumes cache.Informer[*corev1.PersistentVolume], c Client, opts Options) (*Volumes, error) {
	if volumes == nil || c == nil {
		return nil, errors.New("volumeprotection: NewVolumes needs the volume informer and a client")
	}
	defaults.Positive(&opts.Controller.Workers, DefaultWorkers)
	vc := &Volumes{volumes: volumes, client: c}
	onVolume := func(pv *corev1.PersistentVolume) {
		if protectionutil.NeedToAddFinalizer(pv, PVFinalizer) || protectionutil.IsDeletionCandidate(pv, PVFinalizer) {
			vc.Queue().Add(pv.Name)
		}
	}
	var err error
	vc.Controller, err = controller.New("pvprotection", vc.sync, opts.Controller,
		controller.Handle[string](volumes, cache.ResourceEventHandlerFuncs[*corev1.PersistentVolume]{
			AddFunc:    func(pv *corev1.PersistentVolume, _ bool) { onVolume(pv) },
			UpdateFunc: func(_, pv *corev1.PersistentVolume) { onVolume(pv) },
		}))
	if err != nil {
		return nil, fmt.Errorf("volumeprotection: %w", err)
	}
	return vc, nil
}

// sync takes the finalizer off the volume named key once it is being
// deleted and not Bound, and puts it back on one not being deleted.
func (vc *Volumes) sync(ctx context.Context, key string) (controller.Result, error) {
	pv, ok, err := vc.volumes.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return controller.Result{}, err
	}
	if protectionutil.IsDeletionCandidate(pv, PVFinalizer) && pv.Status.Phase != corev1.VolumeBound {
		next := pv.DeepCopy()
		next.Finalizers = slices.DeleteFunc(next.Finalizers, func(f string) bool { return f == PVFinalizer })
		return controller.Result{}, ignoreGone(vc.client.UpdateVolume(ctx, next))
	}
	if protectionutil.NeedToAddFinalizer(pv, PVFinalizer) {
		next := pv.DeepCopy()
		next.Finalizers = append(next.Finalizers, PVFinalizer)
		return controller.Result{}, ignoreGone(vc.client.UpdateVolume(ctx, next))
	}
	return controller.Result{}, nil
}

// ignoreGone drops the error of a write to an object deleted meanwhile:
// there is nothing left to protect.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// REST is the Client over listwatch's REST client.
type REST struct {
	claims  *client.Resource[*corev1.PersistentVolumeClaim]
	pods    *client.Resource[*corev1.Pod]
	volumes *client.Resource[*corev1.PersistentVolume]
}

var _ Client = (*REST)(nil)

// NewClient returns the controllers' API access through c.
func NewClient(c *client.Client) *REST {
	return &REST{
		claims:  client.For[*corev1.PersistentVolumeClaim](c, ""),
		pods:    client.For[*corev1.Pod](c, ""),
		volumes: client.For[*corev1.PersistentVolume](c, ""),
	}
}

// UpdateClaim replaces the claim, with its resourceVersion as
// precondition.
func (r *REST) UpdateClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	_, err := r.claims.Namespace(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{})
	return err
}

// UpdateClaimStatus replaces the claim's status.
func (r *REST) UpdateClaimStatus(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	_, err := r.claims.Namespace(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	return err
}

// ListPods lists the namespace's pods from the server.
func (r *REST) ListPods(ctx context.Context, namespace string) ([]*corev1.Pod, error) {
	l, err := r.pods.Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// UpdateVolume replaces the volume, with its resourceVersion as
// precondition.
func (r *REST) UpdateVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	_, err := r.volumes.Update(ctx, pv, metav1.UpdateOptions{})
	return err
}
