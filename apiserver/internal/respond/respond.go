// Package respond writes the answers every part of the API server shares:
// Kubernetes Status objects for errors, with the HTTP code kube-apiserver
// gives each, and plain JSON documents. It also reads request bodies, so
// that a body over its limit is answered alike everywhere.
package respond

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/storage"
)

// ErrNoHandler is a path that nothing in kube-apiserver serves: neither a
// built-in group version nor a custom resource's (an unknown group, or a
// version of one that is not served). Its answer is not a Status.
var ErrNoHandler = errors.New("404 page not found")

// Status writes err as a Kubernetes Status object with the HTTP code the
// Status carries: errors built with k8s.io/apimachinery/pkg/api/errors
// keep theirs, storage errors map to 404/409/410/504, ErrNoHandler is Go's
// plain-text 404, and anything else is a 500 InternalError.
func Status(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNoHandler) {
		// Go's plain-text 404, as kube-apiserver's last handler answers.
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	st := StatusOf(err)
	StatusObject(w, &st)
}

// StatusObject writes st with the HTTP code it carries.
func StatusObject(w http.ResponseWriter, st *metav1.Status) {
	StatusCode(w, int(st.Code), st)
}

// StatusCode writes st with HTTP code code, which st may not carry:
// kube-apiserver's Success Status of a delete has no code.
func StatusCode(w http.ResponseWriter, code int, st *metav1.Status) {
	st.Kind, st.APIVersion = "Status", "v1"
	body, err := json.Marshal(st)
	if err != nil {
		// A Status always marshals; keep the code even if not.
		body = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if st.Code == http.StatusTooManyRequests && st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

// JSON writes v as a JSON document with HTTP code code; a v that does not
// marshal is answered as a 500 Status.
func JSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		Status(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

// StatusOf turns any error into the Status a client should see.
func StatusOf(err error) metav1.Status {
	var api apierrors.APIStatus
	if errors.As(err, &api) {
		st := api.Status()
		if st.Code == 0 {
			st.Code = http.StatusInternalServerError
		}
		if st.Status == "" {
			st.Status = metav1.StatusFailure
		}
		return st
	}
	var se error
	switch {
	case errors.Is(err, storage.ErrCompacted):
		se = apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %v", err))
	case errors.Is(err, storage.ErrFutureRevision):
		se = tooLargeRV(err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		// The request's deadline (filters.WithRequestTimeout), worded as
		// kube-apiserver's timeout filter words it.
		se = apierrors.NewTimeoutError("request did not complete within requested timeout - "+context.DeadlineExceeded.Error(), 0)
	case errors.Is(err, storage.ErrConflict):
		se = apierrors.NewConflict(metav1.SchemeGroupVersion.WithResource("").GroupResource(), "", err)
	case errors.Is(err, storage.ErrTooLarge):
		// kube-apiserver answers etcd's refusal with a 500; the request is
		// what is wrong, and a client should not retry it.
		se = ObjectTooLarge()
	default:
		se = apierrors.NewInternalError(errors.New(innermost(err)))
	}
	return se.(apierrors.APIStatus).Status()
}

// innermost is the text of err's innermost cause: a storage backend's own
// message, without the storage keys and operations the server's wrapping
// adds, which are not the client's business.
func innermost(err error) string {
	for next := errors.Unwrap(err); next != nil; next = errors.Unwrap(err) {
		err = next
	}
	return err.Error()
}

// tooLargeRV is kube-apiserver's answer to a resourceVersion newer than any
// it has seen: 504 with the ResourceVersionTooLarge cause client-go checks.
func tooLargeRV(msg string) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %s", msg), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return err
}

// NewStatus is a Failure Status error with no details about an object.
func NewStatus(code int32, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Message: msg,
		Reason:  reason,
		Details: &metav1.StatusDetails{},
		Code:    code,
	}}
}

// Unreasoned is kube-apiserver's answer to an error that is no Status: a
// 500 with the error's text, no reason and no details.
func Unreasoned(err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error(),
	}}
}

// NotFound is kube-apiserver's 404 Status for a path it routes but that
// names nothing it serves.
func NotFound() error {
	return NewStatus(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
}

// MethodNotAllowed is the 405 Status for a method a path does not serve.
func MethodNotAllowed() error {
	return NewStatus(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		"the server does not allow this method on the requested resource")
}

// ReadBody reads r's body: a body over a limit set on it
// (http.MaxBytesReader) is a 413, any other failure a 400.
func ReadBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, apierrors.NewRequestEntityTooLargeError(err.Error())
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("reading the request body: %v", err))
	}
	return body, nil
}

// The media types of bodies and answers.
const (
	MediaJSON     = "application/json"
	MediaYAML     = "application/yaml"
	MediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// ObjectTooLarge is the 413 answering a write of an object over
// storage.MaxValueBytes.
func ObjectTooLarge() error {
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the object is over the storage limit of %d bytes", storage.MaxValueBytes))
}

// Warning adds a Warning header carrying msg, as kube-apiserver sends the
// warnings of its decoders and strategies, once however often it is
// given (kube's warning recorder drops repeats too); nothing when w is
// nil.
func Warning(w http.ResponseWriter, msg string) {
	if w == nil {
		return
	}
	v := "299 - " + strconv.Quote(msg)
	if slices.Contains(w.Header().Values("Warning"), v) {
		return
	}
	w.Header().Add("Warning", v)
}

// BadRequest is a 400 BadRequest with a formatted message.
func BadRequest(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}
