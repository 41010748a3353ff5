package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// MinimumResyncPeriod is the shortest resync period a handler can get: a
// shorter one is raised to it.
const MinimumResyncPeriod = time.Second

// ErrAlreadyStarted is returned by the settings that only make sense before
// an informer runs (SetTransform, SetWatchErrorHandler) once it has started.
var ErrAlreadyStarted = errors.New("cache: informer already started")

// ErrStopped is returned when adding a handler to an informer that has
// stopped.
var ErrStopped = errors.New("cache: informer has stopped")

// ErrUnknownRegistration is returned by RemoveEventHandler for a
// registration that is not (or no longer) one of the informer's.
var ErrUnknownRegistration = errors.New("cache: unknown handler registration")

// SharedInformerOptions configure a SharedIndexInformer; the options that
// name the object type (WithIndexers, WithKeyFunc, WithTransform,
// OnHandlerPanic) follow them as arguments of NewSharedIndexInformer. The
// zero value works.
type SharedInformerOptions struct {
	// ResyncPeriod is the resync period of handlers added with
	// AddEventHandler, and the informer's initial resync check period.
	// Zero means no resync.
	ResyncPeriod time.Duration
	// Reflector holds the Reflector's options (name, watch-error handler,
	// streaming list, paging, backoff, logger). Its ResyncPeriod and
	// ShouldResync are the informer's.
	Reflector ReflectorOptions
	// MutationDetection turns on the debug mutation detector, which keeps a
	// copy of every cached object and reports objects mutated in place. The
	// environment variable LISTWATCH_CACHE_MUTATION_DETECTOR (or client-go's
	// KUBE_CACHE_MUTATION_DETECTOR) set to "true" turns it on too.
	MutationDetection bool
	// MutationCheckPeriod is how often the detector compares; 10 s when 0.
	MutationCheckPeriod time.Duration
	// OnMutation is told of each mutation found; the default logs it.
	OnMutation func(MutationError)
}

// SharedIndexInformer keeps one cache of a resource, through one Reflector,
// DeltaFIFO and Indexer, and tells any number of handlers about its changes.
//
// Each handler gets its own goroutine and its own backlog, so a slow or
// stalled handler delays neither the cache nor the other handlers. The
// backlog holds at most one entry per key: notifications for a key that is
// already pending are merged with it,
//   - an update after an add or an update extends it (an add of, or an
//     update from the oldest old state to, the newest state);
//   - a delete after an add the handler has not received drops both;
//   - a delete after anything else replaces it, and an add after a pending
//     delete is delivered after that delete;
//
// so, per handler, notifications arrive one at a time, per key in order, and
// the states a handler sees of an object are a subsequence of the states the
// server held, ending with the latest. A handler registered with
// HandlerOptions.InOrder is told of every change, in the order the watch
// delivered them across all keys: the informer's queue keeps that order
// (DeltaFIFOOptions.InOrder). A delete with FinalStateUnknown
// carries the last state the cache knew, which a handler that fell behind
// may not have seen.
type SharedIndexInformer[T Object] struct {
	lw        ListerWatcher[T]
	opts      SharedInformerOptions
	typed     typedOptions[T]
	log       *slog.Logger
	indexer   *threadSafeStore[T]
	processor *processor[T]
	detector  *mutationDetector[T]
	status    syncStatus

	// deltasMu is held while one key's deltas are applied and distributed,
	// and while a handler joins, so that a joining handler gets every
	// change exactly once: in the cache replay or as a notification.
	deltasMu sync.Mutex

	mu                sync.Mutex
	started           bool
	stopped           atomic.Bool
	resyncCheckPeriod time.Duration
	transform         TransformFunc[T]
	watchErrorHandler WatchErrorHandler
	controller        *Controller[T]
	// fifo is the informer's queue, made with it so that its
	// resourceVersion can be waited on before Run.
	fifo *DeltaFIFO[T]
}

