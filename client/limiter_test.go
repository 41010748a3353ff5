package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// memoryAPI is an in-memory API server, a RoundTripper: it answers a list
// with an empty pod list and a watch with an empty stream, and records
// when each request reached it.
type memoryAPI struct {
	mu       sync.Mutex
	times    []time.Time
	watching []bool
}

func (a *memoryAPI) RoundTrip(r *http.Request) (*http.Response, error) {
	watch := r.URL.Query().Get("watch") == "true"
	a.mu.Lock()
	a.times = append(a.times, time.Now())
	a.watching = append(a.watching, watch)
	a.mu.Unlock()
	body := `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`
	if watch {
		body = ""
	}
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}, nil
}

func (a *memoryAPI) requests() ([]time.Time, []bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.times...), append([]bool(nil), a.watching...)
}

// burstThenEvery is when n requests sent back to back are let through by
// a limiter of the burst and the interval between two tokens, counted from
// the first.
func burstThenEvery(n, burst int, every time.Duration) []time.Duration {
	d := make([]time.Duration, n)
	for i := burst; i < n; i++ {
		d[i] = time.Duration(i-burst+1) * every
	}
	return d
}

// TestRateLimiter sends requests one after another, each once the one
// before returned, on synctest's fake clock, and checks when the server
// saw each one: with a rate limiter the requests of a burst go at once and
// the next wait for their token, to the nanosecond.
func TestRateLimiter(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config // QPS and Burst
		// ops are the requests, in order: L a list, W a watch.
		ops string
		// want is when the server saw each request, from the first.
		want []time.Duration
		// cancelLast cancels the last request once it waits for its
		// token: it must return at once, with context.Canceled, and not
		// be sent.
		cancelLast bool
	}{
		{name: "QPS 10 burst 3", cfg: Config{QPS: 10, Burst: 3},
			ops: "LLLLLLLLL", want: burstThenEvery(9, 3, 100*time.Millisecond)},
		{name: "watches take tokens", cfg: Config{QPS: 10, Burst: 1},
			ops: "LWLW", want: burstThenEvery(4, 1, 100*time.Millisecond)},
		{name: "watch waits after a burst of lists", cfg: Config{QPS: 10, Burst: 3},
			ops: "LLLW", want: burstThenEvery(4, 3, 100*time.Millisecond)},
		{name: "negative QPS: no limit", cfg: Config{QPS: -1},
			ops: strings.Repeat("L", 2*DefaultBurst) + "W", want: make([]time.Duration, 2*DefaultBurst+1)},
		{name: "zero: defaults", cfg: Config{},
			ops:  strings.Repeat("L", DefaultBurst+2),
			want: burstThenEvery(DefaultBurst+2, DefaultBurst, time.Second/DefaultQPS)},
		{name: "burst 0: default burst", cfg: Config{QPS: 1},
			ops: strings.Repeat("L", DefaultBurst+1), want: burstThenEvery(DefaultBurst+1, DefaultBurst, time.Second)},
		{name: "cancelled while waiting for a list token", cfg: Config{QPS: 1, Burst: 2},
			ops: "LLL", want: []time.Duration{0, 0}, cancelLast: true},
		{name: "cancelled while waiting for a watch token", cfg: Config{QPS: 1, Burst: 1},
			ops: "LW", want: []time.Duration{0}, cancelLast: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := &memoryAPI{}
				cfg := tc.cfg
				cfg.REST = &rest.Config{Host: "http://127.0.0.1:1",
					WrapTransport: func(http.RoundTripper) http.RoundTripper { return api }}
				cl, err := New(&cfg)
				if err != nil {
					t.Fatal(err)
				}
				pods := NewResource[*corev1.Pod](cl, podsGVR, "default")
				do := func(ctx context.Context, op byte) error {
					if op == 'W' {
						w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
						if err == nil {
							w.Stop()
						}
						return err
					}
					_, err := pods.List(ctx, metav1.ListOptions{})
					return err
				}

				start := time.Now()
				sent := tc.ops
				if tc.cancelLast {
					sent = tc.ops[:len(tc.ops)-1]
				}
				for i := range len(sent) {
					if err := do(t.Context(), sent[i]); err != nil {
						t.Fatalf("request %d: %v", i, err)
					}
				}
				if tc.cancelLast {
					ctx, cancel := context.WithCancel(t.Context())
					done := make(chan error, 1)
					go func() { done <- do(ctx, tc.ops[len(tc.ops)-1]) }()
					// Everything is blocked: the request waits for its
					// token, which the fake clock is not moving towards.
					synctest.Wait()
					select {
					case err := <-done:
						cancel()
						t.Fatalf("request over the limit returned at once: %v", err)
					default:
					}
					waitedFrom := time.Now()
					cancel()
					err := <-done
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("cancelled request: got %v, want context.Canceled", err)
					}
					if d := time.Since(waitedFrom); d != 0 {
						t.Errorf("cancelled request returned %v after its cancel, want at once", d)
					}
				}

				times, watching := api.requests()
				got := make([]time.Duration, len(times))
				for i, at := range times {
					got[i] = at.Sub(start)
				}
				if len(got) != len(tc.want) {
					t.Fatalf("server saw %d requests at %v, want %d at %v", len(got), got, len(tc.want), tc.want)
				}
				for i := range got {
					if got[i] != tc.want[i] {
						t.Errorf("request %d (%c) at %v, want %v", i, tc.ops[i], got[i], tc.want[i])
					}
					if watching[i] != (tc.ops[i] == 'W') {
						t.Errorf("request %d: watch=%v, want %c", i, watching[i], tc.ops[i])
					}
				}
			})
		})
	}
}
