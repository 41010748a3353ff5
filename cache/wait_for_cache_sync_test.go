package cache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/listwatch/listwatch/cache"
)

func TestWaitForCacheSync(t *testing.T) {
	synced := func() bool { return true }
	never := func() bool { return false }
	for _, tc := range []struct {
		name string
		// funcs builds the hasSynced functions; becomes may start goroutines
		// that flip them later.
		funcs     func() []func() bool
		cancelled bool          // ctx cancelled before the call
		timeout   time.Duration // ctx deadline after the call, when > 0
		want      bool
		wantTook  time.Duration // fake time the call took, at most
	}{
		{name: "none", funcs: func() []func() bool { return nil }, want: true},
		{name: "all synced", funcs: func() []func() bool { return []func() bool{synced, synced} }, want: true},
		{name: "all synced, ctx already done", cancelled: true,
			funcs: func() []func() bool { return []func() bool{synced} }, want: true},
		{name: "cancelled before sync", cancelled: true,
			funcs: func() []func() bool { return []func() bool{synced, never} }, want: false},
		{name: "deadline before sync", timeout: time.Minute,
			funcs: func() []func() bool { return []func() bool{never, synced} }, want: false, wantTook: time.Minute},
		{name: "becomes synced later", timeout: time.Hour, want: true, wantTook: 5*time.Second + 100*time.Millisecond,
			funcs: func() []func() bool {
				var a, b atomic.Bool
				go func() {
					time.Sleep(2 * time.Second)
					a.Store(true)
					time.Sleep(3 * time.Second)
					b.Store(true)
				}()
				return []func() bool{a.Load, b.Load}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.cancelled {
					cancel()
				}
				if tc.timeout > 0 {
					var c2 context.CancelFunc
					ctx, c2 = context.WithTimeout(ctx, tc.timeout)
					defer c2()
				}
				fs := tc.funcs()
				start := time.Now()
				got := cache.WaitForCacheSync(ctx, fs...)
				took := time.Since(start)
				if got != tc.want {
					t.Errorf("WaitForCacheSync = %v, want %v", got, tc.want)
				}
				if took > tc.wantTook {
					t.Errorf("took %v, want at most %v", took, tc.wantTook)
				}
				// Let any flipping goroutine finish inside the bubble.
				time.Sleep(time.Minute)
			})
		})
	}
}
