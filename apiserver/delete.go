package apiserver

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/storage"
)

// defaultPodGracePeriod is kube's terminationGracePeriodSeconds default.
const defaultPodGracePeriod = 30

// deleteOptionsResource names DeleteOptions in decoding errors.
var deleteOptionsResource = &resource{gvk: metav1.SchemeGroupVersion.WithKind("DeleteOptions"), plural: "deleteoptions"}

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
	var errs field.ErrorList
	if o.PropagationPolicy != nil {
		switch *o.PropagationPolicy {
		case metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
		default:
			errs = append(errs, field.NotSupported(field.NewPath("propagationPolicy"), *o.PropagationPolicy,
				[]string{string(metav1.DeletePropagationForeground), string(metav1.DeletePropagationBackground), string(metav1.DeletePropagationOrphan)}))
		}
		//lint:ignore SA1019 still part of the API
		if o.OrphanDependents != nil {
			errs = append(errs, field.Invalid(field.NewPath("propagationPolicy"), *o.PropagationPolicy, "orphanDependents and deletionPropagation cannot be both set"))
		}
	}
	for _, v := range o.DryRun {
		if v != metav1.DryRunAll {
			errs = append(errs, field.NotSupported(field.NewPath("dryRun"), v, []string{metav1.DryRunAll}))
		}
	}
	if o.GracePeriodSeconds != nil && *o.GracePeriodSeconds < 0 {
		errs = append(errs, field.Invalid(field.NewPath("gracePeriodSeconds"), *o.GracePeriodSeconds, "must be greater than or equal to 0"))
	}
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

func (s *Server) writeDeleteResult(w http.ResponseWriter, r *http.Request, req request, opts metav1.DeleteOptions, obj *unstructured.Unstructured, gone bool) error {
	if gone && !req.res.returnDeleted {
		st := metav1.Status{
			Status: metav1.StatusSuccess,
			Code:   http.StatusOK,
			Details: &metav1.StatusDetails{
				Name: obj.GetName(), Group: req.res.gvk.Group, Kind: req.res.plural, UID: obj.GetUID(),
			},
		}
		writeStatusObject(w, &st)
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
func (s *Server) delete(ctx context.Context, req request, opts metav1.DeleteOptions) (*unstructured.Unstructured, bool, error) {
	key := keyFor(req.res, req.namespace, req.name)
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		kv, err := s.cfg.Storage.Get(ctx, key)
		if err != nil {
			return nil, false, s.storageErr(req, err)
		}
		cur, err := decodeKV(kv)
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
			value, err := encodeStored(desired)
			if err != nil {
				return nil, false, err
			}
			if bytes.Equal(value, kv.Value) {
				return cur, false, nil
			}
			if req.dryRun {
				return desired, false, nil
			}
			rev, err := s.cfg.Storage.Update(ctx, key, value, kv.Revision)
			if errors.Is(err, storage.ErrConflict) {
				continue
			}
			if err != nil {
				return nil, false, s.storageErr(req, err)
			}
			desired.SetResourceVersion(strconv.FormatInt(rev, 10))
			return desired, false, nil
		}
		if req.dryRun {
			return cur, true, nil
		}
		_, _, err = s.cfg.Storage.Delete(ctx, key, kv.Revision)
		if errors.Is(err, storage.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, false, s.storageErr(req, err)
		}
		return cur, true, nil
	}
}

// applyPropagation records the propagation policy as the garbage
// collector's finalizers: orphan, foregroundDeletion, or neither.
func applyPropagation(r *resource, u *unstructured.Unstructured, opts metav1.DeleteOptions) {
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
	case r.orphanByDefault:
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
	if !r.graceful {
		return 0
	}
	node := nestedString(u.Object, "spec", "nodeName")
	phase := nestedString(u.Object, "status", "phase")
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
	if req.res.namespaced && req.namespace == "" {
		return methodNotAllowed(r, req)
	}
	opts, err := parseDeleteOptions(r)
	if err != nil {
		return err
	}
	req.dryRun = req.dryRun || len(opts.DryRun) > 0
	lo, err := parseListOptions(req.res, r.URL.Query(), false)
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
		out.items = append(out.items, obj)
	}
	return writeObject(w, r, req.res, http.StatusOK, listObject(req.res, out))
}
