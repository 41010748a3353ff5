// Package statefulset is the StatefulSet controller of
// kube-controller-manager, on listwatch's controller package: it keeps a
// StatefulSet's pods, named "<set>-<ordinal>", one for each ordinal of
// spec.replicas (from spec.ordinals.start), each with its
// PersistentVolumeClaims made from spec.volumeClaimTemplates
// ("<template>-<set>-<ordinal>"); it creates and deletes them in order
// (OrderedReady: one at a time, each waiting for the one before it to be
// Running, Ready and Available) or all at once (Parallel), rolls them to a
// new revision of the template (RollingUpdate, from the highest ordinal
// down to spec.updateStrategy.rollingUpdate.partition, maxUnavailable at
// a time; OnDelete: only as they are deleted), records each revision of
// the template as a ControllerRevision ("<set>-<hash>") keeping
// revisionHistoryLimit of the old ones, gives the claims the owner
// references their persistentVolumeClaimRetentionPolicy asks for, and
// writes the status (replicas, readyReplicas, currentReplicas,
// updatedReplicas, availableReplicas, currentRevision, updateRevision,
// observedGeneration, collisionCount).
//
// Every decision is kube's own code: a sync hands the StatefulSet and its
// pods to k8s.io/kubernetes/pkg/controller/statefulset's control loop
// (UpdateStatefulSet), whose reads come from this controller's informers
// and whose writes go through listwatch's client, so the pods' names,
// labels (controller-revision-hash, statefulset.kubernetes.io/pod-name,
// apps.kubernetes.io/pod-index), the revisions' names and hashes, and the
// events (SuccessfulCreate, SuccessfulDelete, SuccessfulUpdate,
// FailedCreate, ... with kube's messages) are kube's. What is this
// package's is how the work is fed and paced: the informers' events mapped
// to StatefulSet keys, adoption and release of pods and
// ControllerRevisions, and stale-read protection over every write.
package statefulset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	// Kube's control loop defaults a StatefulSet rebuilt from an old
	// revision through legacyscheme, to compare it with the current one:
	// apps' defaulting must be registered there, as in
	// kube-controller-manager.
	_ "k8s.io/kubernetes/pkg/apis/apps/install"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/defaults"
)

// DefaultWorkers is kube-controller-manager's --concurrent-statefulset-syncs.
const DefaultWorkers = 5

// controllerKind is the kind of the pods' and revisions' controller
// references.
var controllerKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

// Client is what the controller needs of an API client.
type Client interface {
	// GetStatefulSet reads the StatefulSet from the server, bypassing any
	// cache: the check before an adoption.
	GetStatefulSet(ctx context.Context, namespace, name string) (*appsv1.StatefulSet, error)
	// UpdateStatefulSetStatus writes the StatefulSet's status
	// subresource.
	UpdateStatefulSetStatus(ctx context.Context, set *appsv1.StatefulSet) (*appsv1.StatefulSet, error)
	controller.PodClient
	// UpdatePod replaces the pod.
	UpdatePod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error)
	// CreateClaim and UpdateClaim write PersistentVolumeClaims.
	CreateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error)
	UpdateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error)
	controller.RevisionClient
}

// Options tune a Controller; the zero value is kube's.
type Options struct {
	// Recorder receives the events about StatefulSets; Controller.Recorder
	// when nil, and none when both are.
	Recorder controller.EventRecorder
	// Controller tunes the workers (DefaultWorkers when not positive),
	// retries, logs and metrics.
	Controller controller.Options
}

// Informers are the shared informers the controller reads.
type Informers struct {
	StatefulSets        cache.Informer[*appsv1.StatefulSet]
	Pods                cache.Informer[*corev1.Pod]
	Claims              cache.Informer[*corev1.PersistentVolumeClaim]
	ControllerRevisions cache.Informer[*appsv1.ControllerRevision]
}

