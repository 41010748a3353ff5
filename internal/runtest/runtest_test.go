package runtest

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"
)

// runner records how Run was called and ends with err.
type runner struct {
	ran   chan struct{}
	ended bool
	err   error
}

func (r *runner) Run(ctx context.Context) error {
	close(r.ran)
	<-ctx.Done()
	r.ended = true
	return r.err
}

// fakeTB records what Start reports to a test.
type fakeTB struct {
	testing.TB
	errors   int
	cleanups []func()
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Errorf(string, ...any) { f.errors++ }
func (f *fakeTB) Cleanup(fn func())     { f.cleanups = append(f.cleanups, fn) }

func TestStart(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		stopFirst  bool
		wantErrors int
	}{
		{name: "cleanup stops it", wantErrors: 0},
		{name: "stop, then cleanup", stopFirst: true, wantErrors: 0},
		{name: "an error from Run fails the test", err: errors.New("boom"), wantErrors: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			r := &runner{ran: make(chan struct{}), err: tt.err}
			tb := &fakeTB{}
			stop := Start(tb, r)
			<-r.ran
			if tt.stopFirst {
				stop()
				if !r.ended {
					t.Fatal("stop returned before Run")
				}
			}
			for _, fn := range tb.cleanups {
				fn()
			}
			if !r.ended {
				t.Fatal("cleanup returned before Run")
			}
			if tb.errors != tt.wantErrors {
				t.Errorf("errors reported = %d, want %d", tb.errors, tt.wantErrors)
			}
		})
	}
}
