package watchcache

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"weak"

	"k8s.io/apimachinery/pkg/watch"
)

// record is one storage event as the cache keeps it: the item before and
// after, and the watch events made from them, each made once and shared by
// every watcher that holds it. The record holds its events weakly: an
// event lives while watchers hold it, and is made again for a watcher that
// replays the window later, so the window keeps no decoded object and no
// framed encoding (those are as large as the object) for its life.
type record[T Object] struct {
	rev  int64
	key  string
	cur  *Item[T] // nil: the key is gone after the event
	prev *Item[T] // nil: the key did not exist before

	mu sync.Mutex
	// fresh is cur decoded, while the cache applies the record: the
	// events it makes for the watchers registered then need not decode it
	// again.
	fresh                    T
	hasFresh                 bool
	added, modified, deleted weak.Pointer[Event[T]]
}

// dropFresh lets go of the decoded object once the record is applied.
func (r *record[T]) dropFresh() {
	r.mu.Lock()
	defer r.mu.Unlock()
	var zero T
	r.fresh, r.hasFresh = zero, false
}

// event returns the shared event of type t for the record: Added and
// Modified carry the new version, Deleted the previous one's bytes at the
// record's revision.
func (r *record[T]) event(t watch.EventType) *Event[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	slot := &r.deleted
	switch t {
	case watch.Added:
		slot = &r.added
	case watch.Modified:
		slot = &r.modified
	}
	if ev := slot.Value(); ev != nil {
		return ev
	}
	var ev *Event[T]
	if t == watch.Deleted {
		last := r.prev
		it := newItemOf(last.key, r.rev, last.Value(), last.attrs, last.codec)
		ev = itemEvent(t, it)
		ev.base = &last.enc
	} else {
		ev = itemEvent(t, r.cur)
		if r.hasFresh {
			ev.setObject(r.fresh)
		}
	}
	*slot = weak.Make(ev)
	return ev
}

// size is what the record counts against Config.WindowBytes: the stored
// bytes of the version it made, or for a delete of the one it removed.
func (r *record[T]) size() int64 {
	if r.cur != nil {
		return int64(r.cur.size)
	}
	return int64(r.prev.size)
}

// window is a ring of the most recent records, in revision order. The
// ring grows as records come, up to size: a server holds a window per
// resource, most of which see few writes (hack/memory.sh: the rings made
// at their full size held 3.8 MB of the server's live heap).
type window[T Object] struct {
	buf  []*record[T]
	size int // the most records held
	head int // index of the oldest record
	n    int
	// bytes is the records' size, bounded by maxBytes.
	bytes, maxBytes int64
	// from is the revision after which every event is in the window: a
	// watch from rev can be served iff rev >= from.
	from int64
}

func (w *window[T]) init(size int, maxBytes int64) {
	w.size, w.maxBytes = size, maxBytes
}

// minWindowRing is the ring's first size.
const minWindowRing = 64

// reset empties the window, which then holds every event after rev.
func (w *window[T]) reset(rev int64) {
	clear(w.buf)
	w.head, w.n, w.from, w.bytes = 0, 0, rev, 0
}

// push appends r, evicting the oldest records while the window is full,
// in events or in bytes.
func (w *window[T]) push(r *record[T]) {
	size := r.size()
	for w.n > 0 && (w.n == w.size || w.bytes+size > w.maxBytes) {
		old := w.buf[w.head]
		w.from = old.rev
		w.bytes -= old.size()
		w.buf[w.head] = nil
		w.head = (w.head + 1) % len(w.buf)
		w.n--
	}
	if w.n == len(w.buf) {
		// Full below size: a ring twice as large, the oldest first.
		grown := make([]*record[T], min(max(2*len(w.buf), minWindowRing), w.size))
		for i := range w.n {
			grown[i] = w.at(i)
		}
		w.buf, w.head = grown, 0
	}
	w.buf[(w.head+w.n)%len(w.buf)] = r
	w.n++
	w.bytes += size
}

// at returns the i-th oldest record.
func (w *window[T]) at(i int) *record[T] { return w.buf[(w.head+i)%len(w.buf)] }

// index returns the position of the first record after rev.
func (w *window[T]) index(rev int64) int {
	return sort.Search(w.n, func(i int) bool { return w.at(i).rev > rev })
}

// since returns up to limit records after rev, oldest first, and false when
// some event after rev has left the window.
func (w *window[T]) since(rev int64, limit int) ([]*record[T], bool) {
	if rev < w.from {
		return nil, false
	}
	i := w.index(rev)
	end := min(w.n, i+limit)
	out := make([]*record[T], 0, end-i)
	for ; i < end; i++ {
		out = append(out, w.at(i))
	}
	return out, true
}