// NewSharedIndexInformer returns a SharedIndexInformer over lw, configured
// by opts and the typed options; Run starts it.
func NewSharedIndexInformer[T Object](lw ListerWatcher[T], opts SharedInformerOptions, typed ...Option[T]) *SharedIndexInformer[T] {
	t := applyOptions(typed)
	log := cmp.Or(opts.Reflector.Logger, slog.Default())
	s := &SharedIndexInformer[T]{
		lw:                lw,
		opts:              opts,
		typed:             t,
		log:               log,
		indexer:           newThreadSafeStore(t.keyFunc, t.indexers, true),
		fifo:              NewDeltaFIFO(DeltaFIFOOptions[T]{KeyFunc: t.keyFunc, InOrder: true}),
		processor:         newProcessor[T](),
		resyncCheckPeriod: max(opts.ResyncPeriod, 0),
		transform:         t.transform,
		watchErrorHandler: opts.Reflector.WatchErrorHandler,
	}
	if opts.ResyncPeriod > 0 && opts.ResyncPeriod < MinimumResyncPeriod {
		s.resyncCheckPeriod = MinimumResyncPeriod
	}
	if opts.MutationDetection || mutationDetectionFromEnv() {
		s.detector = newMutationDetector[T](opts.OnMutation, log)
	}
	return s
}

// GetStore returns the informer's cache as a Store. Its objects are shared:
// never mutate them.
func (s *SharedIndexInformer[T]) GetStore() Store[T] { return s.indexer }

// GetIndexer returns the informer's cache. Its objects are shared: never
// mutate them.
func (s *SharedIndexInformer[T]) GetIndexer() Indexer[T] { return s.indexer }

// AddIndexers adds indices to the cache, before or after Run; after, they
// are built from what is cached.
func (s *SharedIndexInformer[T]) AddIndexers(indexers Indexers[T]) error {
	return s.indexer.AddIndexers(indexers)
}

// SetTransform sets the function applied to each object before it is cached.
// It returns ErrAlreadyStarted once Run was called.
func (s *SharedIndexInformer[T]) SetTransform(f TransformFunc[T]) error {
	return s.beforeStart("SetTransform", func() { s.transform = f })
}

// SetWatchErrorHandler sets the function told of each list or watch failure.
// It returns ErrAlreadyStarted once Run was called.
func (s *SharedIndexInformer[T]) SetWatchErrorHandler(h WatchErrorHandler) error {
	return s.beforeStart("SetWatchErrorHandler", func() { s.watchErrorHandler = h })
}

// beforeStart applies set under the lock unless Run was already called.
func (s *SharedIndexInformer[T]) beforeStart(op string, set func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("%s: %w", op, ErrAlreadyStarted)
	}
	set()
	return nil
}

// HasSynced reports whether the first list has been applied to the cache and
// handed to every handler's backlog.
func (s *SharedIndexInformer[T]) HasSynced() bool {
	s.mu.Lock()
	c := s.controller
	s.mu.Unlock()
	return c != nil && c.HasSynced()
}

// LastSyncResourceVersion returns the resourceVersion the cache last
// reflected, or "" before Run.
func (s *SharedIndexInformer[T]) LastSyncResourceVersion() string {
	s.mu.Lock()
	c := s.controller
	s.mu.Unlock()
	if c == nil {
		return ""
	}
	return c.LastSyncResourceVersion()
}

// LastStoreSyncResourceVersion returns the resourceVersion the cache
// reflects: every change the server made at or below it (event, list or
// bookmark) has been applied to the cache and handed to the handlers. It
// never moves backwards, and is "" until the first change is applied.
// Unlike LastSyncResourceVersion, which says what the reflector has
// received, it does not run ahead of what the cache holds (client-go 1.36
// states it likewise, for KEP-5647's stale-read protection).
func (s *SharedIndexInformer[T]) LastStoreSyncResourceVersion() string {
	return s.fifo.PoppedResourceVersion()
}

