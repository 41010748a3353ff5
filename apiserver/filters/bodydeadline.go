package filters

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// WithBodyDeadline bounds by the request deadline (timeout after the
// request came; not positive: no bound) how long a connection waits for a
// request body, whoever reads it, so that every request is answered or its
// connection closed by then.
//
// Go's net/http server reads what is left of a body nobody read (up to
// 256 KiB) before it writes the response, so that the connection can carry
// the next request. A request refused before its body is read (a 401 of
// authentication, a 403 of authorization, a 400 for a bad timeout
// parameter) from a client that announced a body and never sends it would
// so be answered never and hold its connection for good: kube-apiserver's
// behaviour. Here the connection's read deadline is the request deadline
// when the request comes (watches excepted: their connection reads nothing
// more once their handler runs) and again when its handler returns with
// the body unread, watches included: at the deadline that read fails, and
// net/http then writes the answer with Connection: close and closes the
// connection. A client that sends its body gets its answer as soon as it
// has, on a connection it may reuse. WithMaxRequestBody reads bodies under
// the request's own (maybe shorter) deadline and clears it once read.
func WithBodyDeadline(h http.Handler, timeout time.Duration) http.Handler {
	if timeout <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		deadline := time.Now().Add(timeout)
		rc := http.NewResponseController(w)
		if !requestInfoOf(r).IsLongRunning() {
			// Not supported by every ResponseWriter (httptest's).
			_ = rc.SetReadDeadline(deadline)
		}
		body := &eofBody{ReadCloser: r.Body}
		r = r.WithContext(r.Context()) // a shallow copy, not the caller's request
		r.Body = body
		defer func() {
			if !body.eof.Load() {
				_ = rc.SetReadDeadline(deadline)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// eofBody is a request body that tells whether it was read to its end.
type eofBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof.Store(true)
	}
	return n, err
}
