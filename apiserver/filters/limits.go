package filters

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WithMaxRequestBody caps request bodies at limit bytes (0:
// DefaultMaxRequestBodyBytes, negative: no cap) with a 413 Status. The body
// is read in full before h runs, so that h sees either the whole body or no
// call at all rather than a read error it would have to translate; the cost
// is one copy of at most limit bytes. A body that has not arrived by the
// request's deadline (WithRequestTimeout) is a 408, and the connection is
// closed.
func WithMaxRequestBody(h http.Handler, limit int64) http.Handler {
	if limit == 0 {
		limit = DefaultMaxRequestBodyBytes
	}
	if limit < 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > limit {
			tooLarge(w, limit)
			return
		}
		rc := http.NewResponseController(w)
		if deadline, ok := r.Context().Deadline(); ok {
			// Not supported by every ResponseWriter (httptest's); the
			// context's deadline still bounds the handler then.
			_ = rc.SetReadDeadline(deadline)
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		r.Body.Close()
		_ = rc.SetReadDeadline(time.Time{})
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			writeStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusRequestTimeout, Reason: metav1.StatusReasonTimeout,
				Message: "the request body was not received before the request's deadline",
			}})
			return
		case err != nil:
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("error reading request body: %v", err)))
			return
		case int64(len(body)) > limit:
			tooLarge(w, limit)
			return
		}
		r.Body = bodyBytes{bytes.NewReader(body), body}
		r.ContentLength = int64(len(body))
		h.ServeHTTP(w, r)
	})
}

func tooLarge(w http.ResponseWriter, limit int64) {
	// The client may still be sending; closing the connection stops it
	// rather than making the server drain an oversized body.
	w.Header().Set("Connection", "close")
	writeStatus(w, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", limit)))
}

// WithMaxInFlight answers 429 with Retry-After: 1 when readOnly read-only
// requests or mutating writes are already being served (0: no cap on that
// kind). Long-running requests (watches) are neither capped nor counted:
// they hold their slot for minutes and would starve everything else, which
// is why kube-apiserver exempts them too; nor are requests on Leases
// (isLease). m, when not nil, gets the in-flight gauge.
func WithMaxInFlight(h http.Handler, readOnly, mutating int, m *Metrics) http.Handler {
	return WithMaxInFlightQueue(h, readOnly, mutating, InFlightQueue{}, m)
}

// InFlightQueue tells what becomes of a request over an in-flight cap.
// The zero value refuses it at once (429), as kube-apiserver's
// --max-requests-inflight filter does with API Priority and Fairness
// turned off. With Length set, it waits for a seat instead, as APF (on
// by default in kube-apiserver) queues it: seats go to the waiting
// requests in the order they came, and a request is refused only when
// Length requests of its kind are waiting already, or when it has waited
// Wait, or its context ends (the request timeout, or a client that gave
// up), first. A client's burst of writes past the cap then costs the
// time the seats take to free, not the Retry-After second a refusal
// makes a client-go client wait.
type InFlightQueue struct {
	// Length caps the requests of one kind (read-only, mutating) waiting
	// at once; 0 or less: none wait.
	Length int
	// Wait bounds how long one request waits; DefaultInFlightQueueWait
	// when not positive.
	Wait time.Duration
}

// Defaults of InFlightQueue after kube-apiserver's APF: one client's
// flow is spread over handSize (6) queues of queueLengthLimit (50)
// requests, and a request waits at most a quarter of the request timeout
// (60 s) for its seat.
const (
	DefaultInFlightQueueLength = 6 * 50
	DefaultInFlightQueueWait   = DefaultRequestTimeout / 4
)

// PriorityAndFairnessQueue is the queue of those defaults, what
// kube-apiserver's API Priority and Fairness gives one flow.
var PriorityAndFairnessQueue = InFlightQueue{Length: DefaultInFlightQueueLength, Wait: DefaultInFlightQueueWait}

// WithMaxInFlightQueue is WithMaxInFlight with requests over a cap
// handled as q says.
func WithMaxInFlightQueue(h http.Handler, readOnly, mutating int, q InFlightQueue, m *Metrics) http.Handler {
	roSeats, mutSeats := newSeats(readOnly, q), newSeats(mutating, q)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri := requestInfoOf(r)
		if ri.IsLongRunning() || isLease(ri) {
			h.ServeHTTP(w, r)
			return
		}
		seats, kind := mutSeats, kindMutating
		if ri.IsReadOnly() {
			seats, kind = roSeats, kindReadOnly
		}
		if seats != nil {
			if !seats.acquire(r.Context()) {
				writeStatus(w, apierrors.NewTooManyRequests("Too many requests, please try again later.", 1))
				return
			}
			defer seats.release()
		}
		if m != nil {
			g := m.inflight.WithLabelValues(kind)
			g.Inc()
			defer g.Dec()
		}
		h.ServeHTTP(w, r)
	})
}

