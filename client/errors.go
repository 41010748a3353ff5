package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatusError is an API server's refusal: the Status it sent, or one made
// from the HTTP code when the body was not a Status. It implements
// k8s.io/apimachinery/pkg/api/errors.APIStatus, so the helpers of that
// package (IsNotFound, IsConflict, IsResourceExpired, ...) recognize it,
// also when wrapped.
type StatusError struct {
	// ErrStatus is what the server said.
	ErrStatus metav1.Status
	// Verb and URL name the request that failed; both may be empty for an
	// error that arrived inside a watch stream.
	Verb, URL string
	// retryAfter is the Retry-After header, when the server sent one.
	retryAfter time.Duration
}

// Status returns the server's Status, for apierrors.APIStatus.
func (e *StatusError) Status() metav1.Status { return e.ErrStatus }

// Error describes the failure with the request it answered.
func (e *StatusError) Error() string {
	msg := e.ErrStatus.Message
	if msg == "" {
		msg = string(e.ErrStatus.Reason)
	}
	if msg == "" {
		msg = "unknown error"
	}
	tail := fmt.Sprintf(" (%d %s)", e.ErrStatus.Code, e.ErrStatus.Reason)
	if e.Verb == "" {
		return msg + tail
	}
	return e.Verb + " " + e.URL + ": " + msg + tail
}

// RetryAfter reports how long the server asked the client to wait before
// trying again, from the Status details or the Retry-After header.
func (e *StatusError) RetryAfter() (time.Duration, bool) {
	if d := e.ErrStatus.Details; d != nil && d.RetryAfterSeconds > 0 {
		return time.Duration(d.RetryAfterSeconds) * time.Second, true
	}
	if e.retryAfter > 0 {
		return e.retryAfter, true
	}
	return 0, false
}

// retryAfterSeconds reads a Retry-After header given in seconds (the form
// API servers send; an HTTP date is not read).
func retryAfterSeconds(h http.Header) (int, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	s, err := strconv.Atoi(v)
	if err != nil || s < 0 {
		return 0, false
	}
	return s, true
}

// maxErrorBody bounds how much of an error body is read and quoted.
const maxErrorBody = 64 << 10

// newStatusError builds the error for a response with an unsuccessful code
// whose body (at most maxErrorBody bytes of it) is body.
func newStatusError(verb, url string, code int, header http.Header, body []byte) *StatusError {
	e := &StatusError{Verb: verb, URL: url}
	if s, ok := parseStatus(header.Get("Content-Type"), body); ok {
		e.ErrStatus = *s
		if e.ErrStatus.Code == 0 {
			e.ErrStatus.Code = int32(code)
		}
		if e.ErrStatus.Reason == "" {
			e.ErrStatus.Reason = reasonForCode(code)
		}
	} else {
		e.ErrStatus = metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    int32(code),
			Reason:  reasonForCode(code),
			Message: messageForBody(code, body),
		}
	}
	if s, ok := retryAfterSeconds(header); ok && s > 0 {
		e.retryAfter = time.Duration(s) * time.Second
		if e.ErrStatus.Details == nil {
			e.ErrStatus.Details = &metav1.StatusDetails{}
		}
		if e.ErrStatus.Details.RetryAfterSeconds == 0 {
			e.ErrStatus.Details.RetryAfterSeconds = int32(min(s, 1<<30))
		}
	}
	return e
}

// parseStatus decodes body as a Status, in JSON or in the Kubernetes
// protobuf envelope. It reports false when the body is not a Status.
func parseStatus(contentType string, body []byte) (*metav1.Status, bool) {
	if isProtobuf(contentType) || bytes.HasPrefix(body, protoMagic) {
		raw, kind, err := unwrapEnvelope(body)
		if err != nil || kind.Kind != "Status" {
			return nil, false
		}
		s := new(metav1.Status)
		if err := s.Unmarshal(raw); err != nil {
			return nil, false
		}
		return s, true
	}
	var s metav1.Status
	if err := json.Unmarshal(body, &s); err != nil || s.Kind != "Status" {
		return nil, false
	}
	return &s, true
}

// messageForBody quotes the start of a body that was not a Status.
func messageForBody(code int, body []byte) string {
	text := strings.TrimSpace(string(body))
	if len(text) > 512 {
		text = text[:512] + "..."
	}
	if text == "" {
		return fmt.Sprintf("the server answered %d %s", code, http.StatusText(code))
	}
	return fmt.Sprintf("the server answered %d %s: %s", code, http.StatusText(code), strconv.Quote(text))
}

// reasonForCode is the reason an API server gives with each HTTP code, for
// bodies that are not a Status.
func reasonForCode(code int) metav1.StatusReason {
	switch code {
	case http.StatusBadRequest:
		return metav1.StatusReasonBadRequest
	case http.StatusUnauthorized:
		return metav1.StatusReasonUnauthorized
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	case http.StatusNotFound:
		return metav1.StatusReasonNotFound
	case http.StatusMethodNotAllowed:
		return metav1.StatusReasonMethodNotAllowed
	case http.StatusNotAcceptable:
		return metav1.StatusReasonNotAcceptable
	case http.StatusConflict:
		return metav1.StatusReasonConflict
	case http.StatusGone:
		return metav1.StatusReasonGone
	case http.StatusRequestEntityTooLarge:
		return metav1.StatusReasonRequestEntityTooLarge
	case http.StatusUnsupportedMediaType:
		return metav1.StatusReasonUnsupportedMediaType
	case http.StatusUnprocessableEntity:
		return metav1.StatusReasonInvalid
	case http.StatusTooManyRequests:
		return metav1.StatusReasonTooManyRequests
	case http.StatusInternalServerError:
		return metav1.StatusReasonInternalError
	case http.StatusServiceUnavailable:
		return metav1.StatusReasonServiceUnavailable
	case http.StatusGatewayTimeout:
		return metav1.StatusReasonTimeout
	}
	return metav1.StatusReasonUnknown
}
