package controller

import (
	"context"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
)

// RevisionClient is what keeping a workload's ControllerRevisions (the
// history of a StatefulSet's or DaemonSet's template) needs of an API
// client.
type RevisionClient interface {
	// GetRevision reads a ControllerRevision from the server.
	GetRevision(ctx context.Context, namespace, name string) (*appsv1.ControllerRevision, error)
	// CreateRevision, UpdateRevision, PatchRevision and DeleteRevision
	// write ControllerRevisions.
	CreateRevision(ctx context.Context, rev *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error)
	UpdateRevision(ctx context.Context, rev *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error)
	PatchRevision(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) (*appsv1.ControllerRevision, error)
	DeleteRevision(ctx context.Context, namespace, name string) error
}

// RevisionREST is the RevisionClient over listwatch's REST client.
type RevisionREST struct {
	revisions *client.Resource[*appsv1.ControllerRevision]
}

var _ RevisionClient = (*RevisionREST)(nil)

// NewRevisionREST returns ControllerRevision access through c.
func NewRevisionREST(c *client.Client) *RevisionREST {
	return &RevisionREST{revisions: client.For[*appsv1.ControllerRevision](c, "")}
}

// GetRevision reads the ControllerRevision from the server.
func (r *RevisionREST) GetRevision(ctx context.Context, namespace, name string) (*appsv1.ControllerRevision, error) {
	return r.revisions.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreateRevision creates the ControllerRevision.
func (r *RevisionREST) CreateRevision(ctx context.Context, rev *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	return r.revisions.Namespace(rev.Namespace).Create(ctx, rev, metav1.CreateOptions{})
}

// UpdateRevision replaces the ControllerRevision.
func (r *RevisionREST) UpdateRevision(ctx context.Context, rev *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	return r.revisions.Namespace(rev.Namespace).Update(ctx, rev, metav1.UpdateOptions{})
}

// PatchRevision patches the ControllerRevision namespace/name.
func (r *RevisionREST) PatchRevision(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) (*appsv1.ControllerRevision, error) {
	return r.revisions.Namespace(namespace).Patch(ctx, name, pt, data, metav1.PatchOptions{})
}

// DeleteRevision deletes the ControllerRevision namespace/name.
func (r *RevisionREST) DeleteRevision(ctx context.Context, namespace, name string) error {
	return r.revisions.Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// OwnedOrOrphanRevisions returns the revisions of owner's namespace that
// selector matches and that owner controls or nothing does, from a cache
// with ByControllerIndex and OrphansIndex.
func OwnedOrOrphanRevisions(idx cache.Indexer[*appsv1.ControllerRevision], owner metav1.Object, selector labels.Selector) ([]*appsv1.ControllerRevision, error) {
	owned, err := Controlled(idx, owner.GetNamespace(), owner.GetUID())
	if err != nil {
		return nil, err
	}
	orphans, err := Orphans(idx, owner.GetNamespace())
	if err != nil {
		return nil, err
	}
	var out []*appsv1.ControllerRevision
	for _, list := range [][]*appsv1.ControllerRevision{owned, orphans} {
		for _, r := range list {
			if selector.Matches(labels.Set(r.Labels)) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// AdoptRevision makes owner (of kind) the controller of revision, which
// must have none.
func AdoptRevision(ctx context.Context, c RevisionClient, owner metav1.Object, kind schema.GroupVersionKind, revision *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	if ref := metav1.GetControllerOfNoCopy(revision); ref != nil {
		return nil, fmt.Errorf("attempt to adopt revision owned by %v", ref)
	}
	data, err := AdoptPatch(revision.UID, *NewControllerRef(owner, kind))
	if err != nil {
		return nil, err
	}
	return c.PatchRevision(ctx, owner.GetNamespace(), revision.Name, types.StrategicMergePatchType, data)
}

// ReleaseRevision removes owner's reference from revision; a revision
// gone, or changed under the caller (the UID precondition fails), is
// released already and yields nil, nil.
func ReleaseRevision(ctx context.Context, c RevisionClient, owner metav1.Object, revision *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	data, err := ReleasePatch(revision.UID, owner.GetUID())
	if err != nil {
		return nil, err
	}
	released, err := c.PatchRevision(ctx, revision.Namespace, revision.Name, types.StrategicMergePatchType, data)
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil, nil
	}
	return released, err
}

// AdoptionCheck is the check, made at most once and only when something
// is to be adopted, that an owner still exists with the UID the cache has
// and is not being deleted: read afresh from the server, since the cache
// may lag a deletion (kube's RecheckDeletionTimestamp). One serves one
// sync.
type AdoptionCheck struct {
	// Owner is the owner as the cache has it.
	Owner metav1.Object
	// Kind is the owner's kind, for messages.
	Kind string
	// Get reads the owner from the server.
	Get func(ctx context.Context) (metav1.Object, error)

	once sync.Once
	err  error
}

// Fresh reads the owner from the server, failing if it was replaced (a
// PodControllerRefManager's Recheck).
func (a *AdoptionCheck) Fresh(ctx context.Context) (metav1.Object, error) {
	fresh, err := a.Get(ctx)
	if err != nil {
		return nil, err
	}
	if fresh.GetUID() != a.Owner.GetUID() {
		return nil, fmt.Errorf("original %s %s/%s is gone: got uid %s, wanted %s", a.Kind, a.Owner.GetNamespace(), a.Owner.GetName(), fresh.GetUID(), a.Owner.GetUID())
	}
	return fresh, nil
}

// Check fails if the owner cannot adopt: it was replaced, could not be
// read, or is being deleted (ErrOwnerBeingDeleted). Only the first call
// reads the server.
func (a *AdoptionCheck) Check(ctx context.Context) error {
	a.once.Do(func() {
		fresh, err := a.Fresh(ctx)
		switch {
		case err != nil:
			a.err = err
		case fresh.GetDeletionTimestamp() != nil:
			a.err = fmt.Errorf("%w: %s %s/%s", ErrOwnerBeingDeleted, a.Kind, a.Owner.GetNamespace(), a.Owner.GetName())
		}
	})
	return a.err
}