// isLease tells the requests on Leases, which neither cap holds: they are
// leader election's renewals and nodes' heartbeats, few and small, that
// must not wait behind a burst of other writes (a replica whose renewal
// waits past its deadline stops working), as kube-apiserver's API
// Priority and Fairness serves them at priority levels of their own
// (leader-election, node-high).
func isLease(ri RequestInfo) bool {
	return ri.IsResourceRequest && ri.APIGroup == "coordination.k8s.io" && ri.Resource == "leases"
}

// seats are the in-flight slots of one kind of request, with the queue of
// those waiting for one.
type seats struct {
	slots      chan struct{}
	maxWaiting int64
	wait       time.Duration
	waiting    atomic.Int64
}

// newSeats returns n seats queued as q says, or nil for no cap (n <= 0).
func newSeats(n int, q InFlightQueue) *seats {
	if n <= 0 {
		return nil
	}
	s := &seats{slots: make(chan struct{}, n), maxWaiting: int64(max(q.Length, 0)), wait: q.Wait}
	if s.wait <= 0 {
		s.wait = DefaultInFlightQueueWait
	}
	return s
}

// acquire takes a seat, waiting for one if the queue has room; it reports
// false when the request is to be refused. Blocked senders on a channel
// are woken in the order they blocked, so seats go first come, first
// served.
func (s *seats) acquire(ctx context.Context) bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	if s.waiting.Add(1) > s.maxWaiting {
		s.waiting.Add(-1)
		return false
	}
	defer s.waiting.Add(-1)
	t := time.NewTimer(s.wait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

func (s *seats) release() { <-s.slots }

// Values of the request_kind label of the in-flight gauge, as in
// kube-apiserver.
const (
	kindReadOnly = "readOnly"
	kindMutating = "mutating"
)

// WithLongRunningShutdown cancels the context of every long-running request
// when shutdown ends, so that watches return and a graceful server shutdown
// can complete; other requests are left to finish.
func WithLongRunningShutdown(h http.Handler, shutdown context.Context) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !requestInfoOf(r).IsLongRunning() {
			h.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		stop := context.AfterFunc(shutdown, func() { cancel(errServerShutdown) })
		defer stop()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

var errServerShutdown = errors.New("server shutting down")

// WithRequestTimeout bounds every request but watches: its context ends
// after timeout, or after its timeout parameter when that is shorter (400
// when it is not a duration), as kube-apiserver's --request-timeout does.
// What the handler does with a context that ended is its own answer (a 504
// Timeout for a storage call cut short).
func WithRequestTimeout(h http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requestInfoOf(r).IsLongRunning() {
			h.ServeHTTP(w, r)
			return
		}
		d := timeout
		if v := r.URL.Query().Get("timeout"); v != "" {
			asked, err := time.ParseDuration(v)
			if err != nil {
				writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("invalid timeout specified in the request URL: %v", err)))
				return
			}
			if asked > 0 && asked < d {
				d = asked
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}
