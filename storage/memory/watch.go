package memory

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/listwatch/listwatch/storage"
)

// watcher delivers the writes under a prefix from the store's history. Its
// goroutine reads the history in batches from a cursor, so a consumer that
// never reads holds up nothing but its own goroutine and buffer: writers
// never wait for it, and it ends with storage.ErrCompacted once a
// compaction passes its cursor.
type watcher struct {
	s      *Store
	prefix string
	events chan storage.Event
	// cursor is the revision of the last write the watcher has looked at.
	// Only the watcher's goroutine writes it holding s.mu for reading, and
	// Compact holding it for writing, so the two never overlap.
	cursor int64
	stop   chan struct{}
	exited chan struct{}
	once   sync.Once

	mu  sync.Mutex
	err error
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
	w := &watcher{
		s:      s,
		prefix: prefix,
		cursor: from,
		events: make(chan storage.Event, s.watchBuffer),
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	s.watchers.Add(1)
	s.watching[w] = struct{}{}
	go w.run(ctx)
	return w, nil
}

// run delivers the writes after the cursor until the watch ends.
func (w *watcher) run(ctx context.Context) {
	defer w.s.watchers.Done()
	defer close(w.exited)
	defer close(w.events)
	defer w.s.forget(w)
	// sent is the revision of the last event sent, progress included;
	// answered the progress requests answered (or overtaken by events).
	var sent, answered int64
	for {
		batch, written, progress, asked, err := w.s.changesAfter(w)
		if err != nil {
			w.mu.Lock()
			w.err = fmt.Errorf("watch %q: %w", w.prefix, err)
			w.mu.Unlock()
			return
		}
		for _, ev := range batch {
			select {
			case w.events <- ev:
				sent = ev.KV.Revision
			case <-ctx.Done():
				return
			case <-w.stop:
				return
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
				case w.events <- storage.Event{Type: storage.EventProgress, KV: storage.KeyValue{Revision: w.cursor}}:
					sent = w.cursor
				default: // a hint: not worth waiting for the consumer
				}
			}
		}
		select {
		case <-written:
		case <-progress:
		case <-ctx.Done():
			return
		case <-w.stop:
			return
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

func (w *watcher) Events() <-chan storage.Event { return w.events }

func (w *watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Stop implements storage.Watcher; it returns once the watcher's goroutine
// has exited.
func (w *watcher) Stop() {
	w.once.Do(func() { close(w.stop) })
	<-w.exited
}
