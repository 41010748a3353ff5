package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
)

// maxConflictRetries bounds how often a metadata patch is retried at once
// on a conflict before the item goes back to the queue with backoff.
const maxConflictRetries = 5

// attemptToDelete looks at node uid: a virtual owner is checked for
// existence; an owner in foreground deletion waits for its blocking
// dependents and then loses its finalizer; any other object is deleted
// when none of its owners is left, or loses its references to absent
// owners when some are.
func (gc *GarbageCollector) attemptToDelete(ctx context.Context, uid types.UID) error {
	v, ok := gc.graph.view(uid)
	if !ok {
		return nil
	}
	if v.virtual {
		return gc.verifyVirtual(ctx, v.id)
	}
	latest, err := gc.get(ctx, v.id)
	if err != nil || latest == nil {
		// Gone or replaced: the informer will tell.
		return err
	}
	if latest.GetDeletionTimestamp() != nil {
		if !slices.Contains(latest.GetFinalizers(), finalizerForeground) {
			// Someone else's deletion; the orphan one is attemptToOrphan's.
			return nil
		}
		return gc.finishForeground(ctx, v)
	}
	refs := latest.GetOwnerReferences()
	if len(refs) == 0 {
		return nil
	}
	var solid, dangling, waiting []types.UID
	blockedWaiting := false
	for _, ref := range refs {
		st, err := gc.ownerState(ctx, ref, latest.GetNamespace())
		if err != nil {
			return err
		}
		switch st {
		case ownerAbsent:
			dangling = append(dangling, ref.UID)
		case ownerDeletingDependents:
			waiting = append(waiting, ref.UID)
			blockedWaiting = blockedWaiting || (ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion)
		default:
			solid = append(solid, ref.UID)
		}
	}
	switch {
	case len(solid) > 0:
		// It stays; references to owners that are gone or going go.
		if drop := append(dangling, waiting...); len(drop) > 0 {
			gc.log.Info("removing references to absent owners", "object", v.id, "owners", drop)
			return gc.removeOwnerRefs(ctx, v.id, drop)
		}
		return nil
	case len(waiting) > 0 && len(v.dependents) > 0:
		// It goes in the foreground too, so that its owner waits for the
		// whole subtree. When one of its dependents is itself waiting for
		// its dependents there may be a cycle of blocking references, in
		// which no side could finish: its own references stop blocking
		// first.
		if blockedWaiting && slices.ContainsFunc(v.dependents, func(d dependentView) bool { return d.deletingDependents }) {
			if err := gc.unblockOwnerRefs(ctx, v.id, waiting); err != nil {
				return err
			}
		}
		return gc.delete(ctx, v.id, metav1.DeletePropagationForeground)
	}
	policy := metav1.DeletePropagationBackground
	switch fin := latest.GetFinalizers(); {
	case slices.Contains(fin, finalizerOrphan):
		policy = metav1.DeletePropagationOrphan
	case slices.Contains(fin, finalizerForeground):
		policy = metav1.DeletePropagationForeground
	}
	return gc.delete(ctx, v.id, policy)
}

// verifyVirtual asks the server whether the owner that only references
// have shown exists; if not, its dependents are told.
func (gc *GarbageCollector) verifyVirtual(ctx context.Context, id objectID) error {
	if id.res == nil {
		// Unknown kind: there is no asking, and no acting on it.
		return nil
	}
	obj, err := gc.get(ctx, id)
	if err != nil {
		return err
	}
	if obj == nil {
		gc.graph.removeVirtual(id.uid)
		return nil
	}
	// It exists: its informer should show it, and the node is then
	// observed. But an owner created and deleted while its informer was
	// (re)starting its watch never shows, and its virtual node would stay
	// for good, holding its dependents: it is looked at again, with
	// backoff, until it is observed or gone, as Kubernetes' collector
	// requeues an unobserved node (kubernetes/kubernetes#56121).
	if d, virtual := gc.graph.recheck(id.uid); virtual {
		return notObserved{after: d}
	}
	return nil
}

// notObserved asks for another look at a virtual node after a delay.
type notObserved struct{ after time.Duration }

func (e notObserved) Error() string { return fmt.Sprintf("not observed yet; again in %v", e.after) }

// finishForeground removes the foregroundDeletion finalizer of owner v
// once no dependent blocks it, and otherwise sends the blocking dependents
// to be deleted.
func (gc *GarbageCollector) finishForeground(ctx context.Context, v nodeView) error {
	blocked := false
	for _, d := range v.dependents {
		if !d.blocking {
			continue
		}
		blocked = true
		if !d.deletingDependents {
			gc.toDelete.Queue().Add(d.id.uid)
		}
	}
	if blocked {
		// Each blocking dependent's removal re-queues the owner.
		return nil
	}
	gc.log.Info("dependents deleted; removing the foregroundDeletion finalizer", "object", v.id)
	return gc.removeFinalizer(ctx, v.id, finalizerForeground)
}