// Controller is the StatefulSet controller. Make it with New and run it
// once with Run.
type Controller struct {
	*controller.Controller[string]
	inf      Informers
	pods     cache.Lister[*corev1.Pod]
	claims   cache.Lister[*corev1.PersistentVolumeClaim]
	client   Client
	recorder controller.EventRecorder
	log      *slog.Logger
}

// New returns a StatefulSet controller over the shared informers. It adds
// controller.ByControllerIndex and controller.OrphansIndex to the pod and
// ControllerRevision informers.
func New(inf Informers, c Client, opts Options) (*Controller, error) {
	if inf.StatefulSets == nil || inf.Pods == nil || inf.Claims == nil || inf.ControllerRevisions == nil || c == nil {
		return nil, errors.New("statefulset: New needs the StatefulSet, pod, PersistentVolumeClaim and ControllerRevision informers and a client")
	}
	defaults.Positive(&opts.Controller.Workers, DefaultWorkers)
	opts.Recorder = controller.RecorderOr(opts.Recorder, opts.Controller)
	for _, add := range []func() error{
		func() error { return controller.AddByControllerIndex(inf.Pods.GetIndexer()) },
		func() error { return controller.AddOrphansIndex(inf.Pods.GetIndexer()) },
		func() error { return controller.AddByControllerIndex(inf.ControllerRevisions.GetIndexer()) },
		func() error { return controller.AddOrphansIndex(inf.ControllerRevisions.GetIndexer()) },
	} {
		if err := add(); err != nil {
			return nil, fmt.Errorf("statefulset: %w", err)
		}
	}
	ssc := &Controller{
		inf: inf, client: c, recorder: opts.Recorder,
		pods:   cache.NewLister(inf.Pods.GetIndexer(), corev1.Resource("pods")),
		claims: cache.NewLister(inf.Claims.GetIndexer(), corev1.Resource("persistentvolumeclaims")),
	}
	var err error
	ssc.Controller, err = controller.New("statefulset", ssc.sync, opts.Controller,
		controller.For(inf.StatefulSets),
		controller.Handle[string](inf.Pods, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc:    ssc.addPod,
			UpdateFunc: ssc.updatePod,
			DeleteFunc: ssc.deletePod,
		}),
		// Claims and revisions queue nothing, as in kube: a sync reads
		// them, and waits for them to show its own writes.
		controller.Handle[string](inf.Claims, cache.ResourceEventHandlerFuncs[*corev1.PersistentVolumeClaim]{}),
		controller.Handle[string](inf.ControllerRevisions, cache.ResourceEventHandlerFuncs[*appsv1.ControllerRevision]{}))
	if err != nil {
		return nil, fmt.Errorf("statefulset: %w", err)
	}
	ssc.log = ssc.Logger()
	return ssc, nil
}

func setKey(set *appsv1.StatefulSet) string { return set.Namespace + "/" + set.Name }

// addPod queues the set that controls pod or, for an orphan, every set
// whose selector matches it, which may adopt it.
func (ssc *Controller) addPod(pod *corev1.Pod, _ bool) {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		if set := ssc.resolve(pod.Namespace, ref); set != nil {
			ssc.Queue().Add(setKey(set))
		}
		return
	}
	for _, set := range ssc.setsFor(pod) {
		ssc.Queue().Add(setKey(set))
	}
}

// updatePod queues the sets of the pod's old and new controllers; an
// orphan whose labels changed, the sets that may now adopt it. A pod that
// became ready queues its set again after minReadySeconds, when it
// becomes available.
func (ssc *Controller) updatePod(old, cur *corev1.Pod) {
	if old.ResourceVersion == cur.ResourceVersion {
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if set := ssc.resolve(old.Namespace, oldRef); set != nil {
			ssc.Queue().Add(setKey(set))
		}
	}
	if curRef != nil {
		set := ssc.resolve(cur.Namespace, curRef)
		if set == nil {
			return
		}
		ssc.Queue().Add(setKey(set))
		if set.Spec.MinReadySeconds > 0 && !podutil.IsPodReady(old) && podutil.IsPodReady(cur) {
			ssc.Queue().AddAfter(setKey(set), time.Duration(set.Spec.MinReadySeconds)*time.Second)
		}
		return
	}
	if refChanged || !reflect.DeepEqual(old.Labels, cur.Labels) {
		for _, set := range ssc.setsFor(cur) {
			ssc.Queue().Add(setKey(set))
		}
	}
}

