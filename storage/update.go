package storage

import (
	"context"
	"errors"
	"fmt"
)

// MaxUpdateAttempts bounds the retries of GuaranteedUpdate under contention.
const MaxUpdateAttempts = 64

// GuaranteedUpdate reads key, passes its current version to tryUpdate and
// writes the value it returns with a compare-and-swap on the revision read,
// retrying from a fresh read when another writer got there first. tryUpdate
// may be called several times and must not keep side effects of earlier
// calls; an error from it ends the update and is returned as it is. It
// returns the revision of the write.
func GuaranteedUpdate(ctx context.Context, s Interface, key string, tryUpdate func(cur KeyValue) ([]byte, error)) (int64, error) {
	for range MaxUpdateAttempts {
		cur, err := s.Get(ctx, key)
		if err != nil {
			return 0, err
		}
		value, err := tryUpdate(cur)
		if err != nil {
			return 0, err
		}
		rev, err := s.Update(ctx, key, value, cur.Revision)
		if errors.Is(err, ErrConflict) {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			continue
		}
		return rev, err
	}
	return 0, fmt.Errorf("update %s: %d attempts lost to concurrent writers: %w", key, MaxUpdateAttempts, ErrConflict)
}
