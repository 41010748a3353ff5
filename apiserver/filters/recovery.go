package filters

import (
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// WithPanicRecovery turns a panic in h into a 500 Status and an error log
// with the stack, instead of a dropped connection and a crashed process.
// When the response has already started the connection is aborted (the
// client sees a truncated response, never a complete-looking one).
// http.ErrAbortHandler passes through: it is how a handler asks for that.
func WithPanicRecovery(h http.Handler, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := recorderOf(w)
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			if rec.wroteHeader {
				panic(http.ErrAbortHandler)
			}
			writeStatus(rec, apierrors.NewInternalError(errors.New("this request caused the server to panic; look in its log for details")))
		}()
		h.ServeHTTP(rec, r)
	})
}
