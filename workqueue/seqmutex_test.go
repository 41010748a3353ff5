package workqueue

import (
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
)

// TestSeqMutex checks mutual exclusion with a plain counter, which the
// race detector also checks for happens-before between critical sections,
// and that the state word counts every critical section.
func TestSeqMutex(t *testing.T) {
	tests := []struct {
		name               string
		goroutines, rounds int
	}{
		{"one goroutine", 1, 1000},
		{"two goroutines", 2, 20_000},
		{"many goroutines", 16, 2_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m seqMutex
			counter := 0
			var wg sync.WaitGroup
			for range tt.goroutines {
				wg.Go(func() {
					for range tt.rounds {
						m.lock()
						counter++
						m.unlock()
					}
				})
			}
			wg.Wait()
			if want := tt.goroutines * tt.rounds; counter != want {
				t.Errorf("counter = %d, want %d", counter, want)
			}
			if got, want := m.state.Load(), uint64(2*tt.goroutines*tt.rounds); got != want {
				t.Errorf("state = %d, want %d", got, want)
			}
		})
	}
}

// TestSeqMutexParks holds the lock while other goroutines try it: they
// must park rather than spin for ever, and each unlock must let one more
// of them through, none lost.
func TestSeqMutexParks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const waiters = 5
		var m seqMutex
		m.lock()
		inside := 0
		var wg sync.WaitGroup
		for range waiters {
			wg.Go(func() {
				m.lock()
				inside++
				m.unlock()
			})
		}
		// A goroutine parked in Cond.Wait is durably blocked: Wait
		// returns once every waiter has parked.
		synctest.Wait()
		if n := m.sleepers.Load(); n != waiters {
			t.Fatalf("%d goroutines parked, want %d", n, waiters)
		}
		if inside != 0 {
			t.Fatalf("%d goroutines got a held lock", inside)
		}
		m.unlock()
		wg.Wait()
		if inside != waiters || m.sleepers.Load() != 0 {
			t.Errorf("inside = %d, sleepers = %d, want %d and 0", inside, m.sleepers.Load(), waiters)
		}
	})
}

// TestSeqMutexObserve checks that observe sees every acquisition made
// before it, with what its goroutine did before: the only thing ordering
// the write of data before its read here is the observation, so the race
// detector would report the read otherwise.
func TestSeqMutexObserve(t *testing.T) {
	var m seqMutex
	data := 0
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		data = 42
		m.lock()
		<-release
		m.unlock()
	}()
	for m.observe()&1 == 0 {
		runtime.Gosched()
	}
	if data != 42 {
		t.Errorf("data = %d, want 42", data)
	}
	close(release)
	<-done
}
