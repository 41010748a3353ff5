package filters

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// seatHarness serves writes through Chain with a mutating cap of two and
// a handler that holds each request until it is released, recording the
// order in which requests entered and the code each was answered.
type seatHarness struct {
	h       http.Handler
	release chan struct{}

	mu      sync.Mutex
	entered []string
	codes   map[string]int
}

func newSeatHarness(q InFlightQueue) *seatHarness {
	return newHarness(Options{MaxMutatingRequestsInFlight: 2, InFlightQueue: q})
}

// newHarness is newSeatHarness with the filters of o.
func newHarness(o Options) *seatHarness {
	s := &seatHarness{release: make(chan struct{}), codes: map[string]int{}}
	held := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.entered = append(s.entered, r.URL.Query().Get("id"))
		s.mu.Unlock()
		<-s.release
		w.WriteHeader(http.StatusOK)
	})
	s.h = Chain(held, o)
	return s
}

// send starts a write named id with ctx and returns at once.
func (s *seatHarness) send(ctx context.Context, id string) { s.sendBody(ctx, "POST", id, "") }

// sendBody starts a request named id with ctx and body and returns at
// once.
func (s *seatHarness) sendBody(ctx context.Context, method, id, body string) {
	go func() {
		rec := httptest.NewRecorder()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req := httptest.NewRequestWithContext(ctx, method, "/api/v1/namespaces/default/configmaps?id="+id, rd)
		s.h.ServeHTTP(rec, req)
		s.mu.Lock()
		s.codes[id] = rec.Code
		s.mu.Unlock()
	}()
	// Requests queue in the order they are sent.
	synctest.Wait()
}

// releaseOne lets one held request finish.
func (s *seatHarness) releaseOne() {
	s.release <- struct{}{}
	synctest.Wait()
}

func (s *seatHarness) state() (entered []string, codes map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.entered), func() map[string]int {
		out := map[string]int{}
		for k, v := range s.codes {
			out[k] = v
		}
		return out
	}()
}

func TestInFlightQueue(t *testing.T) {
	tests := []struct {
		name string
		q    InFlightQueue
		run  func(t *testing.T, s *seatHarness)
	}{
		{"no queue: a write over the cap is refused at once", InFlightQueue{}, func(t *testing.T, s *seatHarness) {
			s.send(t.Context(), "a")
			s.send(t.Context(), "b")
			s.send(t.Context(), "c")
			if _, codes := s.state(); codes["c"] != http.StatusTooManyRequests {
				t.Fatalf("codes %v, want c refused with 429", codes)
			}
			s.releaseOne()
			s.releaseOne()
		}},
		{"writes over the cap wait and take freed seats in the order they came", InFlightQueue{Length: 2, Wait: time.Minute}, func(t *testing.T, s *seatHarness) {
			for _, id := range []string{"a", "b", "c", "d"} {
				s.send(t.Context(), id)
			}
			if entered, codes := s.state(); !slices.Equal(entered, []string{"a", "b"}) || len(codes) != 0 {
				t.Fatalf("entered %v, answered %v; want a and b served, c and d waiting", entered, codes)
			}
			s.releaseOne()
			if entered, _ := s.state(); !slices.Equal(entered, []string{"a", "b", "c"}) {
				t.Fatalf("after one seat freed, entered %v; want c next", entered)
			}
			s.releaseOne()
			s.releaseOne()
			s.releaseOne()
			entered, codes := s.state()
			if !slices.Equal(entered, []string{"a", "b", "c", "d"}) {
				t.Fatalf("entered %v, want a, b, c, d", entered)
			}
			for _, id := range entered {
				if codes[id] != http.StatusOK {
					t.Errorf("%s answered %d, want 200", id, codes[id])
				}
			}
		}},
		{"a write is refused when the queue is full", InFlightQueue{Length: 1, Wait: time.Minute}, func(t *testing.T, s *seatHarness) {
			for _, id := range []string{"a", "b", "c", "d"} {
				s.send(t.Context(), id)
			}
			if _, codes := s.state(); len(codes) != 1 || codes["d"] != http.StatusTooManyRequests {
				t.Fatalf("answered %v, want only d refused (c waits)", codes)
			}
			for range 3 {
				s.releaseOne()
			}
			if _, codes := s.state(); codes["c"] != http.StatusOK {
				t.Fatalf("answered %v, want c served", codes)
			}
		}},
		{"a write that waited its bound is refused", InFlightQueue{Length: 5, Wait: 10 * time.Second}, func(t *testing.T, s *seatHarness) {
			s.send(t.Context(), "a")
			s.send(t.Context(), "b")
			s.send(t.Context(), "c")
			time.Sleep(9 * time.Second)
			synctest.Wait()
			if _, codes := s.state(); len(codes) != 0 {
				t.Fatalf("answered %v before the wait bound", codes)
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
			if _, codes := s.state(); codes["c"] != http.StatusTooManyRequests {
				t.Fatalf("answered %v, want c refused after 10s", codes)
			}
			s.releaseOne()
			s.releaseOne()
		}},
		{"a waiting write whose client gives up is refused and frees its place", InFlightQueue{Length: 1, Wait: time.Minute}, func(t *testing.T, s *seatHarness) {
			s.send(t.Context(), "a")
			s.send(t.Context(), "b")
			ctx, cancel := context.WithCancel(t.Context())
			s.send(ctx, "c")
			cancel()
			synctest.Wait()
			s.send(t.Context(), "d")
			if _, codes := s.state(); len(codes) != 1 || codes["c"] != http.StatusTooManyRequests {
				t.Fatalf("answered %v, want c refused and d waiting", codes)
			}
			for range 3 {
				s.releaseOne()
			}
			if entered, _ := s.state(); !slices.Equal(entered, []string{"a", "b", "d"}) {
				t.Fatalf("entered %v, want a, b, d", entered)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSeatHarness(tt.q)
				tt.run(t, s)
				synctest.Wait()
				entered, codes := s.state()
				if served := countCode(codes, http.StatusOK); served != len(entered) {
					t.Errorf("%d served of %d entered: %v", served, len(entered), codes)
				}
			})
		})
	}
}

