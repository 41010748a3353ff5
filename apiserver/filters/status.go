package filters

import (
	"encoding/json"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// writeStatus writes err's Status as JSON with its HTTP code, and the
// Retry-After header a 429 asks for.
//
// The filters sit below the apiserver package and so cannot use its
// WriteStatus; they only ever reject with apimachinery StatusErrors, which
// need none of its error mapping.
func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	body, jerr := json.Marshal(st)
	if jerr != nil {
		// A Status always marshals; keep the code even if not.
		body = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		h.Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(append(body, '\n'))
}
