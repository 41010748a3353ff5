package storage_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/memory"
)

// TestCompactEvery checks, on the in-memory backend and a fake clock, that
// each tick compacts to the revision seen at the tick before.
func TestCompactEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		s := memory.New()
		defer s.Close()
		ticker := time.NewTicker(time.Minute)
		defer ticker.Stop()
		done := make(chan struct{})
		go func() {
			defer close(done)
			storage.CompactEvery(ctx, s, ticker.C, slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
		n := 0
		write := func() int64 {
			n++
			rev, err := s.Create(ctx, "/k/"+strconv.Itoa(n), []byte("v"))
			if err != nil {
				t.Fatal(err)
			}
			return rev
		}
		listAt := func(rev int64) error {
			_, err := s.List(ctx, "/k/", storage.ListOptions{Revision: rev})
			return err
		}
		r1, r2 := write(), write()
		time.Sleep(time.Minute) // first tick: nothing seen before, nothing compacted
		synctest.Wait()
		if err := listAt(r1); err != nil {
			t.Fatalf("after the first tick, list at %d: %v", r1, err)
		}
		r3 := write()
		time.Sleep(time.Minute) // second tick: compacts to r2
		synctest.Wait()
		if err := listAt(r1); !errors.Is(err, storage.ErrCompacted) {
			t.Errorf("after the second tick, list at %d: %v, want ErrCompacted", r1, err)
		}
		if err := listAt(r2); err != nil {
			t.Errorf("after the second tick, list at %d: %v", r2, err)
		}
		time.Sleep(time.Minute) // third tick: compacts to r3
		synctest.Wait()
		if err := listAt(r2); !errors.Is(err, storage.ErrCompacted) {
			t.Errorf("after the third tick, list at %d: %v, want ErrCompacted", r2, err)
		}
		if err := listAt(r3); err != nil {
			t.Errorf("after the third tick, list at %d: %v", r3, err)
		}
		cancel()
		<-done
	})
}
