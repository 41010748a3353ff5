package watchcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/defaults"
	"github.com/listwatch/listwatch/storage"
)

// Defaults for the zero fields of Config.
const (
	DefaultWindowSize       = 10000
	DefaultWindowBytes      = 256 << 20
	DefaultWatcherBuffer    = 256
	DefaultBookmarkInterval = time.Minute
	DefaultFreshTimeout     = 3 * time.Second
	DefaultProgressTimeout  = 250 * time.Millisecond
)

// Object is what a cache holds: a typed built-in (*v1.Pod) or an
// *unstructured.Unstructured custom resource.
type Object interface {
	runtime.Object
	metav1.Object
}

// Config configures a Cache; Storage, Prefix and Decode are required.
type Config[T Object] struct {
	// Storage is the backend the cache reads and watches.
	Storage storage.Interface
	// Prefix is the key prefix of the resource, ending with "/", e.g.
	// "/pods/".
	Prefix string
	// Decode turns a stored value into an object whose resourceVersion is
	// kv.Revision. It is called once per write, whatever the watchers, to
	// read the object's attributes, and again whenever a cached object is
	// asked for (Item.Object, Event.Object), since the cache keeps objects
	// as their stored bytes: it must decode a value it decoded once the
	// same way again, at any revision.
	Decode func(kv storage.KeyValue) (T, error)
	// Attrs returns the labels and the selectable fields of an object
	// (metadata.name, metadata.namespace and per-resource fields such as
	// spec.nodeName); nil means DefaultAttrs.
	Attrs func(obj T) (labels.Set, fields.Set, error)
	// Scan, when set, reads a stored value's Attributes without decoding
	// it: what Attrs and the object's uid and namespace would be of
	// Decode's object, failing on the values Decode fails on. The cache
	// then decodes a version only when it is asked for (Item.Object,
	// Event.Object), and Preset is given T's zero value in place of the
	// object: most versions are served from their bytes and never
	// decoded.
	Scan func(kv storage.KeyValue) (Attributes, error)
	// Preset, when set, is called with each object decoded from storage,
	// and the memo of its serializations, before any list or watch can
	// see it: a caller that already holds the object in a form that
	// serializes more cheaply than obj presets the memo
	// (Encodings.Preset).
	Preset func(kv storage.KeyValue, obj T, enc *Encodings)
	// Keep, when set, returns the bytes the cache keeps of a stored value
	// at kv.Revision in place of kv.Value (Item.Value), such as the
	// object's wire form; Decode must decode them as it decodes kv.Value,
	// at any revision. nil keeps kv.Value.
	Keep func(kv storage.KeyValue) []byte
	// New returns an empty object, used for BOOKMARK events; nil allocates
	// the type T points to.
	New func() T
	// WindowSize is the number of recent events kept for watches that
	// resume from a resourceVersion; 0 means DefaultWindowSize.
	WindowSize int
	// WindowBytes bounds the stored bytes of the objects the window's
	// events carry (each event counted by the bytes of the version it
	// made, or for a delete of the version it removed): the oldest events
	// leave the window when either bound is reached; 0 means
	// DefaultWindowBytes.
	WindowBytes int64
	// WatcherBuffer is the number of events buffered for each watcher
	// before it is cut off as too slow; 0 means DefaultWatcherBuffer.
	WatcherBuffer int
	// BookmarkInterval is the period of BOOKMARK events; 0 means
	// DefaultBookmarkInterval.
	BookmarkInterval time.Duration
	// FreshTimeout bounds how long a request for a resourceVersion newer
	// than storage's waits for it before failing with 504 Too large
	// resource version; 0 means DefaultFreshTimeout.
	FreshTimeout time.Duration
	// ProgressTimeout bounds how long a read at a revision storage has
	// written but the cache has not seen (a consistent list, at storage's
	// current revision) waits for storage's watch to report it has
	// reached it (storage.Interface's RequestProgress) before the read goes
	// to storage instead; 0 means DefaultProgressTimeout.
	ProgressTimeout time.Duration
	// Logger receives the cache's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Attributes are what the cache reads of each version written: its labels
// and selectable fields, for selectors, and its uid and namespace, for
// shard selectors.
type Attributes struct {
	Labels         labels.Set
	Fields         fields.Set
	UID, Namespace string
}

// DefaultAttrs returns the object's labels and the fields metadata.name and
// metadata.namespace.
func DefaultAttrs[T Object](obj T) (labels.Set, fields.Set, error) {
	return labels.Set(obj.GetLabels()), fields.Set{
		"metadata.name":      obj.GetName(),
		"metadata.namespace": obj.GetNamespace(),
	}, nil
}

// newOf returns a function allocating the type T points to.
func newOf[T Object]() (func() T, error) {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Pointer {
		return nil, fmt.Errorf("watchcache: Config.New is required for non-pointer type %v", t)
	}
	return func() T { return reflect.New(t.Elem()).Interface().(T) }, nil
}

// ErrClosed ends the watchers of a cache that was closed and fails the calls
// made after Close.
var ErrClosed = errors.New("watchcache: closed")

// Cache is the watch cache of one resource. Its methods are safe for
// concurrent use.
type Cache[T Object] struct {
	cfg   Config[T]
	log   *slog.Logger
	codec codec[T] // the items'

	// ctx is Run's: set before ready is closed, so that the watchers,
	// which start only once the cache is ready, may read it.
	ctx     context.Context
	running atomic.Bool
	// ready is closed once the first list is in, or when Run ends.
	ready chan struct{}
	wg    sync.WaitGroup // watcher goroutines

	mu sync.Mutex
	// rev is the newest revision the cache has seen: its state is storage's
	// state under Prefix at rev.
	rev int64
	// advanced is closed and replaced whenever rev grows.
	advanced chan struct{}
	state    map[string]*Item[T]
	window   window[T]
	closed   bool
	watchers map[*Watcher[T]]struct{}
	snaps    snapshots[T]
	stats    Stats
	// compacted is the newest storage compaction the cache knows of: no
	// list at, nor watch from, a revision below it is served from memory.
	compacted int64

	// dict is what the versions are packed against (pack.go), made from
	// the first one packed; hot holds the newest versions the cache took
	// in, up to plainVersions, which stay plain. Only the goroutine that
	// applies storage's events reads and writes them.
	dict  *dictionary
	dicts int       // the dictionaries made
	keys  keyTables // the fields' keys its versions share
	hot   hotVersions[T]
}

// Stats are counters for metrics.
type Stats struct {
	// ResourceVersion is the newest revision the cache has seen.
	ResourceVersion int64
	// Objects is the number of objects cached; WindowEvents the number of
	// events in the window, WindowBytes their objects' stored bytes
	// (Config.WindowBytes).
	Objects, WindowEvents int
	WindowBytes           int64
	// Watchers is the number of live watchers past their initial events.
	Watchers int
	// Compacted is the newest storage compaction the cache knows of.
	Compacted int64
	// Events counts the storage events applied; Relists the relists after
	// compaction; TooSlow the watchers cut off for falling behind.
	Events, Relists, TooSlow int64
	// FreshReads counts the reads at a revision the cache had not seen
	// that it served once storage's watch reported progress to it;
	// FreshFallbacks those that went to storage instead (kube-apiserver's
	// consistent reads from cache and their fallbacks).
	FreshReads, FreshFallbacks int64
}

// Stats returns the cache's current counters.
func (c *Cache[T]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.ResourceVersion, s.Objects, s.WindowEvents, s.WindowBytes, s.Watchers, s.Compacted = c.rev, len(c.state), c.window.n, c.window.bytes, len(c.watchers), c.compacted
	return s
}

// New returns the cache of cfg. It does no I/O and starts nothing: Run
// lists and follows storage. Lists and watches made before Run has listed
// wait for it (or for their context); Get and ResourceVersion see an empty
// cache at revision 0 until then.
func New[T Object](cfg Config[T]) (*Cache[T], error) {
	if cfg.Storage == nil || cfg.Decode == nil || cfg.Prefix == "" {
		return nil, errors.New("watchcache: Config needs Storage, Prefix and Decode")
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		// Continue tokens hold keys after the prefix, as kube's do.
		return nil, fmt.Errorf("watchcache: Prefix %q does not end with /", cfg.Prefix)
	}
	if cfg.Attrs == nil {
		cfg.Attrs = DefaultAttrs[T]
	}
	if cfg.New == nil {
		var err error
		if cfg.New, err = newOf[T](); err != nil {
			return nil, err
		}
	}
	defaults.Positive(&cfg.WindowSize, DefaultWindowSize)
	defaults.Positive(&cfg.WindowBytes, DefaultWindowBytes)
	defaults.Positive(&cfg.WatcherBuffer, DefaultWatcherBuffer)
	defaults.Positive(&cfg.BookmarkInterval, DefaultBookmarkInterval)
	defaults.Positive(&cfg.FreshTimeout, DefaultFreshTimeout)
	defaults.Positive(&cfg.ProgressTimeout, DefaultProgressTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Cache[T]{
		cfg:      cfg,
		log:      cfg.Logger.With("prefix", cfg.Prefix),
		ready:    make(chan struct{}),
		advanced: make(chan struct{}),
		watchers: make(map[*Watcher[T]]struct{}),
	}
	c.codec = codec[T]{decode: cfg.Decode, empty: cfg.New, log: c.log}
	c.window.init(cfg.WindowSize, cfg.WindowBytes)
	return c, nil
}

// Run lists Prefix (retrying with backoff until storage answers), then
// follows storage's watch until ctx ends, re-watching after errors and
// relisting after compaction. When ctx ends it ends every watcher with
// ErrClosed, waits for their goroutines and returns nil; the cache then
// answers ErrClosed. Run may be called once.
func (c *Cache[T]) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("watchcache: Run called twice")
	}
	c.ctx = ctx
	defer c.wg.Wait()
	defer c.shutdown()
	compacted, compactions := c.cfg.Storage.CompactedRevision()
	c.noteCompacted(compacted)
	w := c.rewatch(true)
	if w == nil {
		return nil
	}
	close(c.ready)
	c.run(w, compactions)
	return nil
}

