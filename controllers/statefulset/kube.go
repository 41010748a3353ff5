package statefulset

import (
	"bytes"
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubernetes/pkg/controller/history"
	kubests "k8s.io/kubernetes/pkg/controller/statefulset"

	"github.com/listwatch/listwatch/controller"
)

// syncObjects is what kube's control loop reads and writes through
// during one sync: reads from the controller's informers, writes through
// its client with the sync's context (which kube's interfaces do not
// carry), so that stale-read protection sees every write of the sync.
// It is kube's StatefulPodControlObjectManager (pods and claims),
// StatefulSetStatusUpdaterInterface and history.Interface (the
// ControllerRevisions). Kube's control loop calls it from several
// goroutines at once for a Parallel set; it holds no state of its own.
type syncObjects struct {
	ctx context.Context
	ssc *Controller
}

var (
	_ kubests.StatefulPodControlObjectManager   = (*syncObjects)(nil)
	_ kubests.StatefulSetStatusUpdaterInterface = (*syncObjects)(nil)
	_ history.Interface                         = (*syncObjects)(nil)
)

// CreatePod creates the pod.
func (o *syncObjects) CreatePod(ctx context.Context, pod *corev1.Pod, _ *appsv1.StatefulSet) error {
	_, err := o.ssc.client.CreatePod(ctx, pod.Namespace, pod, metav1.CreateOptions{})
	return err
}

// GetPod reads the pod from the cache; NotFound when it holds none.
func (o *syncObjects) GetPod(namespace, name string) (*corev1.Pod, error) {
	return o.ssc.pods.Namespace(namespace).Get(name)
}

// UpdatePod replaces the pod.
func (o *syncObjects) UpdatePod(pod *corev1.Pod, _ *appsv1.StatefulSet) error {
	_, err := o.ssc.client.UpdatePod(o.ctx, pod)
	return err
}

// DeletePod deletes the pod.
func (o *syncObjects) DeletePod(pod *corev1.Pod) error {
	return o.ssc.client.DeletePod(o.ctx, pod.Namespace, pod.Name, metav1.DeleteOptions{})
}

// CreateClaim creates the claim.
func (o *syncObjects) CreateClaim(claim *corev1.PersistentVolumeClaim, _ *appsv1.StatefulSet) error {
	_, err := o.ssc.client.CreateClaim(o.ctx, claim)
	return err
}

// GetClaim reads the claim from the cache; NotFound when it holds none.
func (o *syncObjects) GetClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return o.ssc.claims.Namespace(namespace).Get(name)
}

// UpdateClaim replaces the claim.
func (o *syncObjects) UpdateClaim(claim *corev1.PersistentVolumeClaim, _ *appsv1.StatefulSet) error {
	_, err := o.ssc.client.UpdateClaim(o.ctx, claim)
	return err
}

// UpdateStatefulSetStatus writes status as set's, retrying a conflict on
// the cache's copy of the set, as kube's status updater does.
func (o *syncObjects) UpdateStatefulSetStatus(ctx context.Context, set *appsv1.StatefulSet, status *appsv1.StatefulSetStatus) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		set.Status = *status
		_, err := o.ssc.client.UpdateStatefulSetStatus(ctx, set)
		if err == nil {
			return nil
		}
		if cur, ok, _ := o.ssc.inf.StatefulSets.GetIndexer().GetByKey(set.Namespace + "/" + set.Name); ok {
			set = cur.DeepCopy()
		}
		return err
	})
}

// ListControllerRevisions returns the revisions of parent's namespace
// that selector matches and that parent controls or nothing does.
func (o *syncObjects) ListControllerRevisions(parent metav1.Object, _ schema.GroupVersionKind, selector labels.Selector) ([]*appsv1.ControllerRevision, error) {
	return controller.OwnedOrOrphanRevisions(o.ssc.inf.ControllerRevisions.GetIndexer(), parent, selector)
}

// CreateControllerRevision creates revision, named after parent and the
// hash of its data and collisionCount; a name taken by a revision of other
// data counts a collision and tries the next name, as kube's history does.
func (o *syncObjects) CreateControllerRevision(parent metav1.Object, revision *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	if collisionCount == nil {
		return nil, fmt.Errorf("collisionCount should not be nil")
	}
	clone := revision.DeepCopy()
	clone.Namespace = parent.GetNamespace()
	for {
		hash := history.HashControllerRevision(revision, collisionCount)
		clone.Name = history.ControllerRevisionName(parent.GetName(), hash)
		created, err := o.ssc.client.CreateRevision(o.ctx, clone)
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
		exists, err := o.ssc.client.GetRevision(o.ctx, clone.Namespace, clone.Name)
		if err != nil {
			return nil, err
		}
		if bytes.Equal(exists.Data.Raw, clone.Data.Raw) {
			return exists, nil
		}
		*collisionCount++
	}
}

// DeleteControllerRevision deletes revision.
func (o *syncObjects) DeleteControllerRevision(revision *appsv1.ControllerRevision) error {
	return o.ssc.client.DeleteRevision(o.ctx, revision.Namespace, revision.Name)
}

// UpdateControllerRevision sets revision's number to newRevision,
// retrying a conflict on the cache's copy.
func (o *syncObjects) UpdateControllerRevision(revision *appsv1.ControllerRevision, newRevision int64) (*appsv1.ControllerRevision, error) {
	clone := revision.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if clone.Revision == newRevision {
			return nil
		}
		clone.Revision = newRevision
		updated, err := o.ssc.client.UpdateRevision(o.ctx, clone)
		if err == nil {
			clone = updated
			return nil
		}
		if cur, ok, _ := o.ssc.inf.ControllerRevisions.GetIndexer().GetByKey(clone.Namespace + "/" + clone.Name); ok {
			clone = cur.DeepCopy()
		}
		return err
	})
	return clone, err
}

// AdoptControllerRevision makes parent the controller of revision, which
// must have none.
func (o *syncObjects) AdoptControllerRevision(parent metav1.Object, parentKind schema.GroupVersionKind, revision *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	return controller.AdoptRevision(o.ctx, o.ssc.client, parent, parentKind, revision)
}

// ReleaseControllerRevision removes parent's owner reference from
// revision; a revision gone or no longer parent's is released already.
func (o *syncObjects) ReleaseControllerRevision(parent metav1.Object, revision *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	return controller.ReleaseRevision(o.ctx, o.ssc.client, parent, revision)
}
