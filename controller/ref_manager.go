package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PodControllerRefManager decides which pods a controller owns: it adopts
// orphans its selector matches and releases owned pods it no longer
// matches, through controller owner references.
type PodControllerRefManager struct {
	// Control patches the pods.
	Control PodControl
	// Controller is the owner, as last read from the cache.
	Controller metav1.Object
	// Selector picks the controller's pods.
	Selector labels.Selector
	// Filter, when set, is a further test a pod must pass to be the
	// controller's, as its selector must match (a StatefulSet's pods must
	// also be named after it): a pod that fails it is neither kept nor
	// adopted, and released if owned.
	Filter func(*corev1.Pod) bool
	// Kind is the owner's group, version and kind.
	Kind schema.GroupVersionKind
	// Recheck, when set, reads the owner afresh (from the API server rather
	// than the cache) before the first adoption, so that an owner deleted
	// meanwhile adopts nothing.
	Recheck func(ctx context.Context) (metav1.Object, error)

	once       sync.Once
	recheckErr error
}

// Classify splits pods in three: owned (controlled by the owner and
// matching the selector and Filter), orphans (without a controller,
// matching, and adoptable: not being deleted, in the owner's namespace)
// and release (controlled by the owner but no longer matching). Pods controlled by
// another owner are in none.
func (m *PodControllerRefManager) Classify(pods []*corev1.Pod) (owned, orphans, release []*corev1.Pod) {
	uid := m.Controller.GetUID()
	for _, pod := range pods {
		matches := m.Selector != nil && m.Selector.Matches(labels.Set(pod.Labels)) && (m.Filter == nil || m.Filter(pod))
		ref := metav1.GetControllerOfNoCopy(pod)
		switch {
		case ref != nil && ref.UID == uid:
			if matches {
				owned = append(owned, pod)
			} else {
				release = append(release, pod)
			}
		case ref != nil:
			// Another controller's pod: never touched.
		case matches && pod.DeletionTimestamp == nil && pod.Namespace == m.Controller.GetNamespace():
			orphans = append(orphans, pod)
		}
	}
	return owned, orphans, release
}

// ClaimPods returns the pods the owner should manage: those it owns that
// match, plus matching orphans it adopts. Owned pods that no longer match
// are released. An owner being deleted neither adopts nor releases.
// Pods that vanish meanwhile (NotFound) are skipped; other failures are
// returned joined, along with the pods claimed so far.
func (m *PodControllerRefManager) ClaimPods(ctx context.Context, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	owned, orphans, release := m.Classify(pods)
	var errs []error
	deleting := m.Controller.GetDeletionTimestamp() != nil
	if !deleting {
		for _, pod := range orphans {
			if err := m.AdoptPod(ctx, pod); err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, err)
				}
				continue
			}
			owned = append(owned, pod)
		}
		for _, pod := range release {
			if err := m.ReleasePod(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	return owned, errors.Join(errs...)
}

// ErrOwnerBeingDeleted is returned when adoption is refused because the
// owner is being deleted or was replaced.
var ErrOwnerBeingDeleted = errors.New("owner is being deleted")

// canAdopt checks, once per manager, that the owner still exists with the
// same UID and is not being deleted.
func (m *PodControllerRefManager) canAdopt(ctx context.Context) error {
	m.once.Do(func() {
		owner := m.Controller
		if m.Recheck != nil {
			fresh, err := m.Recheck(ctx)
			if err != nil {
				m.recheckErr = fmt.Errorf("rechecking %s %s/%s before adoption: %w", m.Kind.Kind, owner.GetNamespace(), owner.GetName(), err)
				return
			}
			if fresh.GetUID() != owner.GetUID() {
				m.recheckErr = fmt.Errorf("%w: %s %s/%s was replaced (uid %s, was %s)", ErrOwnerBeingDeleted,
					m.Kind.Kind, owner.GetNamespace(), owner.GetName(), fresh.GetUID(), owner.GetUID())
				return
			}
			owner = fresh
		}
		if owner.GetDeletionTimestamp() != nil {
			m.recheckErr = fmt.Errorf("%w: %s %s/%s", ErrOwnerBeingDeleted, m.Kind.Kind, owner.GetNamespace(), owner.GetName())
		}
	})
	return m.recheckErr
}

// AdoptPod makes the owner the pod's controller.
func (m *PodControllerRefManager) AdoptPod(ctx context.Context, pod *corev1.Pod) error {
	if err := m.canAdopt(ctx); err != nil {
		return fmt.Errorf("adopting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	data, err := AdoptPatch(pod.UID, *m.ownerRef())
	if err != nil {
		return fmt.Errorf("adopting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return m.Control.PatchPod(ctx, pod.Namespace, pod.Name, data)
}

// ReleasePod removes the owner's reference from the pod.
func (m *PodControllerRefManager) ReleasePod(ctx context.Context, pod *corev1.Pod) error {
	data, err := ReleasePatch(pod.UID, m.Controller.GetUID())
	if err != nil {
		return fmt.Errorf("releasing pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	err = m.Control.PatchPod(ctx, pod.Namespace, pod.Name, data)
	// A pod already gone, or changed under us (422 on the UID
	// precondition), is released as far as this owner is concerned.
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}

func (m *PodControllerRefManager) ownerRef() *metav1.OwnerReference {
	return NewControllerRef(m.Controller, m.Kind)
}

// NewControllerRef returns a controller owner reference to owner of kind
// gvk, with blockOwnerDeletion set.
func NewControllerRef(owner metav1.Object, gvk schema.GroupVersionKind) *metav1.OwnerReference {
	return &metav1.OwnerReference{
		APIVersion:         gvk.GroupVersion().String(),
		Kind:               gvk.Kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         new(true),
		BlockOwnerDeletion: new(true),
	}
}
