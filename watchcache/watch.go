package watchcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/watch"
)

// ErrTooSlow ends a watcher whose buffer was full when the cache had an
// event for it; the client should watch again from the last
// resourceVersion it received.
var ErrTooSlow = errors.New("watchcache: watcher too slow: buffer full")

// catchUpBatch bounds the records a catching-up watcher copies out of the
// window under one lock.
const catchUpBatch = 1024

// WatchOptions are the parameters of a watch, as in metav1.ListOptions.
type WatchOptions struct {
	// ResourceVersion is where the watch starts: "", "0" or a revision.
	ResourceVersion string
	// ResourceVersionMatch must be NotOlderThan when SendInitialEvents is
	// set, and empty otherwise.
	ResourceVersionMatch metav1.ResourceVersionMatch
	// SendInitialEvents asks for the state as ADDED events followed by a
	// BOOKMARK marking their end (the WatchList protocol).
	SendInitialEvents *bool
	// AllowBookmarks asks for periodic BOOKMARK events.
	AllowBookmarks bool
	// Label and Field select the objects the watcher sees; nil selects all.
	Label labels.Selector
	Field fields.Selector
	// Shard selects the objects whose uid or namespace hashes into its
	// ranges (KEP-5866's shardSelector, as kube's
	// k8s.io/apiserver/pkg/sharding.Parse makes it); nil or empty selects
	// all. Neither field changes in an object's life, so a watcher sees
	// every event of an object in its shard and none of the others: no
	// object moves into or out of a shard.
	Shard sharding.Selector
	// Namespace, when set, limits the watch to one namespace.
	Namespace string
}

// Watcher is one client watch. Its events arrive in revision order, each
// change once, with no gaps.
type Watcher[T Object] struct {
	c         *Cache[T]
	out       chan *Event[T]
	stopc     chan struct{}
	stopOnce  sync.Once
	stopAfter func() bool
	pred      predicate[T]
	bookmarks bool

	// Guarded by c.mu. Until registered, the watcher's own goroutine sends
	// to out (initial events and the replay from the window); from then on
	// the cache's dispatcher does. out is closed by whoever ends the watcher,
	// under c.mu, once (ended).
	registered bool
	ended      bool
	pos        int64 // the revision of the last event delivered or skipped

	errMu sync.Mutex
	err   error
}

// Events delivers the watch events; it is closed when the watch ends, after
// which Err says why.
func (w *Watcher[T]) Events() <-chan *Event[T] { return w.out }

// Err returns why the watch ended, once Events is closed: nil after Stop or
// the end of the watch's context; ErrTooSlow (wrapped) for a consumer that
// fell behind; a 410 Expired *apierrors.StatusError when the events after
// its position are gone (the client must relist); ErrClosed when the cache
// was closed.
func (w *Watcher[T]) Err() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

// Stop ends the watch and releases its resources; it is idempotent.
func (w *Watcher[T]) Stop() {
	w.stopOnce.Do(func() {
		close(w.stopc)
		w.c.mu.Lock()
		defer w.c.mu.Unlock()
		if w.stopAfter != nil {
			w.stopAfter()
		}
		// An unregistered watcher is ended by its goroutine, which sees stopc.
		if w.registered {
			w.c.endLocked(w, nil)
		}
	})
}

// endLocked ends w with err (nil: stopped); c.mu must be held.
func (c *Cache[T]) endLocked(w *Watcher[T], err error) {
	if w.ended {
		return
	}
	w.ended = true
	delete(c.watchers, w)
	w.errMu.Lock()
	w.err = err
	w.errMu.Unlock()
	close(w.out)
}

// deliverLocked hands rec to the registered watcher w without blocking,
// ending w if its buffer is full; c.mu must be held.
func (c *Cache[T]) deliverLocked(w *Watcher[T], rec *record[T]) {
	if rec.rev <= w.pos {
		return // the watch starts after rec
	}
	w.pos = rec.rev
	ev := w.pred.convert(rec)
	if ev == nil {
		return
	}
	select {
	case w.out <- ev:
	default:
		c.stats.TooSlow++
		c.log.Info("watchcache: closing watcher that fell behind", "rev", rec.rev, "buffer", cap(w.out))
		c.endLocked(w, fmt.Errorf("%w (%d events) at resource version %d", ErrTooSlow, cap(w.out), rec.rev))
	}
}

// predicate is a watcher's or a list's selection.
type predicate[T Object] struct {
	label labels.Selector
	field fields.Selector
	shard *shard
	// nsPrefix, for a namespace's selection, is the prefix of its keys
	// (Prefix, namespace, "/": keys are Prefix, namespace, name, as in
	// kube-apiserver's storage).
	nsPrefix string
}

// newPredicate is the selection of l, f, the shard sh (nil: all) and the
// namespace ns (all: "") of a cache whose keys start with prefix.
func newPredicate[T Object](l labels.Selector, f fields.Selector, sh *shard, prefix, ns string) predicate[T] {
	if l != nil && l.Empty() {
		l = nil
	}
	if f != nil && f.Empty() {
		f = nil
	}
	p := predicate[T]{label: l, field: f, shard: sh}
	if ns != "" {
		p.nsPrefix = prefix + ns + "/"
	}
	return p
}

// all reports whether the predicate selects everything.
func (p predicate[T]) all() bool {
	return p.label == nil && p.field == nil && p.shard == nil && p.nsPrefix == ""
}

// matches reports whether it (nil: absent) is selected.
func (p predicate[T]) matches(it *Item[T]) bool {
	if it == nil {
		return false
	}
	if p.nsPrefix != "" && !strings.HasPrefix(it.key, p.nsPrefix) {
		return false
	}
	if p.shard != nil && !p.shard.matches(it.attrs.hashes) {
		return false
	}
	if p.label != nil && !p.label.Matches((*labelsOf)(it.attrs)) {
		return false
	}
	return p.field == nil || p.field.Matches((*fieldsOf)(it.attrs))
}