// deletePod queues the set that controlled pod.
func (ssc *Controller) deletePod(pod *corev1.Pod, _ bool) {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		if set := ssc.resolve(pod.Namespace, ref); set != nil {
			ssc.Queue().Add(setKey(set))
		}
	}
}

// resolve returns the cached StatefulSet a controller reference names,
// or nil if it names another kind or a set the cache does not hold (with
// that UID).
func (ssc *Controller) resolve(namespace string, ref *metav1.OwnerReference) *appsv1.StatefulSet {
	if ref.Kind != controllerKind.Kind {
		return nil
	}
	set, ok, err := ssc.inf.StatefulSets.GetIndexer().GetByKey(namespace + "/" + ref.Name)
	if err != nil || !ok || set.UID != ref.UID {
		return nil
	}
	return set
}

// setsFor returns the StatefulSets of pod's namespace whose selector
// matches its labels.
func (ssc *Controller) setsFor(pod *corev1.Pod) []*appsv1.StatefulSet {
	sets, err := ssc.inf.StatefulSets.GetIndexer().ByIndex(cache.NamespaceIndex, pod.Namespace)
	if err != nil {
		return nil
	}
	var out []*appsv1.StatefulSet
	for _, set := range sets {
		sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, set)
	}
	if len(out) > 1 {
		ssc.log.Warn("more than one StatefulSet selects the pod", "pod", pod.Namespace+"/"+pod.Name, "labels", pod.Labels)
	}
	return out
}

// REST is the Client over listwatch's REST client.
type REST struct {
	sets   *client.Resource[*appsv1.StatefulSet]
	pods   *client.Resource[*corev1.Pod]
	claims *client.Resource[*corev1.PersistentVolumeClaim]
	*controller.RevisionREST
}

var _ Client = (*REST)(nil)

// NewClient returns the controller's API access through c.
func NewClient(c *client.Client) *REST {
	return &REST{
		sets:         client.For[*appsv1.StatefulSet](c, ""),
		pods:         client.For[*corev1.Pod](c, ""),
		claims:       client.For[*corev1.PersistentVolumeClaim](c, ""),
		RevisionREST: controller.NewRevisionREST(c),
	}
}

// GetStatefulSet reads the StatefulSet from the server.
func (r *REST) GetStatefulSet(ctx context.Context, namespace, name string) (*appsv1.StatefulSet, error) {
	return r.sets.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// UpdateStatefulSetStatus writes the StatefulSet's status subresource.
func (r *REST) UpdateStatefulSetStatus(ctx context.Context, set *appsv1.StatefulSet) (*appsv1.StatefulSet, error) {
	return r.sets.Namespace(set.Namespace).UpdateStatus(ctx, set, metav1.UpdateOptions{})
}

// CreatePod creates the pod in namespace.
func (r *REST) CreatePod(ctx context.Context, namespace string, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error) {
	return r.pods.Namespace(namespace).Create(ctx, pod, opts)
}

// UpdatePod replaces the pod.
func (r *REST) UpdatePod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	return r.pods.Namespace(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{})
}

// DeletePod deletes the pod namespace/name.
func (r *REST) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return r.pods.Namespace(namespace).Delete(ctx, name, opts)
}

// PatchPod patches the pod namespace/name.
func (r *REST) PatchPod(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*corev1.Pod, error) {
	return r.pods.Namespace(namespace).Patch(ctx, name, pt, data, opts)
}

// CreateClaim creates the PersistentVolumeClaim.
func (r *REST) CreateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	return r.claims.Namespace(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
}

// UpdateClaim replaces the PersistentVolumeClaim.
func (r *REST) UpdateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	return r.claims.Namespace(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
}
