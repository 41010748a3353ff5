package bootstrap

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestUntilDone(t *testing.T) {
	tests := []struct {
		name string
		// fails is how many attempts fail before one succeeds (-1: all).
		fails int
		// cancelAfter ends the context after that many attempts (0: never).
		cancelAfter int
		want        bool
		wantReports int
	}{
		{name: "first attempt", fails: 0, want: true},
		{name: "past the longest wait", fails: 12, want: true, wantReports: 12},
		{name: "closed while failing", fails: -1, cancelAfter: 3, want: false, wantReports: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			attempts, reports := 0, 0
			got := untilDone(ctx, func(context.Context) error {
				attempts++
				if tt.cancelAfter > 0 && attempts == tt.cancelAfter {
					cancel()
				}
				if tt.fails < 0 || attempts <= tt.fails {
					return fmt.Errorf("attempt %d", attempts)
				}
				return nil
			}, time.Microsecond, 8*time.Microsecond, func(error) { reports++ })
			if got != tt.want || reports != tt.wantReports {
				t.Errorf("untilDone = %v after %d reported failures, want %v after %d", got, reports, tt.want, tt.wantReports)
			}
		})
	}
}