// Ready is closed once the cache holds its first list, or Run has ended.
func (c *Cache[T]) Ready() <-chan struct{} { return c.ready }

// begin starts a list or a watch: the error of its options' validation,
// invalid, if any, else awaitReady's.
func (c *Cache[T]) begin(ctx context.Context, invalid error) error {
	if invalid != nil {
		return invalid
	}
	return c.awaitReady(ctx)
}

// awaitReady waits until the cache is ready or ctx ends.
func (c *Cache[T]) awaitReady(ctx context.Context) error {
	select {
	case <-c.ready:
		return nil
	default:
	}
	select {
	case <-c.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ResourceVersion returns the newest revision the cache has seen.
func (c *Cache[T]) ResourceVersion() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rev
}

// Get returns the cached object under key (the full storage key) at the
// cache's newest revision, decoded for the caller (Item.Object).
func (c *Cache[T]) Get(key string) (T, bool) {
	it, ok := c.Item(key)
	if !ok {
		var zero T
		return zero, false
	}
	return it.Object(), true
}

// Item returns the version of the object under key (the full storage
// key) at the cache's newest revision, as the cache holds it.
func (c *Cache[T]) Item(key string) (*Item[T], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it, ok := c.state[key]
	return it, ok
}

// newItem decodes kv into an item, returning the object decoded too for
// a caller that has a use for it now. The item shares the attributes of
// like, an earlier version, when they are the same.
func (c *Cache[T]) newItem(kv storage.KeyValue, like *Item[T]) (it *Item[T], obj T, decoded bool, err error) {
	a, obj, decoded, err := c.attributes(kv)
	if err != nil {
		return nil, obj, false, err
	}
	var same *attrs
	if like != nil {
		// The key's string too, rather than one per version.
		same, kv.Key = like.attrs, like.key
	}
	value := kv.Value
	if c.cfg.Keep != nil {
		value = c.cfg.Keep(kv)
	}
	it = newItemOf(kv.Key, kv.Revision, value, newAttrs(a.Labels, a.Fields, a.hashes(), same, &c.keys), &c.codec)
	if c.cfg.Preset != nil {
		c.cfg.Preset(kv, obj, &it.enc)
	}
	return it, obj, decoded, nil
}

// attributes reads the Attributes of a stored value: with Config.Scan
// when set, else from the object Decode makes, which it returns too
// (decoded true).
func (c *Cache[T]) attributes(kv storage.KeyValue) (a Attributes, obj T, decoded bool, err error) {
	if c.cfg.Scan != nil {
		if a, err = c.cfg.Scan(kv); err != nil {
			return a, obj, false, fmt.Errorf("decode %s at %d: %w", kv.Key, kv.Revision, err)
		}
		return a, obj, false, nil
	}
	if obj, err = c.cfg.Decode(kv); err != nil {
		return a, obj, false, fmt.Errorf("decode %s at %d: %w", kv.Key, kv.Revision, err)
	}
	if a.Labels, a.Fields, err = c.cfg.Attrs(obj); err != nil {
		return a, obj, false, fmt.Errorf("attributes of %s at %d: %w", kv.Key, kv.Revision, err)
	}
	a.UID, a.Namespace = string(obj.GetUID()), obj.GetNamespace()
	return a, obj, true, nil
}

// listStorage reads the whole prefix at storage's latest revision, page by
// page at the revision of the first page, in key order. Values that do not
// decode are logged and left out.
func (c *Cache[T]) listStorage(ctx context.Context) ([]*Item[T], int64, error) {
	const page = 1000
	var (
		items []*Item[T]
		rev   int64
		start string
	)
	for {
		res, err := c.cfg.Storage.List(ctx, c.cfg.Prefix, storage.ListOptions{Revision: rev, Limit: page, StartKey: start})
		if err != nil {
			return nil, 0, err
		}
		rev = res.Revision
		for _, kv := range res.Items {
			it, _, _, err := c.newItem(kv, nil)
			if err != nil {
				c.log.Error("watchcache: skipping object", "err", err)
				continue
			}
			items = append(items, it)
		}
		if !res.More || len(res.Items) == 0 {
			return items, rev, nil
		}
		start = res.Items[len(res.Items)-1].Key + "\x00"
	}
}

// listAndWatch lists the prefix and opens the storage watch that continues
// the list.
func (c *Cache[T]) listAndWatch(ctx context.Context) ([]*Item[T], int64, storage.Watcher, error) {
	items, rev, err := c.listStorage(ctx)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("list: %w", err)
	}
	if rev > 0 {
		w, err := c.cfg.Storage.Watch(ctx, c.cfg.Prefix, rev)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("watch from %d: %w", rev, err)
		}
		return items, rev, w, nil
	}
	// Nothing written yet, and a watch from 0 starts at whatever is written
	// when it opens: open it first and list again, so that no write falls
	// between the two (the watch's events up to the list are skipped).
	w, err := c.cfg.Storage.Watch(ctx, c.cfg.Prefix, 0)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("watch: %w", err)
	}
	if items, rev, err = c.listStorage(ctx); err != nil {
		w.Stop()
		return nil, 0, nil, fmt.Errorf("list: %w", err)
	}
	return items, rev, w, nil
}

