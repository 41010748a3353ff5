package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/sharding"

	"github.com/listwatch/listwatch/internal/ctxtime"
)

// ReflectorStore is what a Reflector writes into: a DeltaFIFO, or any Store.
type ReflectorStore[T Object] interface {
	Add(obj T) error
	Update(obj T) error
	Delete(obj T) error
	Replace(list []T, resourceVersion string) error
	Resync() error
}

// ResourceVersionUpdater is a ReflectorStore that wants to know of the
// watch's progress that carries no object: a Reflector calls
// UpdateResourceVersion with each bookmark's resourceVersion. DeltaFIFO is
// one.
type ResourceVersionUpdater interface {
	UpdateResourceVersion(resourceVersion string)
}

// WatchErrorHandler is told about every failure of a Reflector's list or
// watch, before it backs off and retries. It must not block for long.
type WatchErrorHandler func(ctx context.Context, err error)

// ReflectorOptions configure a Reflector. The zero value works.
type ReflectorOptions struct {
	// Name identifies the reflector in logs and errors.
	Name string
	// ResyncPeriod, when positive, makes the reflector call the store's
	// Resync that often, when ShouldResync (if set) agrees.
	ResyncPeriod time.Duration
	ShouldResync func() bool
	// PageSize is the list limit; 500 when zero, no paging when negative.
	PageSize int64
	// MinWatchTimeout is the shortest server-side watch timeout asked for;
	// each watch asks for a random timeout between it and twice it, so that
	// the watches of many clients do not all end at once. 5 minutes when 0.
	MinWatchTimeout time.Duration
	// DisableWatchList makes the reflector build its state from a paged
	// list. By default it streams it instead, as client-go 1.35 and later
	// do: one watch with sendInitialEvents=true sends every object and then
	// a bookmark, which costs the server no list and the client no pages.
	// The reflector falls back to list, for good, when the server does not
	// support streaming (the watch is refused as a bad request or invalid,
	// as kube-apiserver with its WatchList feature gate off refuses it, or
	// the initial events do not end within WatchListTimeout, 1 minute when
	// 0), and at once when the ListerWatcher says it cannot stream
	// (WatchListSupporter).
	DisableWatchList bool
	WatchListTimeout time.Duration
	// Shard, when set and not empty, makes the reflector hold one shard of
	// the resource (KEP-5866): every list page and watch asks for it
	// (shardSelector), and objects outside it that a server not sharding
	// sends anyway are dropped in the client, so that the store holds
	// the shard whatever the server. Build it with
	// sharding.NewSelector (informers.Shard does); an object's shard never
	// changes, since uid and namespace are immutable.
	Shard sharding.Selector
	// ExpectedGVK, when set, makes the reflector reject objects that say
	// they are of another kind, which only untyped objects can be.
	ExpectedGVK *schema.GroupVersionKind
	// WatchErrorHandler is called on each failure; the default logs it.
	WatchErrorHandler WatchErrorHandler
	// Backoff paces retries after failures; DefaultBackoff when zero.
	Backoff Backoff
	// Logger receives the reflector's logs; slog.Default() when nil.
	Logger *slog.Logger
}

// Reflector keeps a store in step with a resource on the server: it lists,
// replaces the store's content with the list, then watches from the list's
// resourceVersion and applies each event, for as long as its context lives.
//
// A watch that ends normally is resumed from the last resourceVersion seen,
// with no relist. A resourceVersion that is too old (410 Expired) makes it
// relist. Any other failure is reported to the WatchErrorHandler and retried
// after an exponential backoff with jitter, or after the delay the server
// asked for (Retry-After), if longer: a failed list is retried as a list, a
// failed watch as a watch from the last resourceVersion seen.
type Reflector[T Object] struct {
	name  string
	lw    ListerWatcher[T]
	store ReflectorStore[T]
	opts  ReflectorOptions
	log   *slog.Logger
	onErr WatchErrorHandler
	back  *backoffState
	gvk   *schema.GroupVersionKind

	mu sync.Mutex
	// lastSyncRV is the resourceVersion of the last list or event applied.
	lastSyncRV string
	// rvUnavailable says lastSyncRV was refused as too old, so the next list
	// must be from the latest state ("").
	rvUnavailable bool
	// watchListOff is set once streaming lists turned out to be unsupported.
	watchListOff bool
}

