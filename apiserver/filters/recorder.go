package filters

import "net/http"

// recorder wraps a ResponseWriter to remember the status and size of the
// response for the filters outside it. It keeps the streaming a watch needs:
// Flush passes through, and Unwrap lets http.ResponseController reach the
// connection.
type recorder struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
	// user is the authenticated user name, for the request log.
	user string
}

// recorderOf returns w if it is already a recorder (filters share one per
// request), or a new recorder around it.
func recorderOf(w http.ResponseWriter) *recorder {
	if rec, ok := w.(*recorder); ok {
		return rec
	}
	return &recorder{ResponseWriter: w}
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader && code >= 200 {
		// 1xx responses are informational; the final status comes later.
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = http.StatusOK, true
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

// Flush sends buffered data to the client; watch handlers call it after
// every event.
func (r *recorder) Flush() {
	if !r.wroteHeader {
		r.status, r.wroteHeader = http.StatusOK, true
	}
	http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap returns the wrapped writer for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// code returns the status sent, 200 if the handler wrote nothing (as
// net/http does).
func (r *recorder) code() int {
	if !r.wroteHeader {
		return http.StatusOK
	}
	return r.status
}