// reset replaces the state with items at rev, empties the window and ends
// the watchers that had not reached rev: they cannot be continued across the
// gap.
func (c *Cache[T]) reset(items []*Item[T], rev int64) (relisted bool) {
	state := make(map[string]*Item[T], len(items))
	for _, it := range items {
		state[it.key] = it
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	first := c.state == nil
	c.state = state
	c.window.reset(rev)
	// Storage lists in key order, so the list is the first snapshot. The
	// older snapshots stay: each is still storage's state at its revision.
	c.snaps.add(&snapshot[T]{rev: rev, items: items})
	if !first {
		c.stats.Relists++
		err := errExpired(fmt.Sprintf("the watch cache of %s was reset to resource version %d after storage compaction", c.cfg.Prefix, rev))
		for w := range c.watchers {
			if w.pos < rev {
				c.endLocked(w, err)
			}
		}
	}
	c.advanceLocked(rev)
	return !first
}

// advanceLocked records that the cache has seen rev and wakes the requests
// waiting for it.
func (c *Cache[T]) advanceLocked(rev int64) {
	c.rev = rev
	close(c.advanced)
	c.advanced = make(chan struct{})
}

// noteCompacted records that storage is compacted at rev: from then on the
// cache sends lists at and watches from a revision below rev to storage or
// answers them 410 Expired, as storage would, rather than serve them from its
// window and snapshots. The snapshots below rev are dropped.
func (c *Cache[T]) noteCompacted(rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev <= c.compacted {
		return
	}
	c.compacted = rev
	c.snaps.removeBelow(rev)
	c.log.Debug("watchcache: storage compacted", "rev", rev)
}

// run consumes the storage watch until the cache stops, re-watching after
// errors and relisting when storage has compacted past the cache. It
// follows storage's compactions, announced by compactions.
func (c *Cache[T]) run(w storage.Watcher, compactions <-chan struct{}) {
	ticker := time.NewTicker(c.cfg.BookmarkInterval)
	defer ticker.Stop()
	for {
		select {
		case ev, ok := <-w.Events():
			if ok {
				c.apply(ev)
				continue
			}
			err := w.Err()
			w.Stop()
			if c.ctx.Err() != nil {
				return
			}
			c.log.Warn("watchcache: storage watch ended, re-watching", "rev", c.ResourceVersion(), "err", err)
			if w = c.rewatch(errors.Is(err, storage.ErrCompacted)); w == nil {
				return
			}
		case <-compactions:
			var rev int64
			rev, compactions = c.cfg.Storage.CompactedRevision()
			c.noteCompacted(rev)
		case <-ticker.C:
			c.bookmark()
		case <-c.ctx.Done():
			w.Stop()
			return
		}
	}
}

// rewatch opens a new storage watch from the cache's revision, relisting
// instead when relist is set or storage has compacted past the cache,
// retrying with backoff. It returns nil when the cache stops.
func (c *Cache[T]) rewatch(relist bool) storage.Watcher {
	const maxDelay = 10 * time.Second
	delay := 100 * time.Millisecond
	for {
		// A cache at revision 0 has seen nothing, and a watch from 0 would
		// start now, skipping what was written meanwhile: relist instead.
		rev := c.ResourceVersion()
		if relist || rev == 0 {
			items, rev, w, err := c.listAndWatch(c.ctx)
			if err == nil {
				if c.reset(items, rev) {
					c.log.Warn("watchcache: relisted", "rev", rev, "objects", len(items))
				}
				for _, it := range items {
					c.pack(c.hot.push(it))
				}
				return w
			}
			c.log.Error("watchcache: list failed", "err", err)
		} else {
			w, err := c.cfg.Storage.Watch(c.ctx, c.cfg.Prefix, rev)
			if err == nil {
				return w
			}
			relist = errors.Is(err, storage.ErrCompacted)
			c.log.Error("watchcache: watch failed", "rev", rev, "err", err)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return nil
		}
		delay = min(2*delay, maxDelay)
	}
}

// shutdown ends every watcher with ErrClosed, and marks the cache ready
// (if its first list never came) so that no request waits for it.
func (c *Cache[T]) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
	for w := range c.watchers {
		c.endLocked(w, ErrClosed)
	}
	close(c.advanced)
	c.advanced = make(chan struct{})
}

