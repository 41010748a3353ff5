package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watchcache"
)

// errNoChange ends a GuaranteedUpdate whose result is what is stored:
// nothing is written and cur, the object as stored, is answered.
type errNoChange struct{ cur object }

func (errNoChange) Error() string { return "no change" }

// errDeleteInstead ends a GuaranteedUpdate whose result is an object being
// deleted with no finalizers left: it is removed instead of written.
type errDeleteInstead struct {
	obj object
	rev int64
}

func (errDeleteInstead) Error() string { return "delete instead" }

// shouldDeleteDuringUpdate reports whether an update of cur to obj leaves
// an object being deleted with nothing left to wait for, so that it is
// removed instead of written: kube-apiserver's store's rule (no finalizers
// left, and cur deleted with no grace period pending: a pod waiting out
// its grace period stays), unless its rules hold it longer (namespaces).
func shouldDeleteDuringUpdate(ctx context.Context, r *resource, obj, cur object) bool {
	return genericregistry.ShouldDeleteDuringUpdate(ctx, "", obj, cur) && !r.HeldFromRemoval(obj)
}

// mutateFunc turns the current object, a private copy in its resource's
// representation (registry.Resource.DecodeObject: a built-in object's Go
// type, a custom resource's map), into the desired one; it may be called
// several times. It may answer a map for a built-in resource (a merge of
// maps: apply, scale), which the update turns into the Go type once.
type mutateFunc func(cur object) (object, error)

// typedUpdate reports whether the body of an update of req is decoded
// straight to its resource's Go type: a built-in resource's write that
// records managedFields (manageUpdate), but for the subresources whose
// body is another kind (scale, binding).
func (s *Server) typedUpdate(req request) bool {
	if !req.res.HasGoType() || req.manage == nil || req.manage.applied || req.sub == "scale" || req.sub == "binding" {
		return false
	}
	_, err := req.res.FieldManager(req.sub)
	return err == nil
}

// update runs mutate under storage.GuaranteedUpdate and applies the rules
// every write shares: the resourceVersion precondition, immutable system
// metadata, status kept by main-resource writes and spec by /status
// writes, generation bumps, and removal of a deleted object whose last
// finalizer went. It returns the object as stored, in its resource's
// representation: the object goes from the stored bytes to the bytes
// stored in that one form, and a write that changes nothing is known by
// its bytes alone (a resource's objects have one stored form:
// registry.Resource.EncodeStored).
func (s *Server) update(ctx context.Context, req request, mutate mutateFunc) (object, error) {
	key := registry.KeyFor(req.res, req.namespace, req.name)
	// finish is what the rules took for the attempt being made: given up
	// when another is made or the write fails, kept once it is stored.
	var finish registry.Finish
	defer func() { finish.Done(false) }()
	for {
		var out object
		var stored []byte
		withdraw := func() {}
		rev, err := storage.GuaranteedUpdate(ctx, s.cfg.Storage, key, func(kv storage.KeyValue) ([]byte, error) {
			cur, err := req.res.DecodeObject(kv)
			if err != nil {
				return nil, err
			}
			written, err := copyObject(cur)
			if err != nil {
				return nil, err
			}
			if written, err = mutate(written); err != nil {
				return nil, err
			}
			finish.Done(false)
			desired, f, err := s.prepareUpdate(ctx, req, cur, manageUpdate(req, cur, written))
			finish = f
			if err != nil {
				return nil, err
			}
			value, err := req.res.EncodeStored(desired)
			switch {
			case err != nil:
				return nil, err
			case bytes.Equal(value, kv.Value):
				return nil, errNoChange{cur}
			case req.dryRun:
				// Everything was checked; answer with what would be
				// stored and write nothing.
				return nil, errNoChange{desired}
			case shouldDeleteDuringUpdate(ctx, req.res, desired, cur):
				return nil, errDeleteInstead{desired, kv.Revision}
			}
			out, stored = desired, value
			// An earlier attempt's write was refused: its hint goes.
			withdraw()
			withdraw = s.leaveHint(req.res, key, value, desired)
			return value, nil
		})
		if err != nil {
			withdraw()
		}
		var noChange errNoChange
		var del errDeleteInstead
		switch {
		case err == nil:
			finish.Done(true)
			if req.res.AnswersStored() {
				return req.res.DecodeObject(storage.KeyValue{Key: key, Value: stored, Revision: rev})
			}
			out.SetResourceVersion(strconv.FormatInt(rev, 10))
			return out, nil
		case errors.As(err, &noChange):
			return noChange.cur, nil
		case errors.As(err, &del):
			_, drev, err := s.cfg.Storage.Delete(ctx, key, del.rev)
			if errors.Is(err, storage.ErrConflict) {
				continue
			}
			if err != nil {
				return nil, s.storageErr(req, err)
			}
			del.obj.SetResourceVersion(strconv.FormatInt(drev, 10))
			finish.Done(true)
			req.res.WriteRules().Deleted(ctx, del.obj)
			return del.obj, nil
		default:
			return nil, s.storageErr(req, err)
		}
	}
}