// changes returns, for every key written between revisions from and to
// (both at least w.from), the item it has at revision to (nil: absent).
func (w *window[T]) changes(from, to int64) map[string]*Item[T] {
	m := make(map[string]*Item[T])
	if from <= to {
		for i, end := w.index(from), w.index(to); i < end; i++ {
			r := w.at(i)
			m[r.key] = r.cur
		}
		return m
	}
	// Rolling back: the item at to is the one before the first write after
	// it, so walk backwards and let the earliest write win.
	for i := w.index(from) - 1; i >= 0 && w.at(i).rev > to; i-- {
		r := w.at(i)
		m[r.key] = r.prev
	}
	return m
}

// snapshot is the state at one revision, sorted by key; it is never
// modified once built, so readers use it without locks.
type snapshot[T Object] struct {
	rev   int64
	items []*Item[T]
	used  uint64
}

// search returns the index of the first item at or after key.
func (s *snapshot[T]) search(key string) int {
	return sort.Search(len(s.items), func(i int) bool { return s.items[i].key >= key })
}

// maxSnapshots bounds the snapshots kept for paged lists and for building
// the next snapshot cheaply.
const maxSnapshots = 8

// snapshots is a small least-recently-used set of snapshots.
type snapshots[T Object] struct {
	list []*snapshot[T]
	tick uint64
}

func (s *snapshots[T]) get(rev int64) *snapshot[T] {
	for _, sn := range s.list {
		if sn.rev == rev {
			s.tick++
			sn.used = s.tick
			return sn
		}
	}
	return nil
}

// nearest returns the kept snapshot closest to rev among those at or after
// from, or nil.
func (s *snapshots[T]) nearest(rev, from int64) *snapshot[T] {
	var best *snapshot[T]
	dist := func(sn *snapshot[T]) int64 { return max(sn.rev-rev, rev-sn.rev) }
	for _, sn := range s.list {
		if sn.rev >= from && (best == nil || dist(sn) < dist(best)) {
			best = sn
		}
	}
	return best
}

func (s *snapshots[T]) add(sn *snapshot[T]) {
	if s.get(sn.rev) != nil {
		return
	}
	s.tick++
	sn.used = s.tick
	if len(s.list) < maxSnapshots {
		s.list = append(s.list, sn)
		return
	}
	oldest := 0
	for i, x := range s.list {
		if x.used < s.list[oldest].used {
			oldest = i
		}
	}
	s.list[oldest] = sn
}

// removeBelow drops the snapshots older than rev.
func (s *snapshots[T]) removeBelow(rev int64) {
	s.list = slices.DeleteFunc(s.list, func(sn *snapshot[T]) bool { return sn.rev < rev })
}

// merge returns base with the changed keys replaced (nil: removed), sorted.
func merge[T Object](base []*Item[T], changes map[string]*Item[T]) []*Item[T] {
	keys := make([]string, 0, len(changes))
	for k := range changes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*Item[T], 0, len(base)+len(keys))
	i, j := 0, 0
	for i < len(base) || j < len(keys) {
		if j == len(keys) || (i < len(base) && base[i].key < keys[j]) {
			out = append(out, base[i])
			i++
			continue
		}
		if i < len(base) && base[i].key == keys[j] {
			i++
		}
		if it := changes[keys[j]]; it != nil {
			out = append(out, it)
		}
		j++
	}
	return out
}

// snapshotAt returns the state at rev, or nil when rev is outside the
// window. A snapshot kept from before the window's start is not used: as
// kube-apiserver drops such snapshots, revisions older than the window are
// left to storage, so that they expire (410) once storage compacts them
// instead of living on in the cache.
func (c *Cache[T]) snapshotAt(rev int64) *snapshot[T] {
	c.mu.Lock()
	if rev < c.window.from || rev > c.rev {
		c.mu.Unlock()
		return nil
	}
	if sn := c.snaps.get(rev); sn != nil {
		c.mu.Unlock()
		return sn
	}
	base := c.snaps.nearest(rev, c.window.from)
	var full []*Item[T]
	var fullRev int64
	if base == nil {
		// No snapshot to start from: copy the state under the lock (the
		// cheap part) and sort it outside.
		full = make([]*Item[T], 0, len(c.state))
		for _, it := range c.state {
			full = append(full, it)
		}
		fullRev = c.rev
	}
	from := fullRev
	if base != nil {
		from = base.rev
	}
	changes := c.window.changes(from, rev)
	c.mu.Unlock()

	if base == nil {
		slices.SortFunc(full, func(a, b *Item[T]) int { return strings.Compare(a.key, b.key) })
		base = &snapshot[T]{rev: fullRev, items: full}
	}
	sn := base
	if len(changes) > 0 || base.rev != rev {
		sn = &snapshot[T]{rev: rev, items: merge(base.items, changes)}
	}
	c.mu.Lock()
	c.snaps.add(base)
	c.snaps.add(sn)
	c.mu.Unlock()
	return sn
}
