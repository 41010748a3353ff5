// Package memory is an in-process storage.Interface with etcd's semantics:
// one global revision, every version kept since the last compaction, lists
// at old revisions and watches that replay history.
//
// It is meant for tests and throwaway runs; nothing is persisted. The store
// never compacts on its own: call Compact, as the etcd backend's periodic
// compactor does, to bound the history kept.
//
// Compaction: after Compact(c), List at a revision r fails with
// storage.ErrCompacted iff r < c, and Watch from rev fails iff rev < c, that
// is iff some write after rev may be gone (the writes after c are all kept).
// A watcher that falls behind a compaction ends with storage.ErrCompacted.
package memory

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/google/btree"

	"github.com/listwatch/listwatch/storage"
)

// DefaultWatchBuffer is the number of events buffered for each watcher
// when WithWatchBuffer is not given.
const DefaultWatchBuffer = 100

// watchBatch bounds the events a watcher copies out of the history under one
// read lock, so a slow watcher holds at most this many besides its buffer.
const watchBatch = 256

// Option configures a Store.
type Option func(*Store)

// WithWatchBuffer sets how many events each watcher buffers before its
// delivery goroutine waits for the consumer; n < 1 means DefaultWatchBuffer.
func WithWatchBuffer(n int) Option {
	return func(s *Store) {
		if n >= 1 {
			s.watchBuffer = n
		}
	}
}

// version is one version of a key; a nil value marks a delete (tombstone).
type version struct {
	rev       int64
	createRev int64
	value     []byte
}

// keyHistory is every kept version of one key, oldest first.
type keyHistory struct {
	key      string
	versions []version
}

// latest returns the newest version of the key.
func (h *keyHistory) latest() version { return h.versions[len(h.versions)-1] }

// live reports whether the key currently exists.
func (h *keyHistory) live() bool { return h.latest().value != nil }

// at returns the version of the key as of rev and whether the key existed
// then.
func (h *keyHistory) at(rev int64) (version, bool) {
	if v := h.latest(); v.rev <= rev {
		// The common case, a read at a revision after the key's last write.
		return v, v.value != nil
	}
	i := sort.Search(len(h.versions), func(i int) bool { return h.versions[i].rev > rev }) - 1
	if i < 0 || h.versions[i].value == nil {
		return version{}, false
	}
	return h.versions[i], true
}

// change is one write in the history, as watches replay it.
type change struct {
	key  string
	kv   version // value nil: a delete
	prev version // rev 0: the write created the key
}

// Store is the in-memory backend. Create one with New.
type Store struct {
	watchBuffer int

	mu        sync.RWMutex
	keys      map[string]*keyHistory
	ordered   *btree.BTreeG[*keyHistory] // the same histories, by key
	changes   []change                   // writes after compacted, by revision
	rev       int64                      // latest revision written
	compacted int64                      // revision of the last Compact
	// compactedCh is closed and replaced whenever compacted grows.
	compactedCh chan struct{}
	closed      bool
	// written is closed and replaced on every write, waking the watchers
	// waiting for one; progress is closed and replaced by RequestProgress.
	written  chan struct{}
	progress chan struct{}
	// progressAsked counts the RequestProgress calls.
	progressAsked int64

	watching map[*watcher]struct{}
	done     chan struct{} // closed by Close
	watchers sync.WaitGroup
}

var _ storage.Interface = (*Store)(nil)