// WaitForStoreResourceVersion waits until LastStoreSyncResourceVersion
// reaches resourceVersion (as CompareResourceVersion orders them) or ctx
// is done, and says which: nil once reached; ctx's error, wrapped; or an
// error wrapping ErrResourceVersionNotComparable when the versions cannot
// be ordered. It may be called before Run.
func (s *SharedIndexInformer[T]) WaitForStoreResourceVersion(ctx context.Context, resourceVersion string) error {
	return s.fifo.WaitForResourceVersion(ctx, resourceVersion)
}

// IsStopped reports whether Run has returned.
func (s *SharedIndexInformer[T]) IsStopped() bool { return s.stopped.Load() }

// ResyncCheckPeriod returns how often the informer checks for handlers due
// for a resync; zero when it never resyncs.
func (s *SharedIndexInformer[T]) ResyncCheckPeriod() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resyncCheckPeriod
}

// Run fills the cache and delivers notifications until ctx is done. It then
// stops the reflector, then the handlers' goroutines, and returns once every
// goroutine it started is gone, which includes waiting for each handler call
// in progress to return. An informer runs once: later calls return at once.
func (s *SharedIndexInformer[T]) Run(ctx context.Context) {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		s.log.WarnContext(ctx, "cache: SharedIndexInformer.Run called twice")
		return
	}
	s.started = true
	// The queue was made with the informer, so that waiters for its
	// resourceVersion need no Run; what may be set until Run is set now.
	fifo := s.fifo
	fifo.knownObjects = s.indexer
	fifo.transform = s.transform
	ropts := s.opts.Reflector
	ropts.WatchErrorHandler = s.status.wrapHandler(s.watchErrorHandler, s.log)
	s.controller = NewController(Config[T]{
		Queue:            fifo,
		ListerWatcher:    statusListerWatcher[T]{lw: s.lw, status: &s.status},
		Process:          s.handleDeltas,
		FullResyncPeriod: s.resyncCheckPeriod,
		ShouldResync:     s.processor.shouldResync,
		Reflector:        ropts,
	})
	c := s.controller
	s.mu.Unlock()

	defer s.stopped.Store(true)
	var wg sync.WaitGroup
	defer wg.Wait()
	if s.detector != nil {
		period := s.opts.MutationCheckPeriod
		if period <= 0 {
			period = 10 * time.Second
		}
		wg.Go(func() { s.detector.run(ctx, period) })
	}
	s.processor.run(ctx)
	c.Run(ctx)
	// The reflector and the delta loop have stopped: nothing more will be
	// distributed, so the listeners can go.
	s.processor.stop()
}

// handleDeltas is the informer's HandleDeltas: it applies one key's deltas
// to the cache and distributes each change to the handlers, under deltasMu.
func (s *SharedIndexInformer[T]) handleDeltas(key string, deltas Deltas[T], isInInitialList bool) error {
	s.deltasMu.Lock()
	defer s.deltasMu.Unlock()
	now := time.Now()
	var n Notification[T]
	for _, d := range deltas {
		switch d.Type {
		case Sync, Replaced, Added, Updated:
			old, had, err := s.indexer.put(key, d.Object)
			if err != nil {
				return err
			}
			if s.detector != nil {
				s.detector.add(key, d.Object)
			}
			src := SourceWatch
			switch {
			case d.Type == Sync:
				src = SourceResync
			case d.Type == Replaced && isInInitialList:
				src = SourceInitialList
			case d.Type == Replaced:
				src = SourceRelist
			}
			if had {
				// An update that did not change the resourceVersion is a
				// resync: only the handlers due for one want it.
				resync := src == SourceResync || old.GetResourceVersion() == d.Object.GetResourceVersion()
				if resync {
					src = SourceResync
				}
				n = Notification[T]{Type: NotifyUpdate, Object: d.Object, OldObject: old, Source: src}
				s.processor.distribute(key, &n, resync, now)
			} else {
				n = Notification[T]{Type: NotifyAdd, Object: d.Object, Source: src, IsInInitialList: isInInitialList}
				s.processor.distribute(key, &n, false, now)
			}
		case Deleted:
			s.indexer.deleteKey(key)
			if s.detector != nil {
				s.detector.remove(key)
			}
			src := SourceWatch
			if d.FinalStateUnknown {
				src = SourceRelist
			}
			n = Notification[T]{Type: NotifyDelete, Object: d.Object, Source: src, FinalStateUnknown: d.FinalStateUnknown}
			s.processor.distribute(key, &n, false, now)
		}
	}
	return nil
}

