package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	sigsjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/storage"
)

// defaultPodGracePeriod is kube's terminationGracePeriodSeconds default.
const defaultPodGracePeriod = 30

// deleteOptionsResource names DeleteOptions in decoding errors.
var deleteOptionsResource = &resource{GVK: metav1.SchemeGroupVersion.WithKind("DeleteOptions"), Plural: "deleteoptions"}

// parseDeleteOptions reads DeleteOptions from the body and the query.
func parseDeleteOptions(r *http.Request) (metav1.DeleteOptions, error) {
	var o metav1.DeleteOptions
	body, err := readBody(r)
	if err != nil {
		return o, err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		// Typed clients send DeleteOptions in protobuf.
		format, err := requestFormat(r, nil, true)
		if err != nil {
			return o, err
		}
		if body, err = toJSONBody(deleteOptionsResource, format, body); err != nil {
			return o, err
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &o); err != nil {
			return o, badRequest("DeleteOptions in version \"v1\" cannot be handled as a DeleteOptions: %v", err)
		}
		if o.Kind != "" && o.Kind != "DeleteOptions" {
			return o, badRequest("the object provided is unrecognized (must be of type DeleteOptions): %s", o.Kind)
		}
	}
	q := r.URL.Query()
	if v := q.Get("gracePeriodSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return o, badRequest("invalid gracePeriodSeconds %q", v)
		}
		o.GracePeriodSeconds = &n
	}
	if v := q.Get("propagationPolicy"); v != "" {
		p := metav1.DeletionPropagation(v)
		o.PropagationPolicy = &p
	}
	if v := q.Get("orphanDependents"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, badRequest("invalid orphanDependents %q", v)
		}
		//lint:ignore SA1019 still part of the API
		o.OrphanDependents = &b
	}
	errs := metav1validation.ValidateDeleteOptions(&o)
	if len(errs) > 0 {
		return o, apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("DeleteOptions").GroupKind(), "", errs)
	}
	return o, nil
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request, req request) error {
	opts, err := parseDeleteOptions(r)
	if err != nil {
		return err
	}
	req.dryRun = req.dryRun || len(opts.DryRun) > 0
	obj, gone, err := s.delete(r.Context(), req, opts)
	if err != nil {
		return err
	}
	return s.writeDeleteResult(w, r, req, opts, obj, gone)
}

func (s *Server) writeDeleteResult(w http.ResponseWriter, r *http.Request, req request, opts metav1.DeleteOptions, obj object, gone bool) error {
	if gone && !req.res.ReturnDeleted {
		// kube-apiserver's store answers with a Status that carries no
		// code.
		st := metav1.Status{
			Status: metav1.StatusSuccess,
			Details: &metav1.StatusDetails{
				Name: obj.GetName(), Group: req.res.GVK.Group, Kind: req.res.Plural, UID: obj.GetUID(),
			},
		}
		writeStatusCode(w, http.StatusOK, &st)
		return nil
	}
	code := http.StatusOK
	//lint:ignore SA1019 kube's rule
	if !gone && opts.OrphanDependents != nil && !*opts.OrphanDependents {
		code = http.StatusAccepted
	}
	return writeObject(w, r, req.res, code, obj)
}

