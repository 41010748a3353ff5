package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
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

// errNoChange ends a GuaranteedUpdate whose result equals the stored
// object: nothing is written and the stored object is returned.
type errNoChange struct{ cur *unstructured.Unstructured }

func (errNoChange) Error() string { return "no change" }

// errDeleteInstead ends a GuaranteedUpdate whose result is an object being
// deleted with no finalizers left: it is removed instead of written.
type errDeleteInstead struct {
	obj *unstructured.Unstructured
	rev int64
}

func (errDeleteInstead) Error() string { return "delete instead" }

// shouldDeleteDuringUpdate reports whether an update of cur to obj leaves
// an object being deleted with nothing left to wait for, so that it is
// removed instead of written: kube-apiserver's store's rule (no finalizers
// left, and cur deleted with no grace period pending: a pod waiting out
// its grace period stays), unless its rules hold it longer (namespaces).
func shouldDeleteDuringUpdate(ctx context.Context, r *resource, obj object, cur *unstructured.Unstructured) bool {
	return genericregistry.ShouldDeleteDuringUpdate(ctx, "", obj, cur) && !r.HeldFromRemoval(obj)
}

// mutateFunc turns the current object (a private copy) into the desired
// one; it may be called several times. The desired object is a map, or,
// where the write goes through its resource's rules as its Go type
// (Server.typedUpdate), may be of that type, a private copy too.
type mutateFunc func(cur *unstructured.Unstructured) (object, error)

// typedUpdate reports whether an update of req goes through its
// resource's rules as the resource's Go type, with no map on the way: a
// built-in resource's write that records managedFields (manageUpdate),
// but for the subresources and the resource (services) whose write changes
// the map.
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
// finalizer went. It returns the object as stored.
func (s *Server) update(ctx context.Context, req request, mutate mutateFunc) (*unstructured.Unstructured, error) {
	out, typed, err := s.updateTyped(ctx, req, mutate)
	if err != nil || out != nil {
		return out, err
	}
	return req.res.AsMap(typed)
}

// updateObject is update answering with the object as its Go type where
// the write made it so (a built-in resource), else as the map: the
// answer's encoding then needs no conversion.
func (s *Server) updateObject(ctx context.Context, req request, mutate mutateFunc) (object, error) {
	out, typed, err := s.updateTyped(ctx, req, mutate)
	if err != nil {
		return nil, err
	}
	if typed != nil {
		return typed, nil
	}
	return out, nil
}

// updateTyped is update returning the object stored as its Go type where
// the write made it so (a built-in resource's update through its rules),
// and then no map; else the map and no Go type.
func (s *Server) updateTyped(ctx context.Context, req request, mutate mutateFunc) (*unstructured.Unstructured, object, error) {
	key := registry.KeyFor(req.res, req.namespace, req.name)
	// finish is what the rules took for the attempt being made: given up
	// when another is made or the write fails, kept once it is stored.
	var finish registry.Finish
	defer func() { finish.Done(false) }()
	for {
		var out *unstructured.Unstructured
		var outTyped object
		var stored []byte
		withdraw := func() {}
		rev, err := storage.GuaranteedUpdate(ctx, s.cfg.Storage, key, func(kv storage.KeyValue) ([]byte, error) {
			cur, err := req.res.DecodeKV(kv)
			if err != nil {
				return nil, err
			}
			written, err := mutate(deepCopy(cur))
			if err != nil {
				return nil, err
			}
			desired, ext := manageUpdate(req, cur, written)
			finish.Done(false)
			typed, f, err := s.prepareUpdate(ctx, req, cur, desired, ext)
			finish = f
			if err != nil {
				return nil, err
			}
			if u, ok := typed.(*unstructured.Unstructured); ok {
				desired, typed = u, nil
			}
			// When the rules gave the object as its Go type, that is what
			// is stored (it encodes faster than a map, to the same
			// object), and desired is left as written: its map is made
			// where it is needed (asMap).
			var toStore object = desired
			if typed != nil {
				toStore = typed
			}
			value, err := req.res.EncodeStored(toStore)
			if err != nil {
				return nil, err
			}
			asMap := func() (*unstructured.Unstructured, error) {
				if typed == nil {
					return desired, nil
				}
				return registry.DecodeStored(value, kv.Revision)
			}
			if same, err := storedAlready(kv, value, cur, toStore); err != nil {
				return nil, err
			} else if same {
				return nil, errNoChange{cur}
			}
			if req.dryRun {
				// Everything was checked; answer with what would be
				// stored and write nothing.
				u, err := asMap()
				if err != nil {
					return nil, err
				}
				return nil, errNoChange{u}
			}
			if shouldDeleteDuringUpdate(ctx, req.res, toStore, cur) {
				u, err := asMap()
				if err != nil {
					return nil, err
				}
				return nil, errDeleteInstead{u, kv.Revision}
			}
			out, outTyped, stored = desired, typed, value
			if typed != nil {
				out = nil
			}
			// An earlier attempt's write was refused: its hint goes.
			withdraw()
			withdraw = s.leaveHint(req.res, key, value, toStore)
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
				u, err := req.res.DecodeKV(storage.KeyValue{Key: key, Value: stored, Revision: rev})
				if err != nil {
					return nil, nil, err
				}
				return u, nil, nil
			}
			rv := strconv.FormatInt(rev, 10)
			if out != nil {
				out.SetResourceVersion(rv)
			}
			if outTyped != nil {
				outTyped.SetResourceVersion(rv)
			}
			return out, outTyped, nil
		case errors.As(err, &noChange):
			return noChange.cur, nil, nil
		case errors.As(err, &del):
			_, drev, err := s.cfg.Storage.Delete(ctx, key, del.rev)
			if errors.Is(err, storage.ErrConflict) {
				continue
			}
			if err != nil {
				return nil, nil, s.storageErr(req, err)
			}
			del.obj.SetResourceVersion(strconv.FormatInt(drev, 10))
			finish.Done(true)
			req.res.WriteRules().Deleted(ctx, del.obj)
			return del.obj, nil, nil
		default:
			return nil, nil, s.storageErr(req, err)
		}
	}
}

