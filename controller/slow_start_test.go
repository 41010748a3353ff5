package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

func TestSlowStartBatch(t *testing.T) {
	tests := []struct {
		name          string
		count         int
		initial, max  int
		failFrom      int // calls with index >= failFrom fail; -1 never
		wantBatches   []int
		wantSucceeded int
		wantErr       bool
	}{
		{"all succeed", 10, 1, 0, -1, []int{1, 2, 4, 3}, 10, false},
		{"zero count", 0, 1, 0, -1, nil, 0, false},
		{"negative count", -3, 1, 0, -1, nil, 0, false},
		{"initial below one is one", 3, 0, 0, -1, []int{1, 2}, 3, false},
		{"larger initial", 10, 3, 0, -1, []int{3, 6, 1}, 10, false},
		{"capped batches", 20, 1, 4, -1, []int{1, 2, 4, 4, 4, 4, 1}, 20, false},
		{"first call fails: nothing more tried", 100, 1, 0, 0, []int{1}, 0, true},
		{"stops after the batch with an error", 100, 1, 0, 5, []int{1, 2, 4}, 5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []int
			fn := func(_ context.Context, i int) error {
				mu.Lock()
				calls = append(calls, i)
				mu.Unlock()
				if tt.failFrom >= 0 && i >= tt.failFrom {
					return fmt.Errorf("call %d: %w", i, errQuota)
				}
				return nil
			}
			// Record batches by intercepting through a wrapper that runs
			// batch by batch: the indices of batch k are contiguous.
			succeeded, err := SlowStartBatch(context.Background(), tt.count, tt.initial, tt.max, fn)
			if succeeded != tt.wantSucceeded {
				t.Errorf("succeeded = %d, want %d", succeeded, tt.wantSucceeded)
			}
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, errQuota)) {
				t.Errorf("err = %v, want error %v", err, tt.wantErr)
			}
			slices.Sort(calls)
			total := 0
			for _, b := range tt.wantBatches {
				total += b
			}
			if len(calls) != total {
				t.Fatalf("%d calls, want %d (batches %v)", len(calls), total, tt.wantBatches)
			}
			for i, c := range calls {
				if c != i {
					t.Fatalf("calls %v are not 0..%d", calls, total-1)
				}
			}
		})
	}
}

var errQuota = errors.New("quota exceeded")

// TestSlowStartBatchSizes checks the batch boundaries: batches cover the
// indices 0, 1-2, 3-6, 7-14, 15-19, and no call of a batch starts before
// every call of the previous batch has returned.
func TestSlowStartBatchSizes(t *testing.T) {
	var mu sync.Mutex
	seq := 0
	startAt := make([]int, 20)
	endAt := make([]int, 20)
	_, err := SlowStartBatch(context.Background(), 20, 1, 0, func(_ context.Context, i int) error {
		mu.Lock()
		startAt[i] = seq
		seq++
		mu.Unlock()
		mu.Lock()
		endAt[i] = seq
		seq++
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	batches := [][2]int{{0, 1}, {1, 3}, {3, 7}, {7, 15}, {15, 20}}
	for k := 1; k < len(batches); k++ {
		prev, cur := batches[k-1], batches[k]
		lastEnd := slices.Max(endAt[prev[0]:prev[1]])
		firstStart := slices.Min(startAt[cur[0]:cur[1]])
		if firstStart < lastEnd {
			t.Fatalf("batch %v started before batch %v finished", cur, prev)
		}
	}
}

func TestSlowStartBatchContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	n, err := SlowStartBatch(ctx, 10, 1, 0, func(context.Context, int) error {
		calls++
		cancel() // the first batch cancels; no second batch starts
		return nil
	})
	if n != 1 || calls != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("SlowStartBatch = %d, %v after %d calls; want 1, Canceled after 1", n, err, calls)
	}
}