func countCode(codes map[string]int, code int) int {
	n := 0
	for _, c := range codes {
		if c == code {
			n++
		}
	}
	return n
}

// TestInFlightQueueReadsApart: reads and writes queue for seats of their
// own kind.
func TestInFlightQueueReadsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }),
			Options{MaxRequestsInFlight: 1, MaxMutatingRequestsInFlight: 1, InFlightQueue: InFlightQueue{Length: 1}})
		codes := make(chan string, 4)
		for _, req := range []struct{ method, path string }{
			{"POST", "/api/v1/namespaces/default/configmaps"},
			{"GET", "/api/v1/namespaces/default/configmaps"},
			{"POST", "/api/v1/namespaces/default/configmaps"},
			{"GET", "/api/v1/namespaces/default/configmaps"},
		} {
			go func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(req.method, req.path, nil))
				codes <- fmt.Sprint(req.method, " ", rec.Code)
			}()
			synctest.Wait()
		}
		// One of each kind served, one of each waiting: nobody refused.
		select {
		case c := <-codes:
			t.Fatalf("answered %s while seats of each kind were free or queued", c)
		default:
		}
		close(release)
		got := map[string]int{}
		for range 4 {
			got[<-codes]++
		}
		if got["POST 200"] != 2 || got["GET 200"] != 2 {
			t.Fatalf("answers %v, want every request served", got)
		}
	})
}

// bodyOf is a JSON object of n values.
func bodyOf(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	return b.String() + "}"
}

func TestMemoryEstimate(t *testing.T) {
	for _, tt := range []struct {
		body string
		want int64
	}{
		{`{}`, MemoryPerValue + 4},
		{`{"a":1}`, 2*MemoryPerValue + 14},
		{bodyOf(1000), 2000 * MemoryPerValue},
	} {
		if got := MemoryEstimate([]byte(tt.body)); got < tt.want || got > tt.want+2*int64(len(tt.body)) {
			t.Errorf("MemoryEstimate(%.20q…) = %d, want %d plus at most twice its %d bytes", tt.body, got, tt.want, len(tt.body))
		}
	}
}