// unchanged reports whether desired, to be stored as value over kv (which
// decodes to cur), is what is stored already: the same bytes, or the same
// object with its fields in another order (a create stores a built-in
// object as its Go type's JSON, later writes as a map's, keys sorted).
func unchanged(kv storage.KeyValue, value []byte, cur, desired *unstructured.Unstructured) bool {
	return bytes.Equal(value, kv.Value) || reflect.DeepEqual(cur.Object, desired.Object)
}

// typedPrefix begins the JSON of a built-in object encoded from its Go
// type.
var typedPrefix = []byte(`{"kind":`)

// storedAlready reports whether obj, encoded as value to be stored over kv
// (which decodes to cur), is what is stored already (unchanged). The same
// object encodes from its Go type to the same bytes, and from a map to the
// same length, so for obj of a Go type the map of value is made and
// compared only when kv, of the same length, was encoded from a map (its
// keys sorted, apiVersion first, where a Go type's TypeMeta puts kind
// first).
func storedAlready(kv storage.KeyValue, value []byte, cur *unstructured.Unstructured, obj object) (bool, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return unchanged(kv, value, cur, u), nil
	}
	switch {
	case len(value) != len(kv.Value):
		return false, nil
	case bytes.Equal(value, kv.Value):
		return true, nil
	case bytes.HasPrefix(kv.Value, typedPrefix) && bytes.HasPrefix(value, typedPrefix):
		return false, nil
	}
	u, err := registry.DecodeStored(value, kv.Revision)
	if err != nil {
		return false, err
	}
	return unchanged(kv, value, cur, u), nil
}

// prepareUpdate turns desired into what may be stored over cur, through
// the resource's rules, and returns it with the rules' Finish. typed, when
// not nil, is desired as its Go type (manageUpdate), which stands for it
// (desired may then be nil). The result is desired itself when the rules
// changed it in place.
func (s *Server) prepareUpdate(ctx context.Context, req request, cur, desired *unstructured.Unstructured, typed object) (object, registry.Finish, error) {
	res := req.res
	var written object = desired
	if typed != nil {
		written = typed
	}
	if written == nil {
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("apiserver: update of %v with no object", res.GVR()))
	}
	if rv := written.GetResourceVersion(); rv == "" {
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
	written.SetResourceVersion(cur.GetResourceVersion())
	return res.WriteRules().Update(ctx, s.write(ctx, req, "update", req.name), written, cur)
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
		err = s.updateScale(w, r, req, func(cur *unstructured.Unstructured) ([]byte, error) {
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
	out, err := s.updateObject(r.Context(), req, func(cur *unstructured.Unstructured) (object, error) {
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
