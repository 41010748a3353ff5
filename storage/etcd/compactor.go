package etcd

import (
	"context"
	"log/slog"
	"time"
)

// compactable is what the compactor needs of a store.
type compactable interface {
	Revision(ctx context.Context) (int64, error)
	Compact(ctx context.Context, rev int64) error
}

// compactEvery compacts s at every tick to the revision it saw at the tick
// before, until ctx ends, so that every version stays readable for at least
// one interval: long enough for a paged list or a watch that fell briefly
// behind to finish.
func compactEvery(ctx context.Context, s compactable, ticks <-chan time.Time, log *slog.Logger) {
	var previous int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		if previous > 0 {
			if err := s.Compact(ctx, previous); err != nil {
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