// NewReflector returns a Reflector that fills store from lw.
func NewReflector[T Object](lw ListerWatcher[T], store ReflectorStore[T], opts ReflectorOptions) *Reflector[T] {
	r := &Reflector[T]{name: opts.Name, lw: lw, store: store, opts: opts, gvk: opts.ExpectedGVK}
	if r.name == "" {
		r.name = fmt.Sprintf("reflector(%T)", *new(T))
	}
	if r.opts.PageSize == 0 {
		r.opts.PageSize = 500
	}
	if r.opts.MinWatchTimeout <= 0 {
		r.opts.MinWatchTimeout = 5 * time.Minute
	}
	if r.opts.WatchListTimeout <= 0 {
		r.opts.WatchListTimeout = time.Minute
	}
	r.log = opts.Logger
	if r.log == nil {
		r.log = slog.Default()
	}
	r.log = r.log.With("reflector", r.name)
	r.onErr = opts.WatchErrorHandler
	if r.onErr == nil {
		r.onErr = r.logError
	}
	r.back = newBackoffState(opts.Backoff)
	if opts.Shard != nil && !opts.Shard.Empty() {
		r.lw = newSharded(lw, opts.Shard, r.log)
	}
	return r
}

func (r *Reflector[T]) logError(ctx context.Context, err error) {
	if isExpired(err) {
		r.log.InfoContext(ctx, "watch closed", "err", err)
		return
	}
	r.log.ErrorContext(ctx, "list/watch failed", "err", err)
}

// Name returns the reflector's name.
func (r *Reflector[T]) Name() string { return r.name }

// LastSyncResourceVersion returns the resourceVersion of the state the store
// last reflected: that of the last list, event or bookmark applied.
func (r *Reflector[T]) LastSyncResourceVersion() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastSyncRV
}

func (r *Reflector[T]) setLastSyncRV(rv string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastSyncRV = rv
}

// relistRV is the resourceVersion the next list asks for: "0" at first (any
// state will do, and the server may answer from its cache), the last one seen
// afterwards (not older than what the store already reflects), and "" (the
// latest, read from storage) when that was refused as too old.
func (r *Reflector[T]) relistRV() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.rvUnavailable:
		return ""
	case r.lastSyncRV == "":
		return "0"
	}
	return r.lastSyncRV
}

func (r *Reflector[T]) setRVUnavailable(v bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rvUnavailable = v
}

// errRelist asks Run to list again at once: the watch could not go on from
// the resourceVersion it had.
var errRelist = errors.New("resourceVersion expired, relisting")

// Run lists and watches until ctx is done, retrying failures with backoff.
func (r *Reflector[T]) Run(ctx context.Context) {
	r.log.DebugContext(ctx, "starting")
	defer r.log.DebugContext(ctx, "stopped")
	var lastRelist time.Time
	for ctx.Err() == nil {
		err := r.ListAndWatch(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRelist) {
			// Relist at once, unless the last relist was moments ago: a
			// server answering every watch with 410 must not make us spin.
			quick := lastRelist.IsZero() || time.Since(lastRelist) > time.Minute
			lastRelist = time.Now()
			if quick {
				continue
			}
		}
		if err != nil {
			r.onErr(ctx, err)
		}
		if !ctxtime.Sleep(ctx, r.retryDelay(err)) {
			return
		}
	}
}

// retryDelay records a failure and returns how long to wait before the next
// attempt: the backoff, or longer when err is a server asking the client to
// slow down (429 TooManyRequests, or any Status with a Retry-After), since
// retrying sooner only adds to the load that made it refuse. The server's
// delay is capped by the backoff's maximum so that a bogus Retry-After
// cannot park the reflector for hours.
func (r *Reflector[T]) retryDelay(err error) time.Duration {
	d := r.back.next()
	if asked := suggestedDelay(err); asked > 0 {
		d = max(d, min(asked, r.back.cfg.Max))
	}
	return d
}

