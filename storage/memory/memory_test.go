package memory

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(*testing.T) storage.Interface { return New() })
}

// TestConformanceSmallBuffer runs the suite with one-event watch buffers, so
// that delivery waits on the consumer at every event.
func TestConformanceSmallBuffer(t *testing.T) {
	storagetest.Run(t, func(*testing.T) storage.Interface { return New(WithWatchBuffer(1)) })
}

func TestLaggingWatcherCompacted(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		want   error // how the stalled watch ends after the compaction
	}{
		// The stalled watcher missed writes under its prefix: it must restart.
		{"missed writes", "/a/", storage.ErrCompacted},
		// Nothing under its prefix was dropped: it lives on.
		{"nothing missed", "/b/", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s := New(WithWatchBuffer(1))
			defer s.Close()
			w, err := s.Watch(ctx, tc.prefix, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			var last int64
			for i := range 2 * watchBatch {
				if last, err = s.Create(ctx, fmt.Sprintf("/a/%d", i), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Compact(ctx, last); err != nil {
				t.Fatal(err)
			}
			b, err := s.Create(ctx, "/b/x", []byte("v"))
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for ev := range w.Events() {
				got = append(got, ev.KV.Revision)
				if ev.KV.Revision == b {
					break
				}
			}
			if tc.want == nil {
				if len(got) != 1 || got[0] != b {
					t.Errorf("events at %v, want only %d", got, b)
				}
				return
			}
			// It may deliver what it had buffered or copied out before the
			// compaction, but never a gap: the events it got are the first.
			for i, rev := range got {
				if rev != int64(i+1) {
					t.Fatalf("events at %v, want a prefix of 1, 2, ...", got)
				}
			}
			if !errors.Is(w.Err(), tc.want) {
				t.Errorf("Err = %v, want %v", w.Err(), tc.want)
			}
		})
	}
}

func TestCompactionDropsHistory(t *testing.T) {
	ctx := context.Background()
	s := New()
	defer s.Close()
	for i := range 10 {
		key := fmt.Sprintf("/k/%d", i%2)
		if i < 2 {
			_, err := s.Create(ctx, key, []byte("v"))
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, _, err := s.Delete(ctx, key, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, key, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Delete(ctx, "/k/0", 0); err != nil {
		t.Fatal(err)
	}
	rev, _ := s.Revision(ctx)
	if err := s.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.changes) != 0 || len(s.keys) != 1 || s.ordered.Len() != 1 || len(s.keys["/k/1"].versions) != 1 {
		t.Errorf("after compacting everything: %d changes, %d keys, %d ordered, want 0, 1, 1 with one version",
			len(s.changes), len(s.keys), s.ordered.Len())
	}
}

func BenchmarkMemory(b *testing.B) {
	storagetest.Bench(b, func(*testing.B) storage.Interface { return New() })
}
