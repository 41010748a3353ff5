package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/storage"
)

// checkNamespace fills a body's namespace from the path and rejects a
// mismatch (400), as kube-apiserver does.
func checkNamespace(req request, u metav1.Object) error {
	if !req.res.Namespaced {
		u.SetNamespace("")
		return nil
	}
	switch ns := u.GetNamespace(); {
	case ns == "":
		u.SetNamespace(req.namespace)
	case ns != req.namespace:
		return respond.BadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, req request) error {
	if req.sub != "" || (req.res.Namespaced && req.namespace == "") {
		return methodNotAllowed(r, req)
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if req.manage, _, err = writeOptions(r, "create", ""); err != nil {
		return err
	}
	obj, err := decode.New(w, r, req.res, body)
	if err != nil {
		return err
	}
	if err := checkNamespace(req, obj); err != nil {
		return err
	}
	out, answer, err := s.create(r.Context(), req, obj)
	if err != nil {
		return err
	}
	return writeEncoded(w, r, req.res, http.StatusCreated, out, answer)
}

// create stores obj, a new object, setting what the server owns: name
// from generateName, uid, creationTimestamp, generation, reset status, and
// returns it as stored, with its JSON encoding when it has one at hand
// (for writeEncoded). obj is a built-in resource's Go type, or
// *unstructured.Unstructured for a custom resource (see newObject); its
// namespace is the request's (checkNamespace).
func (s *Server) create(ctx context.Context, req request, obj object) (object, []byte, error) {
	res := req.res
	obj.SetResourceVersion("")
	obj.SetUID("")
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetSelfLink("")
	obj = manageCreate(req, obj)
	generated := obj.GetName() == "" && obj.GetGenerateName() != ""
	if generated {
		obj.SetName(generatedBase(obj.GetGenerateName()) + nameSuffix(5))
	}
	if res.Terminating {
		return nil, nil, apierrors.NewForbidden(res.GR(), obj.GetName(), errors.New("create not allowed while custom resource definition is terminating"))
	}
	// As kube-apiserver: admission (the namespace's lifecycle) before the
	// resource's rules, which validate.
	if res.Namespaced {
		if err := s.namespaceExists(ctx, res, obj.GetNamespace(), obj.GetName()); err != nil {
			return nil, nil, err
		}
	}
	obj.SetUID(types.UID(newUID()))
	obj.SetCreationTimestamp(registry.Now())
	obj, finish, err := res.WriteRules().Create(ctx, s.write(ctx, req, "create", obj.GetName()), obj)
	defer finish.Done(false)
	if err != nil {
		return nil, nil, err
	}
	enc, err := res.EncodeOnce(obj)
	if err != nil {
		return nil, nil, encodeErr(err)
	}
	req.name = obj.GetName()
	if req.dryRun {
		// What would be stored, without a resourceVersion: none was
		// assigned. A name clash is still reported.
		if _, err := s.cfg.Storage.Get(ctx, registry.KeyFor(res, obj.GetNamespace(), obj.GetName())); err == nil {
			return nil, nil, apierrors.NewAlreadyExists(res.GR(), obj.GetName())
		} else if !errors.Is(err, storage.ErrNotFound) {
			return nil, nil, s.storageErr(req, err)
		}
		if res.AnswersStored() {
			// Converted there and back, as kube's dry run answers.
			stored, err := res.DecodeKV(storage.KeyValue{Key: registry.KeyFor(res, obj.GetNamespace(), obj.GetName()), Value: enc.Stored()})
			if err != nil {
				return nil, nil, err
			}
			stored.SetResourceVersion("")
			return stored, nil, nil
		}
		return obj, nil, nil
	}
	store := func() (int64, error) {
		key, value := registry.KeyFor(res, obj.GetNamespace(), obj.GetName()), enc.Stored()
		withdraw := s.leaveHint(res, key, value, obj)
		rev, err := s.cfg.Storage.Create(ctx, key, value)
		if err != nil {
			withdraw()
		}
		return rev, err
	}
	rev, err := store()
	// Five random characters clash now and then when thousands of objects
	// share a generateName (an RC's pods); as kube-apiserver does, a
	// generated name that is taken is drawn again rather than failing the
	// client's create with a 409 it did nothing to cause.
	for attempt := 1; generated && errors.Is(err, storage.ErrKeyExists) && attempt < generateNameAttempts; attempt++ {
		obj.SetName(generatedBase(obj.GetGenerateName()) + nameSuffix(5))
		if enc, err = res.EncodeOnce(obj); err != nil {
			return nil, nil, encodeErr(err)
		}
		req.name = obj.GetName()
		rev, err = store()
	}
	if err != nil {
		return nil, nil, s.storageErr(req, err)
	}
	finish.Done(true)
	if res.AnswersStored() {
		stored, err := res.DecodeKV(storage.KeyValue{Key: registry.KeyFor(res, obj.GetNamespace(), obj.GetName()), Value: enc.Stored(), Revision: rev})
		if err != nil {
			return nil, nil, err
		}
		return stored, nil, nil
	}
	obj.SetResourceVersion(strconv.FormatInt(rev, 10))
	return obj, enc.Answer(rev), nil
}

// encodeErr is the answer to a write whose object does not encode for
// storage: the error itself when it is an API status (a custom resource's
// conversion webhook that failed, as kube words it), else a 500.
func encodeErr(err error) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return apierrors.NewInternalError(fmt.Errorf("encode: %w", err))
}

// write describes a write of req to its resource's rules.
func (s *Server) write(ctx context.Context, req request, verb, name string) registry.Write {
	w := registry.Write{Verb: verb, Namespace: req.namespace, Name: name, Subresource: req.sub, Warn: req.warn, Admission: s.admissionChain(), DryRun: req.dryRun}
	w.Check = s.escalationCheck(req.res.GR())
	if req.internal {
		w.Admission = kube.NoAdmission
	}
	if req.manage != nil {
		w.Options = req.manage.asked
	}
	if u, ok := filters.UserFrom(ctx); ok {
		w.User = kube.User{Name: u.Name, UID: u.UID, Groups: u.Groups}
	}
	return w
}

// generateNameAttempts bounds the names drawn for one create, as
// kube-apiserver's retry of generated names does.
const generateNameAttempts = 8

// generatedBase is the part of generateName kept before the random suffix.
func generatedBase(prefix string) string {
	if len(prefix) > maxGeneratedNameLength {
		return prefix[:maxGeneratedNameLength]
	}
	return prefix
}
