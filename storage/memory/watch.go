package memory

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/internal/watchbase"
)

// watcher delivers the writes under a prefix from the store's history. Its
// goroutine reads the history in batches from a cursor, so a consumer that
// never reads holds up nothing but its own goroutine and buffer: writers
// never wait for it, and it ends with storage.ErrCompacted once a
// compaction passes its cursor.
type watcher struct {
	*watchbase.Watch
	s      *Store
	prefix string
	// cursor is the revision of the last write the watcher has looked at.
	// Only the watcher's goroutine writes it holding s.mu for reading, and
	// Compact holding it for writing, so the two never overlap.
	cursor int64
}

// Watch implements storage.Interface. Each watcher has its own goroutine and
// a buffer of WithWatchBuffer events.
func (s *Store) Watch(ctx context.Context, prefix string, rev int64) (storage.Watcher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("watch %q: %w", prefix, err)
	}
	from, err := s.readRevision(rev)
	if err != nil {
		return nil, fmt.Errorf("watch %q: %w", prefix, err)
	}
	// Stop cancels the watch's own context, which the caller's also ends.
	wctx, cancel := context.WithCancel(ctx)
	w := &watcher{
		Watch:  watchbase.New(s.watchBuffer, cancel),
		s:      s,
		prefix: prefix,
		cursor: from,
	}
	s.watchers.Add(1)
	s.watching[w] = struct{}{}
	go func() {
		defer s.watchers.Done()
		defer cancel()
		err := w.run(wctx)
		s.forget(w)
		w.End(err)
	}()
	return w, nil
}

// run delivers the writes after the cursor until the watch ends, and
// returns why it ended: nil when ctx did.
func (w *watcher) run(ctx context.Context) error {
	// sent is the revision of the last event sent, progress included;
	// answered the progress requests answered (or overtaken by events).
	var sent, answered int64
	for {
		batch, written, progress, asked, err := w.s.changesAfter(w)
		if err != nil {
			return fmt.Errorf("watch %q: %w", w.prefix, err)
		}
		for _, ev := range batch {
			select {
			case w.Out <- ev:
				sent = ev.KV.Revision
			case <-ctx.Done():
				return nil
			case <-w.s.done:
				// Loop once more so that changesAfter reports ErrClosed.
			}
		}
		if written == nil {
			continue
		}
		// Caught up: every write up to the cursor is delivered. A request
		// made while the watcher was still catching up is answered now.
		if asked > answered {
			answered = asked
			if w.cursor > sent {
				select {
				case w.Out <- storage.Event{Type: storage.EventProgress, KV: storage.KeyValue{Revision: w.cursor}}:
					sent = w.cursor
				default: // a hint: not worth waiting for the consumer
				}
			}
		}
		select {
		case <-written:
		case <-progress:
		case <-ctx.Done():
			return nil
		case <-w.s.done:
		}
	}
}

// RequestProgress implements storage.Interface: every watcher waiting for
// the next write, having delivered all before it, sends an EventProgress at
// the store's revision.
func (s *Store) RequestProgress(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("request progress: %w", err)
	}
	s.progressAsked++
	close(s.progress)
	s.progress = make(chan struct{})
	return nil
}

// forget unregisters a watcher whose goroutine is ending.
func (s *Store) forget(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watching, w)
}

// changesAfter returns up to watchBatch events for w with revisions above
// its cursor and advances the cursor past the writes it looked at. When it
// has caught up with the latest write it also returns a channel closed by
// the next write, one closed by the next RequestProgress, and the number of
// progress requests made so far.
func (s *Store) changesAfter(w *watcher) (_ []storage.Event, written, progress <-chan struct{}, asked int64, _ error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, nil, nil, 0, storage.ErrClosed
	}
	if w.cursor < s.compacted {
		return nil, nil, nil, 0, fmt.Errorf("at revision %d, compacted at %d: %w", w.cursor, s.compacted, storage.ErrCompacted)
	}
	var batch []storage.Event
	i := sort.Search(len(s.changes), func(i int) bool { return s.changes[i].kv.rev > w.cursor })
	for ; i < len(s.changes) && len(batch) < watchBatch; i++ {
		c := s.changes[i]
		if strings.HasPrefix(c.key, w.prefix) {
			batch = append(batch, c.event())
		}
		w.cursor = c.kv.rev
	}
	if i < len(s.changes) {
		return batch, nil, nil, 0, nil
	}
	return batch, s.written, s.progress, s.progressAsked, nil
}