// delete applies kube-apiserver's deletion rules to req's object and
// reports whether it is gone (else it is kept with a deletionTimestamp for
// its finalizers or its node agent).
//
// A built-in object is returned as its Go type where the delete made it
// so (a graceful delete), else as the map.
func (s *Server) delete(ctx context.Context, req request, opts metav1.DeleteOptions) (object, bool, error) {
	if req.res.Kube != nil {
		return s.deleteBuiltin(ctx, req, opts)
	}
	key := registry.KeyFor(req.res, req.namespace, req.name)
	for {
		kv, cur, err := s.current(ctx, req, key)
		if err != nil {
			return nil, false, err
		}
		if p := opts.Preconditions; p != nil {
			if p.UID != nil && *p.UID != cur.GetUID() {
				return nil, false, conflict(req, "Precondition failed: UID in precondition: "+string(*p.UID)+", UID in object meta: "+string(cur.GetUID()))
			}
			if p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
				return nil, false, conflict(req, "Precondition failed: ResourceVersion in precondition: "+*p.ResourceVersion+", ResourceVersion in object meta: "+cur.GetResourceVersion())
			}
		}
		desired := deepCopy(cur)
		applyPropagation(req.res, desired, opts)
		keep := false
		if grace := s.gracePeriod(req.res, cur, opts); grace > 0 {
			keep = true
			deadline := metav1.NewTime(time.Now().UTC().Truncate(time.Second).Add(time.Duration(grace) * time.Second))
			if old := cur.GetDeletionGracePeriodSeconds(); cur.GetDeletionTimestamp() == nil || old == nil || grace < *old {
				desired.SetDeletionTimestamp(&deadline)
				desired.SetDeletionGracePeriodSeconds(&grace)
			}
		} else if len(desired.GetFinalizers()) > 0 {
			keep = true
			zero := int64(0)
			if desired.GetDeletionTimestamp() == nil {
				ts := now()
				desired.SetDeletionTimestamp(&ts)
			}
			desired.SetDeletionGracePeriodSeconds(&zero)
		}
		if keep {
			if _, err := s.writeDeleting(ctx, req, key, kv, cur, desired); errors.Is(err, storage.ErrConflict) {
				continue
			} else if err != nil {
				return nil, false, err
			}
			return desired, false, nil
		}
		if req.dryRun {
			return cur, true, nil
		}
		if err := s.remove(ctx, req, key, kv.Revision, cur); errors.Is(err, storage.ErrConflict) {
			continue
		} else if err != nil {
			return nil, false, err
		}
		return cur, true, nil
	}
}

// current reads the stored object at key, at its revision; ctx ending
// ends the retry loops that call it.
func (s *Server) current(ctx context.Context, req request, key string) (storage.KeyValue, *unstructured.Unstructured, error) {
	if err := ctx.Err(); err != nil {
		return storage.KeyValue{}, nil, err
	}
	kv, err := s.cfg.Storage.Get(ctx, key)
	if err != nil {
		return storage.KeyValue{}, nil, s.storageErr(req, err)
	}
	cur, err := req.res.DecodeKV(kv)
	return kv, cur, err
}

// remove deletes key if it is still at rev, and sets out's resourceVersion
// to the revision of the removal, which kube-apiserver answers a delete
// with. storage.ErrConflict comes back as it is, for the caller to retry.
func (s *Server) remove(ctx context.Context, req request, key string, rev int64, out metav1.Object) error {
	_, drev, err := s.cfg.Storage.Delete(ctx, key, rev)
	if errors.Is(err, storage.ErrConflict) {
		return err
	}
	if err != nil {
		return s.storageErr(req, err)
	}
	out.SetResourceVersion(strconv.FormatInt(drev, 10))
	return nil
}

// applyPropagation records the propagation policy as the garbage
// collector's finalizers: orphan, foregroundDeletion, or neither.
func applyPropagation(r *resource, u metav1.Object, opts metav1.DeleteOptions) {
	var policy metav1.DeletionPropagation
	switch {
	case opts.PropagationPolicy != nil:
		policy = *opts.PropagationPolicy
	//lint:ignore SA1019 still part of the API
	case opts.OrphanDependents != nil:
		policy = metav1.DeletePropagationBackground
		//lint:ignore SA1019 still part of the API
		if *opts.OrphanDependents {
			policy = metav1.DeletePropagationOrphan
		}
	case hasFinalizer(u, metav1.FinalizerOrphanDependents) || hasFinalizer(u, metav1.FinalizerDeleteDependents):
		// A deletion already in progress keeps its policy.
		return
	case r.OrphanByDefault:
		policy = metav1.DeletePropagationOrphan
	default:
		return
	}
	setFinalizer(u, metav1.FinalizerOrphanDependents, policy == metav1.DeletePropagationOrphan)
	setFinalizer(u, metav1.FinalizerDeleteDependents, policy == metav1.DeletePropagationForeground)
}

