package respond

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/listwatch/listwatch/storage"
)

func TestStatusCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		body string
	}{
		{ErrNoHandler, http.StatusNotFound, "404 page not found\n"},
		{NotFound(), http.StatusNotFound, `"reason":"NotFound"`},
		{MethodNotAllowed(), http.StatusMethodNotAllowed, `"reason":"MethodNotAllowed"`},
		{fmt.Errorf("list: %w", storage.ErrCompacted), http.StatusGone, `"reason":"Expired"`},
		{storage.ErrFutureRevision, http.StatusGatewayTimeout, `"reason":"ResourceVersionTooLarge"`},
		{fmt.Errorf("put /registry/x: %w", fmt.Errorf("disk full")), http.StatusInternalServerError, `"message":"Internal error occurred: disk full"`},
		{apierrors.NewTooManyRequests("busy", 3), http.StatusTooManyRequests, `"retryAfterSeconds":3`},
	} {
		w := httptest.NewRecorder()
		Status(w, tc.err)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("Status(%v) = %d %s, want %d with %s", tc.err, w.Code, w.Body, tc.code, tc.body)
		}
	}
	w := httptest.NewRecorder()
	Status(w, apierrors.NewTooManyRequests("busy", 3))
	if got := w.Header().Get("Retry-After"); got != "3" {
		t.Errorf("Retry-After = %q, want 3", got)
	}
}

func TestReadBodyOverItsLimit(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", 10)))
	r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 4)
	if _, err := ReadBody(r); !apierrors.IsRequestEntityTooLargeError(err) {
		t.Errorf("ReadBody = %v, want 413", err)
	}
}
