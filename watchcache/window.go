package watchcache

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// record is one storage event as the cache keeps it: the item before and
// after, each decoded once, and the watch events made from them, each made
// once and shared by every watcher that receives it.
type record[T Object] struct {
	rev  int64
	key  string
	cur  *item[T] // nil: the key is gone after the event
	prev *item[T] // nil: the key did not exist before

	added, modified, deleted lazyEvent[T]
}

type lazyEvent[T Object] struct {
	once sync.Once
	ev   *Event[T]
}

// event returns the shared event of type t for the record: Added and
// Modified carry the new object, Deleted the previous one at the record's
// revision.
func (r *record[T]) event(t watch.EventType) *Event[T] {
	switch t {
	case watch.Added:
		r.added.once.Do(func() { r.added.ev = newEvent(t, r.cur.obj, r.rev, &r.cur.enc) })
		return r.added.ev
	case watch.Modified:
		r.modified.once.Do(func() { r.modified.ev = newEvent(t, r.cur.obj, r.rev, &r.cur.enc) })
		return r.modified.ev
	default:
		r.deleted.once.Do(func() {
			r.deleted.ev = &Event[T]{Type: watch.Deleted, Object: withRevision(r.prev.obj, r.rev), Revision: r.rev, base: &r.prev.enc}
		})
		return r.deleted.ev
	}
}

// withRevision returns a copy of obj with resourceVersion rev; the original
// is shared and must not change.
func withRevision[T Object](obj T, rev int64) T {
	cp, ok := obj.DeepCopyObject().(T)
	if !ok {
		return obj // a DeepCopyObject of another type: keep the old version rather than fail
	}
	cp.SetResourceVersion(strconv.FormatInt(rev, 10))
	return cp
}

// window is a ring of the most recent records, in revision order.
type window[T Object] struct {
	buf  []*record[T]
	head int // index of the oldest record
	n    int
	// from is the revision after which every event is in the window: a
	// watch from rev can be served iff rev >= from.
	from int64
}

func (w *window[T]) init(size int) { w.buf = make([]*record[T], size) }

// reset empties the window, which then holds every event after rev.
func (w *window[T]) reset(rev int64) {
	clear(w.buf)
	w.head, w.n, w.from = 0, 0, rev
}

// push appends r, evicting the oldest record when the window is full.
func (w *window[T]) push(r *record[T]) {
	if w.n == len(w.buf) {
		w.from = w.buf[w.head].rev
		w.buf[w.head] = r
		w.head = (w.head + 1) % len(w.buf)
		return
	}
	w.buf[(w.head+w.n)%len(w.buf)] = r
	w.n++
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
func (w *window[T]) changes(from, to int64) map[string]*item[T] {
	m := make(map[string]*item[T])
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
	items []*item[T]
	used  uint64

	objsOnce sync.Once
	objs     []T
	encs     []*Encodings
}

// objects returns the objects of items, built on first use: lists without
// a selector then copy a slice instead of visiting every item.
func (s *snapshot[T]) objects() []T {
	s.objsOnce.Do(func() {
		s.objs = make([]T, len(s.items))
		s.encs = make([]*Encodings, len(s.items))
		for i, it := range s.items {
			s.objs[i], s.encs[i] = it.obj, &it.enc
		}
	})
	return s.objs
}

// encodings returns the serialization memos of items, parallel to objects.
func (s *snapshot[T]) encodings() []*Encodings {
	s.objects()
	return s.encs
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
func merge[T Object](base []*item[T], changes map[string]*item[T]) []*item[T] {
	keys := make([]string, 0, len(changes))
	for k := range changes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*item[T], 0, len(base)+len(keys))
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
	var full []*item[T]
	var fullRev int64
	if base == nil {
		// No snapshot to start from: copy the state under the lock (the
		// cheap part) and sort it outside.
		full = make([]*item[T], 0, len(c.state))
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
		slices.SortFunc(full, func(a, b *item[T]) int { return strings.Compare(a.key, b.key) })
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
