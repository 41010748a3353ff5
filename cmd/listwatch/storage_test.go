package main

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/memory"
)

// TestCompactLoop checks that each tick compacts to the revision seen one
// tick earlier, so that the last interval of history stays readable.
func TestCompactLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		ctx, cancel := context.WithCancel(context.Background())
		s := memory.New()
		defer s.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			compactLoop(ctx, s, interval, testLogger(t))
		}()
		write := func(key string) int64 {
			t.Helper()
			rev, err := s.Create(ctx, key, []byte("v"))
			if err != nil {
				t.Fatal(err)
			}
			return rev
		}
		listable := func(rev int64) bool {
			t.Helper()
			_, err := s.List(ctx, "/", storage.ListOptions{Revision: rev})
			if err != nil && !errors.Is(err, storage.ErrCompacted) {
				t.Fatal(err)
			}
			return err == nil
		}

		r0 := write("/0")
		r1 := write("/a")
		time.Sleep(interval) // tick 1: remembers r1, compacts nothing
		synctest.Wait()
		r2 := write("/b")
		if !listable(r1) {
			t.Fatal("revision compacted after one tick")
		}
		time.Sleep(interval) // tick 2: compacts to r1, remembers r2
		synctest.Wait()
		steps := []struct {
			rev  int64
			want bool
		}{{r0, false}, {r1, true}, {r2, true}}
		for _, st := range steps {
			if got := listable(st.rev); got != st.want {
				t.Errorf("after tick 2: list at %d possible = %v, want %v", st.rev, got, st.want)
			}
		}
		time.Sleep(interval) // tick 3: compacts to r2
		synctest.Wait()
		if listable(r1) || !listable(r2) {
			t.Errorf("after tick 3: list at r1=%v r2=%v, want false true", listable(r1), listable(r2))
		}
		cancel()
		<-done
	})
}
