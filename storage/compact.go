package storage

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Compactor is what CompactEvery needs of a store.
type Compactor interface {
	Revision(ctx context.Context) (int64, error)
	Compact(ctx context.Context, rev int64) error
}

// CompactEvery compacts s at every tick to the revision it saw at the tick
// before, until ctx ends, so that every version stays readable for at least
// one interval: long enough for a paged list or a watch that fell briefly
// behind to finish. A compaction someone else already made is not an error.
// It is for a store of its own (the memory backend): the etcd backend's
// compactor (etcd.Config.CompactionInterval) instead takes turns with the
// other API servers on its etcd, as kube-apiserver's does, so that only one
// of them compacts per interval.
func CompactEvery(ctx context.Context, s Compactor, ticks <-chan time.Time, log *slog.Logger) {
	var previous int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		if previous > 0 {
			if err := s.Compact(ctx, previous); err != nil && !errors.Is(err, ErrCompacted) {
				log.Warn("compaction failed", "revision", previous, "err", err)
			} else {
				log.Debug("compacted", "revision", previous)
			}
		}
		rev, err := s.Revision(ctx)
		if err != nil {
			log.Warn("compaction: reading the revision failed", "err", err)
			continue
		}
		previous = rev
	}
}