// apply decodes one storage event, applies it to the state and the window
// and hands it to the watchers.
func (c *Cache[T]) apply(ev storage.Event) {
	if ev.Type == storage.EventProgress {
		// Storage has no write under the prefix up to this revision that
		// the cache has not seen: its state is storage's at it.
		c.mu.Lock()
		defer c.mu.Unlock()
		if ev.KV.Revision > c.rev {
			c.advanceLocked(ev.KV.Revision)
		}
		return
	}
	rec := &record[T]{rev: ev.KV.Revision, key: ev.KV.Key}
	if ev.Type == storage.EventPut {
		// The previous version lends its attributes when they are the
		// same (only this goroutine changes the state, so it is still
		// the previous version below).
		c.mu.Lock()
		like := c.state[rec.key]
		c.mu.Unlock()
		it, obj, decoded, err := c.newItem(ev.KV, like)
		if err != nil {
			// The cache cannot show a value it cannot decode; it drops the
			// key so that it never serves a stale version as current.
			c.log.Error("watchcache: dropping undecodable object", "err", err)
		} else {
			rec.cur = it
			// The watchers now registered get the object decoded once.
			rec.fresh, rec.hasFresh = obj, decoded
		}
	}
	// Outside the lock, as only this goroutine packs: a replaced version
	// is the window's alone, read again only by watches that replay it,
	// and is packed now; the new one once plainVersions newer ones follow.
	if replaced := c.applyRecord(rec); replaced != nil {
		c.pack(replaced)
	}
	if rec.cur != nil {
		c.pack(c.hot.push(rec.cur))
	}
}