// TestMemoryBudget: writes wait for one another when their estimates
// together exceed the budget, in the order they came; one larger than
// the budget runs alone; reads are not counted.
func TestMemoryBudget(t *testing.T) {
	big, small := bodyOf(600), bodyOf(1)
	budget := 10 * MemoryEstimate([]byte(big)) / 6 // room for one big write and a few small ones
	queue := InFlightQueue{Length: 10, Wait: time.Minute}
	tests := []struct {
		name string
		q    InFlightQueue
		run  func(t *testing.T, s *seatHarness)
	}{
		{"writes over the budget wait in the order they came", queue, func(t *testing.T, s *seatHarness) {
			s.sendBody(t.Context(), "POST", "a", big)
			s.sendBody(t.Context(), "POST", "b", big)
			s.sendBody(t.Context(), "PUT", "c", small)
			// c would fit beside a, but waits behind b.
			if entered, _ := s.state(); !slices.Equal(entered, []string{"a"}) {
				t.Fatalf("entered %v; want a alone, b waiting for room and c behind it", entered)
			}
			s.releaseOne()
			// b and c are let in together; which enters the handler first
			// is up to the scheduler.
			if entered, _ := s.state(); len(entered) != 3 || !slices.Contains(entered, "b") || !slices.Contains(entered, "c") {
				t.Fatalf("entered %v; want b and c once a was done", entered)
			}
			s.releaseOne()
			s.releaseOne()
		}},
		{"a write larger than the budget runs alone", queue, func(t *testing.T, s *seatHarness) {
			s.sendBody(t.Context(), "POST", "huge", bodyOf(5000))
			s.sendBody(t.Context(), "PATCH", "small", small)
			s.sendBody(t.Context(), "GET", "read", "")
			if entered, _ := s.state(); !slices.Equal(entered, []string{"huge", "read"}) {
				t.Fatalf("entered %v; want the huge write and the read", entered)
			}
			s.releaseOne()
			s.releaseOne()
			if entered, _ := s.state(); !slices.Equal(entered, []string{"huge", "read", "small"}) {
				t.Fatalf("entered %v; want the small write after the huge one", entered)
			}
			s.releaseOne()
		}},
		{"no queue: a write over the budget is refused at once", InFlightQueue{}, func(t *testing.T, s *seatHarness) {
			s.sendBody(t.Context(), "POST", "a", big)
			s.sendBody(t.Context(), "POST", "b", big)
			if _, codes := s.state(); codes["b"] != http.StatusTooManyRequests {
				t.Fatalf("codes %v, want b refused with 429", codes)
			}
			s.releaseOne()
		}},
		{"a write that waited its bound is refused", InFlightQueue{Length: 10, Wait: 10 * time.Second}, func(t *testing.T, s *seatHarness) {
			s.sendBody(t.Context(), "POST", "a", big)
			s.sendBody(t.Context(), "POST", "b", big)
			time.Sleep(11 * time.Second)
			synctest.Wait()
			if _, codes := s.state(); codes["b"] != http.StatusTooManyRequests {
				t.Fatalf("codes %v, want b refused after 10s", codes)
			}
			s.releaseOne()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newHarness(Options{MaxRequestMemory: budget, InFlightQueue: tt.q})
				tt.run(t, s)
				synctest.Wait()
				entered, codes := s.state()
				if served := countCode(codes, http.StatusOK); served != len(entered) {
					t.Errorf("%d served of %d entered: %v", served, len(entered), codes)
				}
			})
		})
	}
}

// TestInFlightLeasesApart: requests on Leases are served while the writes'
// seats are all taken, as kube-apiserver's APF serves leader election and
// node heartbeats at their own priority levels.
func TestInFlightLeasesApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSeatHarness(InFlightQueue{Length: 5, Wait: time.Minute})
		s.send(t.Context(), "a")
		s.send(t.Context(), "b")
		s.send(t.Context(), "c")
		lease := func(id string) {
			go func() {
				rec := httptest.NewRecorder()
				req := httptest.NewRequestWithContext(t.Context(), "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/lw?id="+id, nil)
				s.h.ServeHTTP(rec, req)
				s.mu.Lock()
				s.codes[id] = rec.Code
				s.mu.Unlock()
			}()
			synctest.Wait()
		}
		lease("renewal")
		if entered, _ := s.state(); !slices.Equal(entered, []string{"a", "b", "renewal"}) {
			t.Fatalf("entered %v; want the renewal served beside a and b, c waiting", entered)
		}
		for range 4 {
			s.releaseOne()
		}
		if _, codes := s.state(); countCode(codes, http.StatusOK) != 4 {
			t.Fatalf("answered %v, want all four served", codes)
		}
	})
}
