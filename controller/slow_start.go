package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// SlowStartInitialBatchSize is the first batch of a slow start.
const SlowStartInitialBatchSize = 1

// SlowStartBatch calls fn count times in batches of growing size: initial
// (at least 1), then doubling, each batch capped at maxBatch when it is
// positive and at what remains. Calls within a batch run concurrently; a
// batch starts only when the previous one has finished without error. This
// way a request that is bound to fail (a quota, say) fails once or twice
// rather than count times.
//
// It returns how many calls succeeded and, if a batch failed or ctx ended,
// the batch's errors joined or the context's error. fn receives the index
// of the call, from 0 to count-1.
func SlowStartBatch(ctx context.Context, count, initial, maxBatch int, fn func(ctx context.Context, i int) error) (int, error) {
	if count <= 0 {
		return 0, nil
	}
	batch := max(initial, 1)
	succeeded := 0
	for next := 0; next < count; {
		if err := ctx.Err(); err != nil {
			return succeeded, fmt.Errorf("slow start: %w", context.Cause(ctx))
		}
		size := min(batch, count-next)
		if maxBatch > 0 {
			size = min(size, maxBatch)
		}
		var wg sync.WaitGroup
		errs := make([]error, size)
		for j := range size {
			wg.Go(func() { errs[j] = fn(ctx, next+j) })
		}
		wg.Wait()
		failed := 0
		for _, err := range errs {
			if err != nil {
				failed++
			}
		}
		succeeded += size - failed
		if failed > 0 {
			return succeeded, errors.Join(errs...)
		}
		next += size
		batch = size * 2
	}
	return succeeded, nil
}
