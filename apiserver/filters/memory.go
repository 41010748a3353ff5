package filters

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// DefaultMaxRequestMemory is Options.MaxRequestMemory's default: what the
// writes being served at once are estimated to hold, together, at most.
const DefaultMaxRequestMemory = 512 << 20

// MemoryPerValue is what the server is estimated to hold, at its peak,
// for each value of a write's body (MemoryEstimate): the decoded object,
// the copies the rules and admission make of it, and above all the field
// manager's sets of field paths, a few per leaf. Measured: eight
// server-side applies in parallel of a custom resource with 50,000 keys
// (0.7 MB each) grew the server by 727 MB, about 1.8 KiB per value.
const MemoryPerValue = 2 << 10

// MemoryEstimate is what a write whose body is b is estimated to hold at
// its peak: MemoryPerValue for each value the body may hold, counted as
// its ':' and ',' bytes (an upper bound for JSON and YAML alike, cheap
// enough to count on every write), and the body itself twice.
func MemoryEstimate(b []byte) int64 {
	values := 1 + bytes.Count(b, []byte{':'}) + bytes.Count(b, []byte{','})
	return int64(values)*MemoryPerValue + 2*int64(len(b))
}

// WithMemoryBudget makes writes whose bodies are together estimated
// (MemoryEstimate) to need more than budget bytes wait for one another,
// first come, first served, as q queues requests over the in-flight caps:
// a write waits at most q.Wait (or its context), behind at most q.Length
// others, and is then refused with a 429. A write estimated above the
// whole budget runs alone. The cost of a write grows with its values, not
// its bytes — a 0.7 MB custom resource of 50,000 small fields costs about
// 100 MB to apply —, so without this a few clients could make the server
// take gigabytes at once; kube-apiserver has no such bound. budget 0
// means DefaultMaxRequestMemory, a negative one no bound. Reads and
// requests without a body are not counted; the body must have been read
// already (WithMaxRequestBody).
func WithMemoryBudget(h http.Handler, budget int64, q InFlightQueue) http.Handler {
	if budget == 0 {
		budget = DefaultMaxRequestMemory
	}
	if budget < 0 {
		return h
	}
	mb := &memoryBudget{sem: semaphore.NewWeighted(budget), size: budget, maxWaiting: int64(max(q.Length, 0)), wait: q.Wait}
	if mb.wait <= 0 {
		mb.wait = DefaultInFlightQueueWait
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := r.Body.(interface{ Bytes() []byte })
		if !ok || requestInfoOf(r).IsReadOnly() {
			h.ServeHTTP(w, r)
			return
		}
		need := min(MemoryEstimate(body.Bytes()), mb.size)
		if !mb.acquire(r.Context(), need) {
			writeStatus(w, apierrors.NewTooManyRequests("Too many requests, please try again later.", 1))
			return
		}
		defer mb.sem.Release(need)
		h.ServeHTTP(w, r)
	})
}

// memoryBudget is the semaphore of WithMemoryBudget, with the count of
// writes waiting on it.
type memoryBudget struct {
	sem        *semaphore.Weighted
	size       int64
	maxWaiting int64
	wait       time.Duration
	waiting    atomic.Int64
}

// acquire takes need bytes of the budget, waiting as WithMemoryBudget
// says; false: the write is to be refused. The semaphore serves its
// waiters in order, so a large write is not starved by small ones.
func (mb *memoryBudget) acquire(ctx context.Context, need int64) bool {
	if mb.sem.TryAcquire(need) {
		return true
	}
	if mb.waiting.Add(1) > mb.maxWaiting {
		mb.waiting.Add(-1)
		return false
	}
	defer mb.waiting.Add(-1)
	ctx, cancel := context.WithTimeout(ctx, mb.wait)
	defer cancel()
	return mb.sem.Acquire(ctx, need) == nil
}

// bodyBytes is the body WithMaxRequestBody has read, which
// WithMemoryBudget reads again without copying it.
type bodyBytes struct {
	*bytes.Reader
	b []byte
}

func (b bodyBytes) Bytes() []byte { return b.b }
func (bodyBytes) Close() error    { return nil }

var _ io.ReadCloser = bodyBytes{}