// gracePeriod is how long a pod bound to a node may take to stop; 0 for
// everything else, which is deleted at once.
func (s *Server) gracePeriod(r *resource, u *unstructured.Unstructured, opts metav1.DeleteOptions) int64 {
	if !r.Graceful {
		return 0
	}
	node := registry.NestedString(u.Object, "spec", "nodeName")
	phase := registry.NestedString(u.Object, "status", "phase")
	if node == "" || phase == string(corev1.PodSucceeded) || phase == string(corev1.PodFailed) {
		return 0
	}
	if opts.GracePeriodSeconds != nil {
		return *opts.GracePeriodSeconds
	}
	if n, ok, err := unstructured.NestedInt64(u.Object, "spec", "terminationGracePeriodSeconds"); ok && err == nil && n >= 0 {
		return n
	}
	return defaultPodGracePeriod
}

func (s *Server) handleDeleteCollection(w http.ResponseWriter, r *http.Request, req request) error {
	if req.res.Namespaced && req.namespace == "" {
		return methodNotAllowed(r, req)
	}
	opts, err := parseDeleteOptions(r)
	if err != nil {
		return err
	}
	req.dryRun = req.dryRun || len(opts.DryRun) > 0
	lo, err := parseListOptions(req.res, r.URL.Query(), false, !s.cfg.DisableWatchList)
	if err != nil {
		return err
	}
	lo.limit, lo.continueTo = 0, ""
	res, err := s.list(r.Context(), req, lo)
	if err != nil {
		return err
	}
	out := listResult{rev: res.rev}
	for _, it := range res.items {
		one := req
		one.name = it.GetName()
		obj, _, err := s.delete(r.Context(), one, opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		u, err := req.res.AsMap(obj)
		if err != nil {
			return err
		}
		out.items = append(out.items, u)
	}
	return writeObject(w, r, req.res, http.StatusOK, listObject(req.res, out))
}

// immortalNamespaces may not be deleted, as kube-apiserver's namespace
// lifecycle admission refuses.
var immortalNamespaces = map[string]bool{
	metav1.NamespaceDefault: true, metav1.NamespaceSystem: true, metav1.NamespacePublic: true,
}

// deleteBuiltin deletes a built-in object as kube-apiserver's generic store
// does (and, first, its namespace storage for a namespace): the resource's
// strategy decides through BeforeDelete whether the delete is graceful; an
// object with finalizers, or deleted gracefully with a grace period, is
// kept with a deletionTimestamp; any other is written (when graceful, so
// that watchers see its deletionTimestamp) and then removed. The object is
// returned with gone true when it was removed, at the revision of the
// removal.
func (s *Server) deleteBuiltin(ctx context.Context, req request, opts metav1.DeleteOptions) (object, bool, error) {
	res := req.res
	isNamespace := res.GVK == namespacesResource.GVK
	if isNamespace && immortalNamespaces[req.name] {
		return nil, false, apierrors.NewForbidden(res.GR(), req.name, errors.New("this namespace may not be deleted"))
	}
	key := registry.KeyFor(res, req.namespace, req.name)
	kreq := s.kubeRequest(ctx, req, "delete", req.name)
	for {
		kv, cur, err := s.current(ctx, req, key)
		if err != nil {
			return nil, false, err
		}
		o := *opts.DeepCopy()
		if isNamespace {
			out, done, err := s.terminateNamespace(ctx, req, kv, cur, o)
			if errors.Is(err, storage.ErrConflict) {
				continue
			}
			if err != nil || done {
				return out, false, err
			}
		}
		if res.GVK == crdGVK {
			out, done, err := s.terminateCRD(ctx, req, kv, cur, o)
			if errors.Is(err, storage.ErrConflict) {
				continue
			}
			if err != nil || done {
				return out, false, err
			}
		}
		graceful, pending, deleting, err := res.Kube.BeforeDeleteTyped(ctx, kreq, cur, &o)
		if err != nil {
			return nil, false, err
		}
		if pending {
			return cur, false, nil
		}
		var desired object
		if deleting == nil {
			desired = deepCopy(cur)
		} else if desired, err = registry.AsObject(deleting); err != nil {
			return nil, false, err
		}
		applyPropagation(res, desired, o)
		pendingFinalizers := len(desired.GetFinalizers()) > 0
		if !graceful && pendingFinalizers {
			markAsDeleting(desired)
		}
		var out object = cur
		if graceful || pendingFinalizers {
			rev, err := s.writeDeleting(ctx, req, key, kv, cur, desired)
			if errors.Is(err, storage.ErrConflict) {
				continue
			}
			if err != nil {
				return nil, false, err
			}
			out = desired
			if pendingFinalizers || (o.GracePeriodSeconds != nil && *o.GracePeriodSeconds > 0) {
				return out, false, nil
			}
			kv.Revision = rev
		}
		if req.dryRun {
			return out, true, nil
		}
		if err := s.remove(ctx, req, key, kv.Revision, out); errors.Is(err, storage.ErrConflict) {
			continue
		} else if err != nil {
			return nil, false, err
		}
		res.WriteRules().Deleted(ctx, out)
		return out, true, nil
	}
}

// writeDeleting stores desired, an object being deleted, over kv (which
// decodes to cur): nothing when it is unchanged or the request is a dry
// run. It returns the revision of what is stored and sets desired's
// resourceVersion to it.
func (s *Server) writeDeleting(ctx context.Context, req request, key string, kv storage.KeyValue, cur *unstructured.Unstructured, desired object) (int64, error) {
	value, err := req.res.EncodeStored(desired)
	if err != nil {
		return 0, err
	}
	same, err := storedAlready(kv, value, cur, desired)
	if err != nil {
		return 0, err
	}
	if same || req.dryRun {
		return kv.Revision, nil
	}
	withdraw := s.leaveHint(req.res, key, value, desired)
	rev, err := s.cfg.Storage.Update(ctx, key, value, kv.Revision)
	if err != nil {
		withdraw()
		if errors.Is(err, storage.ErrConflict) {
			return 0, err
		}
		return 0, s.storageErr(req, err)
	}
	desired.SetResourceVersion(strconv.FormatInt(rev, 10))
	return rev, nil
}

// markAsDeleting sets the deletionTimestamp of an object that waits for its
// finalizers, with a grace period of 0, and moves its generation the first
// time, as kube-apiserver's store does for resources not deleted
// gracefully.
func markAsDeleting(u metav1.Object) {
	if u.GetDeletionTimestamp() != nil {
		return
	}
	if g := u.GetGeneration(); g > 0 {
		u.SetGeneration(g + 1)
	}
	ts := now()
	u.SetDeletionTimestamp(&ts)
	zero := int64(0)
	u.SetDeletionGracePeriodSeconds(&zero)
}

// terminateNamespace is the first step of deleting a namespace, as
// kube-apiserver's namespace storage takes it: the namespace is marked
// Terminating with a deletionTimestamp and kept (done true) while its
// spec.finalizers remain, for the namespace controller to empty it. With
// none left (done false), the namespace is deleted like any object.
func (s *Server) terminateNamespace(ctx context.Context, req request, kv storage.KeyValue, cur *unstructured.Unstructured, o metav1.DeleteOptions) (*unstructured.Unstructured, bool, error) {
	if p := o.Preconditions; p != nil {
		if p.UID != nil && *p.UID != cur.GetUID() {
			return nil, false, conflict(req, fmt.Sprintf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, cur.GetUID()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
			return nil, false, conflict(req, fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, cur.GetResourceVersion()))
		}
	}
	if cur.GetDeletionTimestamp() == nil {
		desired := deepCopy(cur)
		ts := now()
		desired.SetDeletionTimestamp(&ts)
		if err := unstructured.SetNestedField(desired.Object, string(corev1.NamespaceTerminating), "status", "phase"); err != nil {
			return nil, false, apierrors.NewInternalError(err)
		}
		applyPropagation(req.res, desired, o)
		if _, err := s.writeDeleting(ctx, req, registry.KeyFor(req.res, "", req.name), kv, cur, desired); err != nil {
			return nil, false, err
		}
		return desired, true, nil
	}
	if fs, _, _ := unstructured.NestedSlice(cur.Object, "spec", "finalizers"); len(fs) > 0 {
		return cur, true, nil
	}
	return nil, false, nil
}
