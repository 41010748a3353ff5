// Package runtest runs, for the length of a test, what has the lifecycle
// every long-running part of listwatch has: New builds it, Run(ctx) runs
// it until ctx ends.
package runtest

import (
	"context"
	"sync"
	"testing"
)

// Runner runs until its context ends.
type Runner interface {
	Run(ctx context.Context) error
}

// Start runs r in a goroutine until the test ends or stop is called. stop,
// which may be called more than once, ends Run's context and returns once
// Run has; an error from Run fails the test.
func Start(tb testing.TB, r Runner) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
	})
	tb.Cleanup(stop)
	return stop
}