// New returns an empty store at revision 0.
func New(opts ...Option) *Store {
	s := &Store{
		watchBuffer: DefaultWatchBuffer,
		keys:        make(map[string]*keyHistory),
		ordered:     btree.NewG(32, func(a, b *keyHistory) bool { return a.key < b.key }),
		written:     make(chan struct{}),
		progress:    make(chan struct{}),
		compactedCh: make(chan struct{}),
		watching:    make(map[*watcher]struct{}),
		done:        make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// clone copies a caller's value so later changes to either side stay apart;
// the copy is never nil, since a nil value marks a delete.
func clone(b []byte) []byte { return append([]byte{}, b...) }

// check fails if the store is closed or ctx has ended; the caller holds mu.
func (s *Store) check(ctx context.Context) error {
	if s.closed {
		return storage.ErrClosed
	}
	return ctx.Err()
}

// write appends a version of key at the next revision and wakes watchers;
// the caller holds mu for writing.
func (s *Store) write(key string, h *keyHistory, createRev int64, value []byte) int64 {
	s.rev++
	v := version{rev: s.rev, createRev: createRev, value: value}
	if value == nil {
		v.createRev = 0
	}
	c := change{key: key, kv: v}
	if h == nil {
		h = &keyHistory{key: key}
		s.keys[key] = h
		s.ordered.ReplaceOrInsert(h)
	} else if h.live() {
		c.prev = h.latest()
	}
	h.versions = append(h.versions, v)
	s.changes = append(s.changes, c)
	close(s.written)
	s.written = make(chan struct{})
	return s.rev
}

// Create implements storage.Interface.
func (s *Store) Create(ctx context.Context, key string, value []byte) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, fmt.Errorf("create %q: %w", key, err)
	}
	if err := storage.CheckValue(value); err != nil {
		return 0, fmt.Errorf("create %q: %w", key, err)
	}
	h := s.keys[key]
	if h != nil && h.live() {
		return 0, fmt.Errorf("create %q: %w", key, storage.ErrKeyExists)
	}
	return s.write(key, h, s.rev+1, clone(value)), nil
}

// Get implements storage.Interface.
func (s *Store) Get(ctx context.Context, key string) (storage.KeyValue, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return storage.KeyValue{}, fmt.Errorf("get %q: %w", key, err)
	}
	h := s.keys[key]
	if h == nil || !h.live() {
		return storage.KeyValue{}, fmt.Errorf("get %q: %w", key, storage.ErrNotFound)
	}
	return keyValue(key, h.latest()), nil
}

// current returns the live history of key or the error Update and Delete
// report; the caller holds mu.
func (s *Store) current(key string, expected int64) (*keyHistory, error) {
	h := s.keys[key]
	if h == nil || !h.live() {
		return nil, storage.ErrNotFound
	}
	if expected != 0 && h.latest().rev != expected {
		return nil, fmt.Errorf("at revision %d, expected %d: %w", h.latest().rev, expected, storage.ErrConflict)
	}
	return h, nil
}

// Update implements storage.Interface.
func (s *Store) Update(ctx context.Context, key string, value []byte, expected int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, fmt.Errorf("update %q: %w", key, err)
	}
	if err := storage.CheckValue(value); err != nil {
		return 0, fmt.Errorf("update %q: %w", key, err)
	}
	if expected == 0 {
		// Only Delete treats 0 as "any revision"; no write has revision 0.
		expected = -1
	}
	h, err := s.current(key, expected)
	if err != nil {
		return 0, fmt.Errorf("update %q: %w", key, err)
	}
	return s.write(key, h, h.latest().createRev, clone(value)), nil
}

// Delete implements storage.Interface.
func (s *Store) Delete(ctx context.Context, key string, expected int64) (storage.KeyValue, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return storage.KeyValue{}, 0, fmt.Errorf("delete %q: %w", key, err)
	}
	h, err := s.current(key, expected)
	if err != nil {
		return storage.KeyValue{}, 0, fmt.Errorf("delete %q: %w", key, err)
	}
	deleted := keyValue(key, h.latest())
	return deleted, s.write(key, h, 0, nil), nil
}

// readRevision resolves the revision a read asks for (0: the latest) and
// fails if it is compacted or not yet written; the caller holds mu.
func (s *Store) readRevision(rev int64) (int64, error) {
	switch {
	case rev < 0:
		return 0, fmt.Errorf("revision %d: negative", rev)
	case rev == 0:
		return s.rev, nil
	case rev > s.rev:
		return 0, fmt.Errorf("revision %d, latest %d: %w", rev, s.rev, storage.ErrFutureRevision)
	case rev < s.compacted:
		return 0, fmt.Errorf("revision %d, compacted at %d: %w", rev, s.compacted, storage.ErrCompacted)
	}
	return rev, nil
}