// suggestedDelay is how long err asks the client to wait, 0 if it does not:
// the Status's retryAfterSeconds, which apierrors.SuggestsClientDelay reads
// through wrapping from any APIStatus (listwatch's client.StatusError
// carries a Retry-After header there too).
func suggestedDelay(err error) time.Duration {
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// ListAndWatch lists (or streams the initial state), replaces the store's
// content, then watches until ctx is done, returning nil, or until the
// watch can no longer go on without a new list, returning why. Watch
// failures that do not need a new list are reported and retried inside.
func (r *Reflector[T]) ListAndWatch(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var w Watcher[T]
	if r.streams() {
		var err error
		w, err = r.watchList(ctx)
		if err != nil {
			return err
		}
	}
	if w == nil {
		if err := r.list(ctx); err != nil {
			return err
		}
	}

	var resyncDone sync.WaitGroup
	if r.opts.ResyncPeriod > 0 {
		resyncDone.Add(1)
		go func() {
			defer resyncDone.Done()
			r.resyncLoop(ctx)
		}()
	}
	defer resyncDone.Wait()
	defer cancel()
	return r.watchLoop(ctx, w)
}

// streams reports whether the next initial state is to come from a
// streaming list.
func (r *Reflector[T]) streams() bool {
	if r.opts.DisableWatchList || !SupportsWatchList(r.lw) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.watchListOff
}

func (r *Reflector[T]) resyncLoop(ctx context.Context) {
	ctxtime.Every(ctx, r.opts.ResyncPeriod, func() bool {
		if r.opts.ShouldResync != nil && !r.opts.ShouldResync() {
			return true
		}
		if err := r.store.Resync(); err != nil {
			r.onErr(ctx, fmt.Errorf("%s: resync: %w", r.name, err))
		}
		return true
	})
}

// list reads every page and replaces the store's content with the result.
// Nothing reaches the store unless every page was read.
func (r *Reflector[T]) list(ctx context.Context) error {
	for {
		rv := r.relistRV()
		items, listRV, err := r.listAll(ctx, rv)
		if err != nil {
			if isExpired(err) && rv != "" {
				// The version asked for (or a continue token's) is gone:
				// the latest state will do.
				r.setRVUnavailable(true)
				continue
			}
			return fmt.Errorf("%s: list at resourceVersion %q: %w", r.name, rv, err)
		}
		for _, obj := range items {
			if err := r.checkObject(obj); err != nil {
				return fmt.Errorf("%s: list at resourceVersion %q: %w", r.name, rv, err)
			}
		}
		if err := r.store.Replace(items, listRV); err != nil {
			return fmt.Errorf("%s: replacing store with list at resourceVersion %q: %w", r.name, listRV, err)
		}
		r.setRVUnavailable(false)
		r.setLastSyncRV(listRV)
		return nil
	}
}

func (r *Reflector[T]) listAll(ctx context.Context, rv string) ([]T, string, error) {
	opts := metav1.ListOptions{ResourceVersion: rv}
	// A limit with a resourceVersion other than "" or "0" asks for that exact
	// version, which only storage can serve; without one the server answers
	// "not older than" from its watch cache. A relist after a watch ended is
	// of the second kind, so it is not paged: a restart of many clients then
	// lands on the caches, not on etcd.
	if r.opts.PageSize > 0 && (rv == "" || rv == "0") {
		opts.Limit = r.opts.PageSize
	}
	var items []T
	for page := 0; ; page++ {
		l, err := r.lw.List(ctx, opts)
		if err != nil {
			if page > 0 {
				return nil, "", fmt.Errorf("page %d: %w", page+1, err)
			}
			return nil, "", err
		}
		if l == nil {
			return nil, "", fmt.Errorf("page %d: nil list", page+1)
		}
		if items == nil {
			n := len(l.Items)
			if l.RemainingItemCount != nil && *l.RemainingItemCount > 0 {
				n += int(min(*l.RemainingItemCount, 1<<24))
			}
			if l.Continue == "" {
				// One page: its slice is ours to keep.
				return l.Items, l.ResourceVersion, nil
			}
			items = make([]T, 0, n)
		}
		items = append(items, l.Items...)
		if l.Continue == "" {
			return items, l.ResourceVersion, nil
		}
		// Later pages come from the snapshot the continue token names.
		opts = metav1.ListOptions{Limit: opts.Limit, Continue: l.Continue}
	}
}

// checkObject rejects what no decoder should have produced: a nil object or
// one of another kind.
func (r *Reflector[T]) checkObject(obj T) error {
	if isNil(obj) {
		return errors.New("nil object")
	}
	if r.gvk != nil {
		got := obj.GetObjectKind().GroupVersionKind()
		if !got.Empty() && got != *r.gvk {
			return fmt.Errorf("object %s/%s is a %s, expected %s", obj.GetNamespace(), obj.GetName(), got, *r.gvk)
		}
	}
	return nil
}

func (r *Reflector[T]) watchTimeout() *int64 {
	min := r.opts.MinWatchTimeout
	d := min + time.Duration(rand.Int64N(int64(min)+1))
	s := int64(d / time.Second)
	return &s
}

// watchLoop watches from the last resourceVersion, applying events, until ctx
// is done or a new list is needed. w, when not nil, is a watch already open.
func (r *Reflector[T]) watchLoop(ctx context.Context, w Watcher[T]) error {
	for ctx.Err() == nil {
		if w == nil {
			var err error
			w, err = r.lw.Watch(ctx, metav1.ListOptions{
				ResourceVersion:     r.LastSyncResourceVersion(),
				AllowWatchBookmarks: true,
				TimeoutSeconds:      r.watchTimeout(),
			})
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if isExpired(err) {
					return fmt.Errorf("%s: watch: %w: %w", r.name, errRelist, err)
				}
				if err := r.failAndWait(ctx, fmt.Errorf("%s: watch from resourceVersion %q: %w", r.name, r.LastSyncResourceVersion(), err)); err != nil {
					return nil
				}
				continue
			}
		}
		err := r.handleWatch(ctx, w)
		w.Stop()
		w = nil
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			// Ended normally: resume from the last resourceVersion.
		case errors.Is(err, errRelist):
			return err
		default:
			if r.failAndWait(ctx, err) != nil {
				return nil
			}
		}
	}
	return nil
}