// pack packs it, if not nil, against the cache's dictionary, which the
// first version packed makes. A version the dictionary serves poorly
// (another shape of the resource's objects: a pod with its status after
// pods without) extends it, up to maxDictionaries times, and is packed
// again against the extended one; the versions packed before keep the
// dictionary they were packed against.
func (c *Cache[T]) pack(it *Item[T]) {
	if it == nil {
		return
	}
	if c.dict == nil {
		c.dict = newDictionary(it.Value())
		c.dicts = 1
	}
	if it.pack(c.dict) && c.dicts < maxDictionaries && len(c.dict.b) < maxDictionary {
		c.dict = c.dict.extend(it.Value())
		c.dicts++
		it.repack(c.dict)
	}
}

// applyRecord applies rec to the state and the window and hands it to the
// watchers; it returns the version rec replaced, if any.
func (c *Cache[T]) applyRecord(rec *record[T]) (replaced *Item[T]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rec.rev <= c.rev {
		return nil // already seen (a re-watch may repeat the boundary)
	}
	rec.prev = c.state[rec.key]
	if rec.prev != nil {
		rec.key = rec.prev.key // one string per key, not per event
	}
	if rec.cur != nil {
		c.state[rec.key] = rec.cur
		if rec.prev != nil {
			// The version replaced is now the window's alone, read again
			// only by watches that replay the window: its serializations
			// go (a deleted version keeps them, to serialize its DELETED
			// event from).
			rec.prev.enc.drop()
			replaced = rec.prev
		}
	} else {
		delete(c.state, rec.key)
	}
	c.stats.Events++
	if rec.cur != nil || rec.prev != nil {
		c.window.push(rec)
		for w := range c.watchers {
			c.deliverLocked(w, rec)
		}
	}
	rec.dropFresh()
	c.advanceLocked(rec.rev)
	return replaced
}

// bookmark sends a BOOKMARK at the cache's revision to the watchers that
// asked for bookmarks.
func (c *Cache[T]) bookmark() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ev *Event[T]
	for w := range c.watchers {
		if !w.bookmarks || w.pos > c.rev {
			continue
		}
		if ev == nil {
			ev = c.bookmarkEvent(c.rev, false)
		}
		// A bookmark is a hint: one that does not fit is dropped, and the
		// watcher is not blamed for it.
		select {
		case w.out <- ev:
		default:
		}
	}
}

// bookmarkEvent returns a BOOKMARK event at rev, marking the end of the
// initial events when end is set.
func (c *Cache[T]) bookmarkEvent(rev int64, end bool) *Event[T] {
	obj := c.cfg.New()
	obj.SetResourceVersion(strconv.FormatInt(rev, 10))
	if end {
		obj.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	return NewEvent(watch.Bookmark, obj, rev)
}
