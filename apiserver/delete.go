package apiserver

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"net/http"
	"path"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	sigsjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/storage"
)

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
		format, err := decode.RequestFormat(r, nil, true)
		if err != nil {
			return o, err
		}
		if body, err = decode.ToJSON(deleteOptionsResource, format, body); err != nil {
			return o, err
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &o); err != nil {
			return o, respond.BadRequest("DeleteOptions in version \"v1\" cannot be handled as a DeleteOptions: %v", err)
		}
		if o.Kind != "" && o.Kind != "DeleteOptions" {
			return o, respond.BadRequest("the object provided is unrecognized (must be of type DeleteOptions): %s", o.Kind)
		}
	}
	q := r.URL.Query()
	if v := q.Get("gracePeriodSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return o, apierrors.NewBadRequest(err.Error())
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
			return o, respond.BadRequest("invalid orphanDependents %q", v)
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

// delete deletes req's object as kube-apiserver's generic store does: the
// resource's rules decide (registry.Rules.BeforeDelete) whether the object
// is kept (a namespace or definition terminating) or deleted gracefully;
// an object with finalizers, or deleted gracefully with a grace period,
// is kept with a deletionTimestamp; any other is written (when graceful,
// so that watchers see its deletionTimestamp) and then removed. It
// reports whether the object is gone, and returns it, at the revision of
// the removal when it is.
//
// A built-in object is returned as its Go type where the delete made it
// so (a graceful delete), else as the map.
func (s *Server) delete(ctx context.Context, req request, opts metav1.DeleteOptions) (object, bool, error) {
	res := req.res
	rules := res.WriteRules()
	key := registry.KeyFor(res, req.namespace, req.name)
	w := s.write(ctx, req, "delete", req.name)
	// kube's admission: the mutating plugins before the object is read,
	// the validating ones on the object each time it is about to be
	// removed or marked as deleting.
	adm := res.DeleteAdmission(w, &opts)
	if err := adm.Admit(ctx); err != nil {
		return nil, false, err
	}
	// Once per request: a deletecollection's deletes repeat its warning,
	// which the response carries once.
	res.WarnDelete(w.Warn, &opts)
	for {
		kv, cur, err := s.current(ctx, req, key)
		if err != nil {
			return nil, false, err
		}
		o := *opts.DeepCopy()
		d, err := rules.BeforeDelete(ctx, w, cur, &o)
		if err == nil && !d.Pending {
			err = adm.Validate(ctx, cur)
		}
		switch {
		case err != nil:
			return nil, false, err
		case d.Pending:
			return cur, false, nil
		case d.Keep != nil:
			if _, err := s.writeDeleting(ctx, req, key, kv, cur, d.Keep); errors.Is(err, storage.ErrConflict) {
				continue
			} else if err != nil {
				return nil, false, err
			}
			return d.Keep, false, nil
		}
		var desired object = d.Deleting
		if desired == nil {
			desired = deepCopy(cur)
		}
		registry.ApplyPropagation(res, desired, o)
		pendingFinalizers := len(desired.GetFinalizers()) > 0
		if !d.Graceful && pendingFinalizers {
			markAsDeleting(desired)
		}
		var out object = cur
		if d.Graceful || pendingFinalizers {
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
		rules.Deleted(ctx, out)
		return out, true, nil
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

func (s *Server) handleDeleteCollection(w http.ResponseWriter, r *http.Request, req request) error {
	if req.res.Namespaced && req.namespace == "" {
		return methodNotAllowed(r, req)
	}
	opts, err := parseDeleteOptions(r)
	if err != nil {
		return err
	}
	req.dryRun = req.dryRun || len(opts.DryRun) > 0
	lo, err := parseListOptions(req.res, r.URL.Query(), false, s.gates())
	if err != nil {
		return err
	}
	lo.limit, lo.continueTo = 0, ""
	// Warned of before anything is listed: an empty collection too.
	req.res.WarnDelete(req.warn, &opts)
	res, err := s.list(r.Context(), req, lo)
	if err != nil {
		return err
	}
	var out []*unstructured.Unstructured
	for _, it := range res.items {
		one := req
		one.name = path.Base(it.Key())
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
		if !req.res.Custom {
			// As kube-apiserver lists built-in objects (wire.ItemJSON).
			item := maps.Clone(u.Object)
			delete(item, "apiVersion")
			delete(item, "kind")
			u = &unstructured.Unstructured{Object: item}
		}
		out = append(out, u)
	}
	return writeObject(w, r, req.res, http.StatusOK, listObject(req.res, listResult{rev: res.rev, shardInfo: res.shardInfo}, out))
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
	// A resource's objects have one stored form (EncodeStored): the same
	// bytes are the same object.
	if bytes.Equal(value, kv.Value) || req.dryRun {
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
	ts := registry.Now()
	u.SetDeletionTimestamp(&ts)
	zero := int64(0)
	u.SetDeletionGracePeriodSeconds(&zero)
}