// prepareUpdate turns desired into what may be stored over cur, through
// the resource's rules, and returns it with the rules' Finish: the
// resourceVersion precondition first, then the object in its resource's
// representation (a built-in one's map that does not convert to its Go
// type is refused as kube's decoder refuses it), then the rules. The
// result is desired itself when the rules changed it in place.
func (s *Server) prepareUpdate(ctx context.Context, req request, cur, desired object) (object, registry.Finish, error) {
	res := req.res
	if desired == nil {
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("apiserver: update of %v with no object", res.GVR()))
	}
	if rv := desired.GetResourceVersion(); rv == "" {
		if !res.UnconditionalUpdate {
			return nil, nil, apierrors.NewInvalid(res.QualifiedKind(), req.name, field.ErrorList{
				field.Invalid(field.NewPath("metadata", "resourceVersion"), 0, "must be specified for an update"),
			})
		}
	} else if rv != cur.GetResourceVersion() {
		if _, err := watchcache.ParseResourceVersion(rv); err != nil {
			// kube-apiserver's storage answers the parser's error alone,
			// with a 500.
			if invalid := (*watchcache.InvalidResourceVersionError)(nil); errors.As(err, &invalid) {
				return nil, nil, respond.Unreasoned(invalid.Err)
			}
			return nil, nil, err
		}
		return nil, nil, conflict(req, "the object has been modified; please apply your changes to the latest version and try again")
	}
	desired.SetResourceVersion(cur.GetResourceVersion())
	if u, isMap := desired.(*unstructured.Unstructured); isMap && res.HasGoType() {
		typed, err := res.Typed(u)
		if err != nil {
			return nil, nil, err
		}
		desired = typed
	}
	return res.WriteRules().Update(ctx, s.write(ctx, req, "update", req.name), desired, cur)
}

func (s *Server) handleUpdate(w http.ResponseWriter, r *http.Request, req request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if req.manage, _, err = writeOptions(r, "update", ""); err != nil {
		return err
	}
	if req.sub == "scale" {
		format, err := decode.RequestFormat(r, scaleResource, true)
		if err != nil {
			return err
		}
		js, err := decode.ToJSON(scaleResource, format, body)
		if err != nil {
			return err
		}
		uid := bodyUID(js)
		err = s.updateScale(w, r, req, func(cur object) ([]byte, error) {
			if err := uidPrecondition(req, uid, cur.GetUID()); err != nil {
				return nil, err
			}
			return js, nil
		})
		// A scale is never created by an update: a missing object is
		// NotFound whatever the uid, as for any resource an update does
		// not create.
		return err
	}
	var u *unstructured.Unstructured
	var ext runtime.Object
	var obj object
	if s.typedUpdate(req) {
		// The body goes to the rules as its Go type, with no map.
		obj, err = decode.New(w, r, req.res, body)
		ext = obj
	} else {
		u, ext, err = decode.Request(w, r, req.res, body, false)
		obj = u
	}
	if err != nil {
		return err
	}
	if err := checkNamespace(req, obj); err != nil {
		return err
	}
	if obj.GetName() != req.name {
		return respond.BadRequest("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), req.name)
	}
	uid := obj.GetUID()
	out, err := s.update(r.Context(), req, func(cur object) (object, error) {
		// Before the resourceVersion, as kube-apiserver's storage checks
		// its preconditions before the update function runs.
		if err := uidPrecondition(req, uid, cur.GetUID()); err != nil {
			return nil, err
		}
		return copyObject(obj)
	})
	if apierrors.IsNotFound(err) && req.res.CreateOnUpdate && req.sub == "" {
		// Nothing stored has the uid asked for, where an update would
		// create: kube-apiserver answers this precondition's conflict and
		// creates nothing. Where it would not, the answer is NotFound
		// (test/golden: core-pods, apps-replicasets update-missing-with-uid).
		if perr := uidPrecondition(req, uid, ""); perr != nil {
			return perr
		}
		obj, err := decode.NewObject(u, ext)
		if err == nil {
			err = checkNamespace(req, obj)
		}
		var answer []byte
		if err == nil {
			obj, answer, err = s.create(r.Context(), req, obj)
		}
		if err != nil {
			return err
		}
		return writeEncoded(w, r, req.res, http.StatusCreated, obj, answer)
	}
	if err != nil {
		return err
	}
	return writeObject(w, r, req.res, http.StatusOK, out)
}

// uidPrecondition is the conflict kube-apiserver answers when the uid a
// PUT body carries, which it takes as a precondition, is not the stored
// object's (stored is "" when nothing is stored). An empty uid is no
// precondition.
func uidPrecondition(req request, sent, stored types.UID) error {
	return registry.CheckPreconditions(req.res, req.namespace, req.name, sent, "", stored, "")
}

// bodyUID reads metadata.uid from a JSON body; "" when there is none or
// the body cannot be read (decoding it reports that).
func bodyUID(js []byte) types.UID {
	var b struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
	}
	if json.Unmarshal(js, &b) != nil {
		return ""
	}
	return b.Metadata.UID
}