// failAndWait reports err and waits out the backoff; it returns an error only
// when ctx ended the wait.
func (r *Reflector[T]) failAndWait(ctx context.Context, err error) error {
	r.onErr(ctx, err)
	if !ctxtime.Sleep(ctx, r.retryDelay(err)) {
		return ctx.Err()
	}
	return nil
}

// errShortWatch is a watch that ended normally at once with nothing in it,
// which a healthy server does not do: treated as a failure so that the
// retry backs off instead of spinning.
var errShortWatch = errors.New("watch closed within a second with no events")

// handleWatch applies w's events to the store until the stream ends. It
// returns nil when the stream ended normally.
func (r *Reflector[T]) handleWatch(ctx context.Context, w Watcher[T]) error {
	stop := context.AfterFunc(ctx, w.Stop)
	defer stop()
	start := time.Now()
	events := 0
	for {
		ev, err := w.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, io.EOF) {
				if events == 0 && time.Since(start) < time.Second {
					return fmt.Errorf("%s: %w", r.name, errShortWatch)
				}
				return nil
			}
			return fmt.Errorf("%s: watch from resourceVersion %q: %w", r.name, r.LastSyncResourceVersion(), err)
		}
		events++
		if err := r.apply(ev); err != nil {
			return fmt.Errorf("%s: watch event after resourceVersion %q: %w", r.name, r.LastSyncResourceVersion(), err)
		}
	}
}

// apply applies one watch event to the store and moves the resourceVersion.
func (r *Reflector[T]) apply(ev Event[T]) error {
	switch ev.Type {
	case EventAdded, EventModified, EventDeleted:
	case EventBookmark:
		if isNil(ev.Object) {
			return errors.New("BOOKMARK event without an object")
		}
		rv := ev.Object.GetResourceVersion()
		if u, ok := r.store.(ResourceVersionUpdater); ok {
			u.UpdateResourceVersion(rv)
		}
		r.setLastSyncRV(rv)
		return nil
	case EventError:
		return eventError(ev.Status)
	default:
		return fmt.Errorf("watch event of unknown type %q", ev.Type)
	}
	if err := r.checkObject(ev.Object); err != nil {
		return fmt.Errorf("%s event: %w", ev.Type, err)
	}
	var err error
	switch ev.Type {
	case EventAdded:
		err = r.store.Add(ev.Object)
	case EventModified:
		err = r.store.Update(ev.Object)
	case EventDeleted:
		err = r.store.Delete(ev.Object)
	}
	if err != nil {
		return fmt.Errorf("%s event for %s/%s: %w", ev.Type, ev.Object.GetNamespace(), ev.Object.GetName(), err)
	}
	r.setLastSyncRV(ev.Object.GetResourceVersion())
	return nil
}

