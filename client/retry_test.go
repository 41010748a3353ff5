package client

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/internal/ctxtime"
)

// refusingServer answers the first refusals requests with code and, when
// retryAfter is not empty, that Retry-After; then it creates the pod. It
// records the body of every request it was sent.
type refusingServer struct {
	code       int
	retryAfter string
	refusals   int

	mu     sync.Mutex
	bodies []string
}

func (s *refusingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(b))
	n := len(s.bodies)
	s.mu.Unlock()
	if n <= s.refusals {
		if s.retryAfter != "" {
			w.Header().Set("Retry-After", s.retryAfter)
		}
		// No reason: the client derives it from the code.
		writeStatus(w, metav1.Status{Status: metav1.StatusFailure, Code: int32(s.code), Message: "not now"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(b)
}

func (s *refusingServer) sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies)
}

// TestRetryAfter: a refusal that says when to come back (429, or a 5xx
// with Retry-After) is sent again, the same body each time, after the delay
// it asked for (capped at a minute), up to MaxRetries times; any other
// refusal is returned at once. The waits are recorded, not taken.
func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		code       int
		retryAfter string
		refusals   int
		maxRetries int
		wantSent   int
		wantWaits  []time.Duration
		wantErr    func(error) bool
	}{
		{name: "429 twice", code: 429, retryAfter: "1", refusals: 2, wantSent: 3,
			wantWaits: []time.Duration{time.Second, time.Second}},
		{name: "503 with Retry-After", code: 503, retryAfter: "2", refusals: 1, wantSent: 2,
			wantWaits: []time.Duration{2 * time.Second}},
		{name: "Retry-After 0", code: 429, retryAfter: "0", refusals: 3, wantSent: 4,
			wantWaits: []time.Duration{0, 0, 0}},
		{name: "huge Retry-After capped", code: 429, retryAfter: "3600", refusals: 1, wantSent: 2,
			wantWaits: []time.Duration{time.Minute}},
		{name: "gives up after MaxRetries", code: 429, retryAfter: "1", refusals: 100, maxRetries: 3, wantSent: 4,
			wantWaits: []time.Duration{time.Second, time.Second, time.Second}, wantErr: apierrors.IsTooManyRequests},
		{name: "default MaxRetries is client-go's", code: 429, retryAfter: "1", refusals: 100, wantSent: DefaultMaxRetries + 1,
			wantWaits: slices.Repeat([]time.Duration{time.Second}, DefaultMaxRetries), wantErr: apierrors.IsTooManyRequests},
		{name: "retries off", code: 429, retryAfter: "1", refusals: 1, maxRetries: -1, wantSent: 1,
			wantErr: apierrors.IsTooManyRequests},
		{name: "429 without Retry-After", code: 429, refusals: 1, wantSent: 1, wantErr: apierrors.IsTooManyRequests},
		{name: "500 without Retry-After", code: 500, refusals: 1, wantSent: 1, wantErr: apierrors.IsInternalError},
		{name: "409 with Retry-After", code: 409, retryAfter: "1", refusals: 1, wantSent: 1, wantErr: apierrors.IsConflict},
		{name: "malformed Retry-After", code: 429, retryAfter: "soon", refusals: 1, wantSent: 1, wantErr: apierrors.IsTooManyRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &refusingServer{code: tc.code, retryAfter: tc.retryAfter, refusals: tc.refusals}
			hs := startServer(t, srv)
			c := newTestClient(t, hs.URL, func(c *Config) { c.MaxRetries = tc.maxRetries })
			var waits []time.Duration
			c.sleep = func(ctx context.Context, d time.Duration) bool {
				waits = append(waits, d)
				return ctx.Err() == nil
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"}}
			got, err := NewResource[*corev1.Pod](c, podsGVR, "default").Create(t.Context(), pod, metav1.CreateOptions{})
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Create: %v", err)
			case tc.wantErr == nil && got.Name != "web-1":
				t.Fatalf("Create returned %q", got.Name)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Fatalf("Create: got %v, want the server's refusal", err)
			}
			sent := srv.sent()
			if len(sent) != tc.wantSent {
				t.Errorf("sent %d requests, want %d", len(sent), tc.wantSent)
			}
			for i, b := range sent {
				if b != sent[0] {
					t.Errorf("request %d body %q differs from the first %q", i, b, sent[0])
				}
			}
			if !slices.Equal(waits, tc.wantWaits) {
				t.Errorf("waited %v, want %v", waits, tc.wantWaits)
			}
		})
	}
}

// TestRetryAfterCancelled: a caller that gives up while the client waits
// to retry gets the server's refusal back at once.
func TestRetryAfterCancelled(t *testing.T) {
	srv := &refusingServer{code: 429, retryAfter: strconv.Itoa(3600), refusals: 100}
	hs := startServer(t, srv)
	c := newTestClient(t, hs.URL, nil)
	ctx, cancel := context.WithCancel(t.Context())
	c.sleep = func(ctx context.Context, d time.Duration) bool {
		cancel()
		return ctxtime.Sleep(ctx, d)
	}
	_, err := NewResource[*corev1.Pod](c, podsGVR, "default").Get(ctx, "x", metav1.GetOptions{})
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("got %v, want the 429", err)
	}
	if n := len(srv.sent()); n != 1 {
		t.Errorf("sent %d requests, want 1", n)
	}
}