// attemptToOrphan strips every dependent's reference to owner uid, then
// removes the owner's orphan finalizer, letting its deletion finish.
func (gc *GarbageCollector) attemptToOrphan(ctx context.Context, uid types.UID) error {
	v, ok := gc.graph.view(uid)
	if !ok || v.virtual {
		return nil
	}
	var errs []error
	for _, d := range v.dependents {
		if err := gc.removeOwnerRefs(ctx, d.id, []types.UID{uid}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	gc.log.Info("dependents orphaned; removing the orphan finalizer", "object", v.id, "dependents", len(v.dependents))
	return gc.removeFinalizer(ctx, v.id, finalizerOrphan)
}

// ownerState classifies the owner ref of a dependent in depNamespace.
// Absence is confirmed with a live read: a 404, or an object of another
// UID under the name, means the owner is gone.
func (gc *GarbageCollector) ownerState(ctx context.Context, ref metav1.OwnerReference, depNamespace string) (ownerState, error) {
	id, ok := gc.locate(ref, depNamespace)
	if !ok {
		return ownerPresent, nil
	}
	if st := gc.graph.owner(ref.UID); st != ownerUnknown {
		return st, nil
	}
	obj, err := gc.get(ctx, id)
	switch {
	case err != nil:
		return ownerUnknown, err
	case obj == nil:
		gc.graph.markAbsent(ref.UID)
		return ownerAbsent, nil
	case obj.GetDeletionTimestamp() != nil && slices.Contains(obj.GetFinalizers(), finalizerForeground):
		return ownerDeletingDependents, nil
	}
	return ownerPresent, nil
}

// get reads the live object id names; nil without an error when there is
// none, or it is another object of the same name.
func (gc *GarbageCollector) get(ctx context.Context, id objectID) (cache.Object, error) {
	obj, err := gc.client.Get(ctx, id.res.GVR, id.namespace, id.name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("garbagecollector: reading %s: %w", id, err)
	case obj == nil || obj.GetUID() != id.uid:
		return nil, nil
	}
	return obj, nil
}

// delete deletes object id, and only that incarnation of it, with policy.
func (gc *GarbageCollector) delete(ctx context.Context, id objectID, policy metav1.DeletionPropagation) error {
	uid := id.uid
	gc.log.Info("deleting", "object", id, "propagation", policy)
	err := gc.client.Delete(ctx, id.res.GVR, id.namespace, id.name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid},
		PropagationPolicy: &policy,
	})
	// NotFound: gone already. Conflict: the UID precondition failed, so
	// the object is gone and another has its name.
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("garbagecollector: deleting %s: %w", id, err)
}

// removeOwnerRefs drops object id's references to the owners uids.
func (gc *GarbageCollector) removeOwnerRefs(ctx context.Context, id objectID, uids []types.UID) error {
	return gc.patchMeta(ctx, id, func(obj metav1.Object) (string, any, bool) {
		refs := obj.GetOwnerReferences()
		kept := slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool { return slices.Contains(uids, r.UID) })
		return "ownerReferences", kept, len(kept) != len(refs)
	})
}

// unblockOwnerRefs clears blockOwnerDeletion in object id's references to
// the owners uids.
func (gc *GarbageCollector) unblockOwnerRefs(ctx context.Context, id objectID, uids []types.UID) error {
	return gc.patchMeta(ctx, id, func(obj metav1.Object) (string, any, bool) {
		refs := slices.Clone(obj.GetOwnerReferences())
		changed := false
		for i, r := range refs {
			if slices.Contains(uids, r.UID) && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
				refs[i].BlockOwnerDeletion = new(bool)
				changed = true
			}
		}
		return "ownerReferences", refs, changed
	})
}

// removeFinalizer drops finalizer name from object id.
func (gc *GarbageCollector) removeFinalizer(ctx context.Context, id objectID, name string) error {
	return gc.patchMeta(ctx, id, func(obj metav1.Object) (string, any, bool) {
		fin := obj.GetFinalizers()
		kept := slices.DeleteFunc(slices.Clone(fin), func(f string) bool { return f == name })
		return "finalizers", kept, len(kept) != len(fin)
	})
}

// patchMeta sets one list field of object id's metadata to what edit makes
// of the live object, with a JSON merge patch that carries the object's uid
// and resourceVersion, so that it applies only to the state edit saw. On a
// conflict it reads and tries again. A missing object is not an error.
func (gc *GarbageCollector) patchMeta(ctx context.Context, id objectID, edit func(metav1.Object) (field string, value any, changed bool)) error {
	for attempt := 0; ; attempt++ {
		obj, err := gc.get(ctx, id)
		if err != nil || obj == nil {
			return err
		}
		field, value, changed := edit(obj)
		if !changed {
			return nil
		}
		if emptyList(value) {
			// null removes the field in a merge patch.
			value = nil
		}
		data, err := json.Marshal(map[string]any{"metadata": map[string]any{
			field:             value,
			"uid":             id.uid,
			"resourceVersion": obj.GetResourceVersion(),
		}})
		if err != nil {
			return fmt.Errorf("garbagecollector: encoding patch of %s: %w", id, err)
		}
		err = gc.client.Patch(ctx, id.res.GVR, id.namespace, id.name, types.MergePatchType, data)
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && attempt < maxConflictRetries:
			continue
		}
		return fmt.Errorf("garbagecollector: patching %s of %s: %w", field, id, err)
	}
}

// emptyList reports whether v is an empty list of references or
// finalizers.
func emptyList(v any) bool {
	switch l := v.(type) {
	case []metav1.OwnerReference:
		return len(l) == 0
	case []string:
		return len(l) == 0
	}
	return false
}