// eventError turns the Status of an ERROR event into an error; an expired
// resourceVersion becomes errRelist.
func eventError(status *metav1.Status) error {
	if status == nil {
		return errors.New("ERROR event without a Status")
	}
	err := &apierrors.StatusError{ErrStatus: *status}
	if isExpired(err) {
		return fmt.Errorf("%w: %w", errRelist, err)
	}
	return fmt.Errorf("ERROR event: %w", err)
}

// isExpired reports whether err says a resourceVersion is too old.
func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// watchList builds the store's state from a streaming list: a watch that
// first sends every current object as ADDED and then a BOOKMARK marked with
// InitialEventsEndAnnotation. It returns the watch, open after that bookmark,
// or nil when streaming lists turned out to be unsupported and the caller
// must list instead.
func (r *Reflector[T]) watchList(ctx context.Context) (Watcher[T], error) {
	for {
		rv := r.LastSyncResourceVersion()
		if r.relistRV() == "" {
			rv = ""
		}
		send := true
		w, err := r.lw.Watch(ctx, metav1.ListOptions{
			ResourceVersion:      rv,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			SendInitialEvents:    &send,
			AllowWatchBookmarks:  true,
			TimeoutSeconds:       r.watchTimeout(),
		})
		if err != nil {
			switch {
			case isExpired(err) && rv != "":
				r.setRVUnavailable(true)
				continue
			case apierrors.IsBadRequest(err) || apierrors.IsInvalid(err):
				r.disableWatchList(ctx, err)
				return nil, nil
			}
			return nil, fmt.Errorf("%s: streaming list: %w", r.name, err)
		}
		ok, err := r.initialEvents(ctx, w)
		if ok {
			return w, nil
		}
		w.Stop()
		if err == nil {
			// The stream ended or timed out before the initial events did.
			r.disableWatchList(ctx, errors.New("no initial-events-end bookmark"))
			return nil, nil
		}
		if errors.Is(err, errRelist) && rv != "" {
			r.setRVUnavailable(true)
			continue
		}
		return nil, fmt.Errorf("%s: streaming list: %w", r.name, err)
	}
}

func (r *Reflector[T]) disableWatchList(ctx context.Context, why error) {
	r.log.InfoContext(ctx, "streaming list unsupported, falling back to list", "err", why)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watchListOff = true
}

// initialEvents gathers the initial events of a streaming list aside and
// replaces the store with them at the end bookmark. It reports false with a
// nil error when the stream ended, or WatchListTimeout passed, first.
func (r *Reflector[T]) initialEvents(ctx context.Context, w Watcher[T]) (bool, error) {
	timedOut := false
	var mu sync.Mutex
	timer := time.AfterFunc(r.opts.WatchListTimeout, func() {
		mu.Lock()
		timedOut = true
		mu.Unlock()
		w.Stop()
	})
	defer timer.Stop()
	stop := context.AfterFunc(ctx, w.Stop)
	defer stop()

	state := newThreadSafeStore[T](nil, nil, false)
	for {
		ev, err := w.Next()
		if err != nil {
			mu.Lock()
			t := timedOut
			mu.Unlock()
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			if t || errors.Is(err, io.EOF) {
				return false, nil
			}
			return false, err
		}
		switch ev.Type {
		case EventAdded, EventModified:
			if err := r.checkObject(ev.Object); err != nil {
				return false, fmt.Errorf("%s event: %w", ev.Type, err)
			}
			if err := state.Add(ev.Object); err != nil {
				return false, fmt.Errorf("%s event: %w", ev.Type, err)
			}
		case EventDeleted:
			if err := r.checkObject(ev.Object); err != nil {
				return false, fmt.Errorf("%s event: %w", ev.Type, err)
			}
			if err := state.Delete(ev.Object); err != nil {
				return false, fmt.Errorf("%s event: %w", ev.Type, err)
			}
		case EventBookmark:
			if isNil(ev.Object) {
				return false, errors.New("BOOKMARK event without an object")
			}
			if ev.Object.GetAnnotations()[InitialEventsEndAnnotation] != "true" {
				continue
			}
			rv := ev.Object.GetResourceVersion()
			if err := r.store.Replace(state.List(), rv); err != nil {
				return false, fmt.Errorf("replacing store with streamed list at resourceVersion %q: %w", rv, err)
			}
			r.setRVUnavailable(false)
			r.setLastSyncRV(rv)
			return true, nil
		case EventError:
			return false, eventError(ev.Status)
		default:
			return false, fmt.Errorf("watch event of unknown type %q", ev.Type)
		}
	}
}
