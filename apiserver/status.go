package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/storage"
)

// WriteStatus writes err as a Kubernetes Status object with the HTTP code
// the Status carries: errors built with k8s.io/apimachinery/pkg/api/errors
// keep theirs, storage errors map to 404/409/410/504, and anything else is
// a 500 InternalError.
func WriteStatus(w http.ResponseWriter, err error) {
	if errors.Is(err, errNoHandler) {
		// Go's plain-text 404, as kube-apiserver's last handler answers.
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	st := statusOf(err)
	writeStatusObject(w, &st)
}

// errNoHandler is a path that nothing in kube-apiserver serves: neither a
// built-in group version nor a custom resource's (an unknown group, or a
// version of one that is not served). Its answer is not a Status.
var errNoHandler = errors.New("404 page not found")

// writeStatusObject writes st with the HTTP code it carries.
func writeStatusObject(w http.ResponseWriter, st *metav1.Status) {
	writeStatusCode(w, int(st.Code), st)
}

// writeStatusCode writes st with HTTP code code, which st may not carry:
// kube-apiserver's Success Status of a delete has no code.
func writeStatusCode(w http.ResponseWriter, code int, st *metav1.Status) {
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

// statusOf turns any error into the Status a client should see.
func statusOf(err error) metav1.Status {
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
		se = apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the object is over the storage limit of %d bytes", storage.MaxValueBytes))
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

// badRequest is a 400 with a formatted message.
func badRequest(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}

// newStatus is a Failure Status error with no details about an object.
func newStatus(code int32, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Message: msg,
		Reason:  reason,
		Details: &metav1.StatusDetails{},
		Code:    code,
	}}
}