// AddEventHandler registers handler with the informer's default resync
// period; it is the Informer interface's method. See
// AddEventHandlerWithResyncPeriod, which also returns the registration's
// statistics.
func (s *SharedIndexInformer[T]) AddEventHandler(handler ResourceEventHandler[T]) (ResourceEventHandlerRegistration, error) {
	r, err := s.AddEventHandlerWithResyncPeriod(handler, s.opts.ResyncPeriod)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// AddEventHandlerWithResyncPeriod registers handler, which is then told of
// every change from its own goroutine, and, every resyncPeriod, of every
// cached object as an update from itself to itself. It is
// AddEventHandlerWithOptions with only the resync period set.
func (s *SharedIndexInformer[T]) AddEventHandlerWithResyncPeriod(handler ResourceEventHandler[T], resyncPeriod time.Duration) (*Registration[T], error) {
	return s.AddEventHandlerWithOptions(handler, HandlerOptions{ResyncPeriod: resyncPeriod})
}

// HandlerOptions configure one handler's registration. The zero value is
// AddEventHandler's: no resync of its own, notifications merged per key.
type HandlerOptions struct {
	// ResyncPeriod, when positive, tells the handler of every cached object
	// that often, as an update from itself to itself.
	ResyncPeriod time.Duration
	// InOrder gives the handler every notification, one by one, in the
	// order the informer applied the changes, across all objects, as
	// client-go's informers do: nothing is merged, so a handler that falls
	// behind holds one backlog entry per change rather than per object.
	// By default notifications pending for one object are merged (see
	// SharedIndexInformer): per object in order, across objects in the
	// order each object's oldest pending change came, and bounded by the
	// number of objects (BenchmarkHandlerBacklog: 1,000 objects changed
	// 100 times each behind a stalled handler hold 1,000 entries, 0.5 MB
	// allocated, merged; 100,000 entries, 72 MB, in order). A controller that enqueues keys gains nothing from
	// the order; a handler that replays changes elsewhere (an audit log, a
	// mirror across objects) wants it.
	InOrder bool
}

// AddEventHandlerWithOptions registers handler, which is then told of
// every change from its own goroutine as opts say.
//
// A resyncPeriod below MinimumResyncPeriod is raised to it. Before Run, a
// period shorter than the informer's resync check period shortens the check
// period; after Run, it is raised to the check period, and a handler of an
// informer that does not resync gets no resync.
//
// A handler added after Run first receives an add, with IsInInitialList
// set, of every object cached at that moment, then every later change, none
// lost or doubled. It returns ErrStopped once the informer has stopped.
func (s *SharedIndexInformer[T]) AddEventHandlerWithOptions(handler ResourceEventHandler[T], opts HandlerOptions) (*Registration[T], error) {
	resyncPeriod := opts.ResyncPeriod
	if handler == nil {
		return nil, errors.New("cache: AddEventHandler: nil handler")
	}
	if s.stopped.Load() {
		return nil, fmt.Errorf("cache: AddEventHandler: %w", ErrStopped)
	}
	if resyncPeriod > 0 && resyncPeriod < MinimumResyncPeriod {
		s.log.Warn("cache: resync period too short, raised to the minimum", "requested", resyncPeriod, "minimum", MinimumResyncPeriod)
		resyncPeriod = MinimumResyncPeriod
	}

	// Joining blocks the delta loop, so that the cache replay and the
	// notifications that follow it meet exactly.
	s.deltasMu.Lock()
	defer s.deltasMu.Unlock()
	s.mu.Lock()
	started := s.started
	check := s.resyncCheckPeriod
	now := time.Now()
	if resyncPeriod > 0 && (check == 0 || resyncPeriod < check) {
		if !started {
			check = resyncPeriod
			s.resyncCheckPeriod = check
			s.processor.resyncCheckPeriodChanged(check, now)
		} else if check == 0 {
			s.log.Warn("cache: informer started without resync, handler will not be resynced", "requested", resyncPeriod)
		} else {
			s.log.Warn("cache: resync period shorter than the running informer's check period, raised to it", "requested", resyncPeriod, "check", check)
		}
	}
	s.mu.Unlock()

	l := newListener(handler, opts.InOrder, resyncPeriod, effectiveResync(resyncPeriod, check), now, s.log, s.typed.onHandlerPanic)
	if started {
		n := Notification[T]{Type: NotifyAdd, Source: SourceInitialList, IsInInitialList: true}
		s.indexer.each(func(key string, obj T) {
			n.Object = obj
			l.add(key, &n, now)
		})
	}
	if !s.processor.addListener(l) {
		return nil, fmt.Errorf("cache: AddEventHandler: %w", ErrStopped)
	}
	r := &Registration[T]{informer: s}
	r.l.Store(l)
	return r, nil
}

// RemoveEventHandler unregisters the handler of reg: its backlog is dropped
// and it receives nothing more once the call it may be in returns.
func (s *SharedIndexInformer[T]) RemoveEventHandler(r ResourceEventHandlerRegistration) error {
	reg, ok := r.(*Registration[T])
	if !ok || reg == nil || reg.informer != s {
		return ErrUnknownRegistration
	}
	l := reg.l.Swap(nil)
	if l == nil || !s.processor.removeListener(l) {
		return ErrUnknownRegistration
	}
	return nil
}

// Registration is a handler's membership of a SharedIndexInformer.
type Registration[T Object] struct {
	informer *SharedIndexInformer[T]
	l        atomic.Pointer[listener[T]]
}

// HasSynced reports whether the informer has synced and the handler has
// returned from every add of the initial list (or of the cache replay, for
// a handler added after start). It is false once the handler is removed.
func (r *Registration[T]) HasSynced() bool {
	l := r.l.Load()
	return l != nil && r.informer.HasSynced() && l.initialPending.Load() == 0
}

// Backlog returns how many notifications wait for the handler (at most two
// per key, unless HandlerOptions.InOrder) and how long the oldest has waited, zero when none does.
func (r *Registration[T]) Backlog() (pending int, oldestAge time.Duration) {
	l := r.l.Load()
	if l == nil {
		return 0, 0
	}
	n, oldest := l.backlog()
	if n == 0 || oldest.IsZero() {
		return n, 0
	}
	return n, time.Since(oldest)
}

// PendingKeys returns how many distinct keys have a notification waiting for
// the handler.
func (r *Registration[T]) PendingKeys() int {
	l := r.l.Load()
	if l == nil {
		return 0
	}
	return l.pendingKeys()
}

// Delivered counts the notifications the handler has been given.
func (r *Registration[T]) Delivered() uint64 {
	l := r.l.Load()
	if l == nil {
		return 0
	}
	return l.delivered.Load()
}

// Panics counts the panics the handler raised (each recovered).
func (r *Registration[T]) Panics() uint64 {
	l := r.l.Load()
	if l == nil {
		return 0
	}
	return l.panics.Load()
}

// ResyncPeriod returns the resync period the handler got, after the 1 s
// floor and the rounding to the informer's check period.
func (r *Registration[T]) ResyncPeriod() time.Duration {
	l := r.l.Load()
	if l == nil {
		return 0
	}
	r.informer.processor.mu.Lock()
	defer r.informer.processor.mu.Unlock()
	return l.resyncPeriod
}

// each calls fn with every stored key and object, under the read lock: fn
// must not call back into the store.
func (s *threadSafeStore[T]) each(fn func(key string, obj T)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, e := range s.items {
		fn(k, e.obj)
	}
}
