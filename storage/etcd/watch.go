package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/internal/watchbase"
)

// leaderRetry is the pause before a watch that lost its leader resumes.
const leaderRetry = 100 * time.Millisecond

// watchBuffer is the number of events buffered for each watcher.
const watchBuffer = 100

// watcher relays an etcd watch. etcd's client buffers whatever the server
// sends without bound, so when the consumer stops reading for longer than
// the store's stallGrace the watcher cancels the etcd watch and, once the
// consumer reads again, resumes from the last revision it delivered (or
// ends with storage.ErrCompacted if that history is gone by then).
type watcher struct {
	*watchbase.Watch
	s      *Store
	prefix string
	ctx    context.Context // ends with the caller's context, Stop or Close
}

// Watch implements storage.Interface. Before it returns it checks with one
// read at rev that rev is neither compacted nor in the future.
func (s *Store) Watch(ctx context.Context, prefix string, rev int64) (storage.Watcher, error) {
	if err := s.begin(); err != nil {
		return nil, fmt.Errorf("watch %q: %w", prefix, err)
	}
	if rev < 0 {
		return nil, fmt.Errorf("watch %q: negative revision %d", prefix, rev)
	}
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.cli.Get(ctx, s.prefix+prefix+"\x00", append(opts, clientv3.WithCountOnly())...)
	if err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			s.noteCompacted(rev + 1)
		}
		return nil, fmt.Errorf("watch %q from %d: %w", prefix, rev, s.mapErr(err))
	}
	if rev == 0 {
		rev = resp.Header.Revision
	}
	wctx, cancel := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(s.lifetime, cancel)
	w := &watcher{
		Watch:  watchbase.New(watchBuffer, cancel),
		s:      s,
		prefix: prefix,
		ctx:    wctx,
	}
	err = s.goRun(func() {
		defer stopOnClose()
		err := w.run(rev)
		switch {
		case s.lifetime.Err() != nil:
			err = storage.ErrClosed
		case w.ctx.Err() != nil:
			err = nil // Stop or the caller's context
		}
		if err != nil {
			err = fmt.Errorf("watch %q: %w", prefix, err)
		}
		w.End(err)
	})
	if err != nil {
		stopOnClose()
		cancel()
		return nil, fmt.Errorf("watch %q: %w", prefix, err)
	}
	return w, nil
}

// run delivers the writes after rev until the watch ends, resuming the etcd
// watch whenever it paused for a stalled consumer.
func (w *watcher) run(rev int64) error {
	for {
		paused, err := w.relay(&rev)
		if errors.Is(err, rpctypes.ErrNoLeader) {
			// The member lost its leader (an election, a partition): etcd's
			// client has other endpoints; watch again after a pause.
			w.s.log.Debug("watch lost leader; resuming", "prefix", w.prefix, "revision", rev)
			select {
			case <-time.After(leaderRetry):
				continue
			case <-w.ctx.Done():
				return w.ctx.Err()
			}
		}
		if !paused {
			return err
		}
	}
}

// relay runs one etcd watch from *rev, advancing *rev past what it
// delivered. It returns paused if it stopped reading etcd for a stalled
// consumer, who has since read again.
func (w *watcher) relay(rev *int64) (paused bool, err error) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(w.ctx))
	defer cancel()
	from, end := w.s.span(w.prefix, "")
	// etcd watches from a revision inclusive; starting at *rev itself rather
	// than after it makes etcd refuse exactly when *rev < the compaction, as
	// storage.Interface says. Events at *rev are skipped below.
	wch := w.s.cli.Watch(ctx, from, clientv3.WithRange(end), clientv3.WithRev(*rev), clientv3.WithPrevKV())
	defer func() {
		cancel()
		for range wch { // let etcd's client finish the watch
		}
	}()
	for resp := range wch {
		if resp.CompactRevision > 0 {
			w.s.noteCompacted(resp.CompactRevision)
		}
		if err := resp.Err(); err != nil {
			return false, w.s.mapErr(err)
		}
		if resp.IsProgressNotify() {
			if r := resp.Header.Revision; r > *rev {
				// Nothing under the prefix up to r was left unsent: the
				// watch may resume after r.
				select {
				case w.Out <- storage.Event{Type: storage.EventProgress, KV: storage.KeyValue{Revision: r}}:
					*rev = r
				default: // a hint: not worth waiting for the consumer
				}
			}
			continue
		}
		var stalledAt int64
		for _, ev := range resp.Events {
			r := ev.Kv.ModRevision
			if r <= *rev {
				continue
			}
			if stalledAt != 0 && r != stalledAt {
				// Pause at a revision boundary, so resuming after *rev
				// repeats nothing and skips nothing.
				return true, nil
			}
			out, err := w.event(ev)
			if err != nil {
				return false, err
			}
			stalled, err := w.send(out, cancel)
			if err != nil {
				return false, err
			}
			if stalled {
				stalledAt = r
			}
			*rev = r
		}
		if stalledAt != 0 {
			return true, nil
		}
	}
	if err := w.ctx.Err(); err != nil {
		return false, err
	}
	return false, errors.New("etcd watch channel closed")
}

// RequestProgress implements storage.Interface with etcd's progress
// request, sent on the gRPC stream the store's watches share (they all
// require a leader, which names the stream); etcd answers only when every
// watch on it has caught up.
func (s *Store) RequestProgress(ctx context.Context) error {
	if err := s.begin(); err != nil {
		return fmt.Errorf("request progress: %w", err)
	}
	if err := s.cli.RequestProgress(clientv3.WithRequireLeader(ctx)); err != nil {
		return fmt.Errorf("request progress: %w", s.mapErr(err))
	}
	return nil
}

// send delivers ev, calling pause if the consumer has not taken it within
// the store's stallGrace; stalled reports whether it did.
func (w *watcher) send(ev storage.Event, pause context.CancelFunc) (stalled bool, err error) {
	select {
	case w.Out <- ev:
		return false, nil
	case <-w.ctx.Done():
		return false, w.ctx.Err()
	default:
	}
	grace := time.NewTimer(w.s.stallGrace)
	defer grace.Stop()
	for {
		select {
		case w.Out <- ev:
			return stalled, nil
		case <-w.ctx.Done():
			return false, w.ctx.Err()
		case <-grace.C:
			w.s.log.Debug("watch paused for a stalled consumer", "prefix", w.prefix, "revision", ev.KV.Revision)
			stalled = true
			pause()
		}
	}
}

// event converts an etcd event. etcd drops the previous value of a write
// whose previous version was compacted before the watch read it; such an
// event cannot be told correctly, so the watch ends with ErrCompacted.
func (w *watcher) event(ev *clientv3.Event) (storage.Event, error) {
	var out storage.Event
	if ev.PrevKv != nil {
		out.Prev = w.s.keyValue(ev.PrevKv)
	}
	switch {
	case ev.Type == clientv3.EventTypeDelete:
		out.Type = storage.EventDelete
		out.KV = storage.KeyValue{Key: string(ev.Kv.Key[len(w.s.prefix):]), Revision: ev.Kv.ModRevision}
		if ev.PrevKv == nil {
			return out, fmt.Errorf("delete of %q at %d: previous value %w", out.KV.Key, out.KV.Revision, storage.ErrCompacted)
		}
	default:
		out.Type = storage.EventPut
		out.KV = w.s.keyValue(ev.Kv)
		if ev.PrevKv == nil && !ev.IsCreate() {
			return out, fmt.Errorf("update of %q at %d: previous value %w", out.KV.Key, out.KV.Revision, storage.ErrCompacted)
		}
	}
	return out, nil
}