// convert returns the event rec is for a watcher with this predicate, or nil
// when rec does not concern it: a change into the selection is ADDED, one
// out of it DELETED.
func (p predicate[T]) convert(rec *record[T]) *Event[T] {
	now, before := p.matches(rec.cur), p.matches(rec.prev)
	switch {
	case now && !before:
		return rec.event(watch.Added)
	case now && before:
		return rec.event(watch.Modified)
	case before:
		return rec.event(watch.Deleted)
	}
	return nil
}

// Watch starts a watch; see the package documentation for how
// ResourceVersion and SendInitialEvents choose where it starts. The watch
// ends when ctx ends, Stop is called, or the cache ends it (see
// Watcher.Err).
func (c *Cache[T]) Watch(ctx context.Context, opts WatchOptions) (*Watcher[T], error) {
	sh, err := newShard(opts.Shard)
	if err := c.begin(ctx, cmp.Or(validateWatch(opts), err)); err != nil {
		return nil, err
	}
	rv, err := ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	var (
		initial []*Item[T]
		pos     int64
		end     bool
	)
	switch sie := opts.SendInitialEvents; {
	case sie != nil && *sie:
		if opts.ResourceVersion == "" {
			// The WatchList protocol makes "" a consistent read.
			if rv, err = c.cfg.Storage.Revision(ctx); err != nil {
				return nil, c.storageError(err, 0, false)
			}
		}
		sn, err := c.stateNotOlderThan(ctx, rv)
		if err != nil {
			return nil, err
		}
		initial, pos, end = sn.items, sn.rev, true
	case rv == 0 && sie == nil:
		sn, err := c.latest(ctx)
		if err != nil {
			return nil, err
		}
		initial, pos = sn.items, sn.rev
	case rv == 0:
		pos = c.ResourceVersion()
	default:
		if err := c.checkStart(ctx, rv); err != nil {
			return nil, err
		}
		pos = rv
	}
	w := &Watcher[T]{
		c:         c,
		out:       make(chan *Event[T], c.cfg.WatcherBuffer),
		stopc:     make(chan struct{}),
		pred:      newPredicate[T](opts.Label, opts.Field, sh, c.cfg.Prefix, opts.Namespace),
		bookmarks: opts.AllowBookmarks,
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	w.stopAfter = context.AfterFunc(ctx, w.Stop)
	if len(initial) == 0 && !end && pos >= c.window.from && c.window.index(pos) == c.window.n {
		// Nothing to send first: the dispatcher takes over at once.
		w.registered, w.pos = true, pos
		c.watchers[w] = struct{}{}
		c.mu.Unlock()
		return w, nil
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go w.run(initial, pos, end)
	return w, nil
}

// run sends the initial events and replays the window from pos, then
// registers w with the dispatcher once it has caught up. Until then the
// watcher's own goroutine waits for its consumer, so a slow consumer delays
// no one else; it ends with 410 if the window moves past it meanwhile.
func (w *Watcher[T]) run(initial []*Item[T], pos int64, end bool) {
	c := w.c
	defer c.wg.Done()
	for _, it := range initial {
		if !w.pred.matches(it) {
			continue
		}
		// Initial events are not shared (keeping one per cached object
		// would keep its framed encodings for as long as the object
		// lives), but the object's own serializations are.
		if !w.send(itemEvent(watch.Added, it)) {
			return
		}
	}
	if end && w.bookmarks && !w.send(c.bookmarkEvent(pos, true)) {
		return
	}
	for {
		c.mu.Lock()
		select {
		case <-w.stopc:
			c.endLocked(w, nil)
			c.mu.Unlock()
			return
		default:
		}
		if c.closed {
			c.endLocked(w, ErrClosed)
			c.mu.Unlock()
			return
		}
		recs, ok := c.window.since(pos, catchUpBatch)
		if !ok {
			c.endLocked(w, errTooOld(pos, c.window.from))
			c.mu.Unlock()
			return
		}
		if len(recs) == 0 {
			w.registered = true
			w.pos = pos
			c.watchers[w] = struct{}{}
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		for _, r := range recs {
			pos = r.rev
			if ev := w.pred.convert(r); ev != nil && !w.send(ev) {
				return
			}
		}
	}
}

// send delivers ev from the watcher's goroutine, blocking until the
// consumer takes it; false means the watcher has ended.
func (w *Watcher[T]) send(ev *Event[T]) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.stopc:
		w.end(nil)
	case <-w.c.ctx.Done():
		w.end(ErrClosed)
	}
	return false
}

func (w *Watcher[T]) end(err error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.c.endLocked(w, err)
}

// checkStart checks that a watch can start after rv: the events after it
// must still be in the window, storage must not have compacted them (the
// window would still have them, but kube's clients expect a revision etcd
// dropped to have expired for every API server on it), and rv must have
// been written (waiting up to FreshTimeout for it).
func (c *Cache[T]) checkStart(ctx context.Context, rv int64) error {
	c.mu.Lock()
	oldest, cur := max(c.window.from, c.compacted), c.rev
	c.mu.Unlock()
	if rv < oldest {
		return errTooOld(rv, oldest)
	}
	if rv <= cur {
		return nil
	}
	srev, err := c.cfg.Storage.Revision(ctx)
	if err != nil {
		return fmt.Errorf("watchcache %s: storage revision: %w", c.cfg.Prefix, err)
	}
	if rv <= srev {
		// Written, under another prefix or not yet seen: the watch skips
		// the events up to rv.
		return nil
	}
	return c.waitFor(ctx, rv, c.cfg.FreshTimeout)
}
