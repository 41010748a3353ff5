package ctxtime

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEvery(t *testing.T) {
	tests := []struct {
		name string
		// stopAfter: f returns false on this call (0: never).
		stopAfter int
		// cancelAt: ctx ends at this time.
		cancelAt  time.Duration
		wantCalls int
		wantEnd   time.Duration
	}{
		{"runs every period until ctx ends", 0, 35 * time.Second, 3, 35 * time.Second},
		{"stops when f says so", 2, time.Hour, 2, 20 * time.Second},
		{"nothing before the first period", 0, 5 * time.Second, 0, 5 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), tc.cancelAt)
				defer cancel()
				start := time.Now()
				calls := 0
				Every(ctx, 10*time.Second, func() bool {
					calls++
					return calls != tc.stopAfter
				})
				if calls != tc.wantCalls || time.Since(start) != tc.wantEnd {
					t.Errorf("%d calls, returned after %v; want %d, %v", calls, time.Since(start), tc.wantCalls, tc.wantEnd)
				}
			})
		})
	}
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if !Sleep(t.Context(), time.Minute) {
			t.Error("Sleep of a live context: not the whole wait")
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if Sleep(ctx, time.Minute) {
			t.Error("Sleep past its context's end: the whole wait")
		}
	})
}
