// Package ctxtime holds waits bounded by a context.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits d or until ctx is done, and reports whether it waited the
// whole d.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Every calls f every period, the first time one period from now, until
// ctx is done or f returns false.
func Every(ctx context.Context, period time.Duration, f func() bool) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !f() {
				return
			}
		}
	}
}