// List implements storage.Interface. Its cost is logarithmic in the number
// of keys plus linear in the keys under prefix after StartKey, which it
// visits to count Remaining.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return storage.ListResult{}, fmt.Errorf("list %q: %w", prefix, err)
	}
	rev, err := s.readRevision(opts.Revision)
	if err != nil {
		return storage.ListResult{}, fmt.Errorf("list %q: %w", prefix, err)
	}
	if opts.Limit < 0 {
		return storage.ListResult{}, fmt.Errorf("list %q: negative limit %d", prefix, opts.Limit)
	}
	res := storage.ListResult{Revision: rev}
	start := max(prefix, opts.StartKey)
	s.ordered.AscendGreaterOrEqual(&keyHistory{key: start}, func(h *keyHistory) bool {
		if !strings.HasPrefix(h.key, prefix) {
			return false
		}
		v, ok := h.at(rev)
		switch {
		case !ok:
		case opts.Limit == 0 || int64(len(res.Items)) < opts.Limit:
			res.Items = append(res.Items, keyValue(h.key, v))
		default:
			res.Remaining++
		}
		return true
	})
	res.More = res.Remaining > 0
	return res, nil
}

// Revision implements storage.Interface.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return 0, fmt.Errorf("revision: %w", err)
	}
	return s.rev, nil
}

// Compact implements storage.Interface. Compacting at or below the revision
// of an earlier compaction does nothing.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("compact %d: %w", rev, err)
	}
	if rev > s.rev {
		return fmt.Errorf("compact %d, latest %d: %w", rev, s.rev, storage.ErrFutureRevision)
	}
	if rev <= s.compacted {
		return nil
	}
	s.compacted = rev
	close(s.compactedCh)
	s.compactedCh = make(chan struct{})
	var gone []*keyHistory
	s.ordered.Ascend(func(h *keyHistory) bool {
		// Keep the version current at rev, which Lists at rev read, and
		// everything after it; a key deleted at or before rev is gone.
		i := sort.Search(len(h.versions), func(i int) bool { return h.versions[i].rev > rev }) - 1
		if i >= 0 && h.versions[i].value == nil {
			i++
		}
		if i > 0 {
			h.versions = append([]version(nil), h.versions[i:]...)
		}
		if len(h.versions) == 0 {
			gone = append(gone, h)
		}
		return true
	})
	for _, h := range gone {
		delete(s.keys, h.key)
		s.ordered.Delete(h)
	}
	i := sort.Search(len(s.changes), func(i int) bool { return s.changes[i].kv.rev > rev })
	s.passBehind(s.changes[:i], rev)
	s.changes = append([]change(nil), s.changes[i:]...)
	return nil
}

// CompactedRevision implements storage.Interface: the revision of the last
// Compact, which no one else can make.
func (s *Store) CompactedRevision() (int64, <-chan struct{}) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.compacted, s.compactedCh
}

// passBehind moves to rev the cursor of every watcher behind it that has
// nothing to lose from dropped, the changes a compaction at rev discards: a
// watcher ends with ErrCompacted only if it missed a write under its prefix,
// not merely because its goroutine had not yet looked at others' writes.
func (s *Store) passBehind(dropped []change, rev int64) {
	for w := range s.watching {
		if w.cursor >= rev {
			continue
		}
		i := sort.Search(len(dropped), func(i int) bool { return dropped[i].kv.rev > w.cursor })
		lost := false
		for _, c := range dropped[i:] {
			if strings.HasPrefix(c.key, w.prefix) {
				lost = true
				break
			}
		}
		if !lost {
			w.cursor = rev
		}
	}
}

// Close implements storage.Interface: it ends every watch with
// storage.ErrClosed and waits for their goroutines to exit.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("close: %w", storage.ErrClosed)
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.watchers.Wait()
	return nil
}

// keyValue converts a version of key to its public form, with a copy of the
// value so callers cannot change the history.
func keyValue(key string, v version) storage.KeyValue {
	kv := storage.KeyValue{Key: key, Revision: v.rev, CreateRevision: v.createRev}
	if v.value != nil {
		kv.Value = clone(v.value)
	}
	return kv
}

// event converts a change to the watch event it becomes.
func (c change) event() storage.Event {
	ev := storage.Event{Type: storage.EventPut, KV: keyValue(c.key, c.kv)}
	if c.kv.value == nil {
		ev.Type = storage.EventDelete
	}
	if c.prev.rev != 0 {
		ev.Prev = keyValue(c.key, c.prev)
	}
	return ev
}
