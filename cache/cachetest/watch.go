package cachetest

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

// Watch opens a watch with the semantics of a real API server:
//
//   - resourceVersion N: every change with a revision above N, then live
//     changes. If N < CompactedRevision() the stream is a single ERROR event
//     with a 410 Expired Status; if N > Revision(), a single ERROR event with
//     the Status of NewTooLargeResourceVersionError. (With ReturnWatchErrors
//     Watch returns these errors instead.)
//   - resourceVersion "" or "0": an ADDED event for every current object,
//     sorted by key, then live changes.
//   - sendInitialEvents=true (which needs resourceVersionMatch=NotOlderThan
//     and allowWatchBookmarks, else 400): ADDED events for the current state,
//     then a BOOKMARK annotated with cache.InitialEventsEndAnnotation "true"
//     whose resourceVersion is that state's revision, then live changes.
//     resourceVersion N may not exceed Revision(); compaction does not matter.
//   - sendInitialEvents=false (same requirements): no initial events; from
//     N, or from now for "" and "0".
//   - any resourceVersionMatch without sendInitialEvents is 400.
//
// Label and field selectors apply per watch; an object whose change moves
// it into the selection arrives as ADDED, and out of it as DELETED carrying
// its previous state stamped with the change's revision. allowWatchBookmarks
// lets Bookmark reach the watch. timeoutSeconds > 0 ends the stream normally
// after that long; so does ctx ending (Next returns io.EOF in both cases).
//
// Writers never wait for watchers: each watch queues without bound until
// Next takes from it. Event objects are shared and must not be mutated.
func (s *Source[T]) Watch(ctx context.Context, opts metav1.ListOptions) (cache.Watcher[T], error) {
	if err := s.begin(ctx, OpWatch, opts); err != nil {
		return nil, err
	}
	f, err := s.newFilter(opts)
	if err != nil {
		return nil, err
	}
	if err := validateWatch(opts); err != nil {
		return nil, err
	}
	n := int64(-1) // no resourceVersion
	if opts.ResourceVersion != "" {
		if n, err = parseRV(opts.ResourceVersion); err != nil {
			return nil, err
		}
	}
	streaming := opts.SendInitialEvents != nil && *opts.SendInitialEvents

	s.mu.Lock()
	defer s.mu.Unlock()
	var (
		from    = s.rev // replay changes above this revision
		initial bool    // start with ADDED for the current state
	)
	switch {
	case n > s.rev:
		return s.failedWatch(NewTooLargeResourceVersionError(n, s.rev))
	case streaming:
		initial = true
	case n <= 0:
		initial = opts.SendInitialEvents == nil
	case n < s.compacted:
		return s.failedWatch(expiredRV(n, s.compacted))
	default:
		from = n
	}
	var endMark T
	if streaming {
		obj, ok := s.newObject()
		if !ok {
			return nil, apierrors.NewInternalError(errNoNewObject)
		}
		obj.SetResourceVersion(strconv.FormatInt(s.rev, 10))
		obj.SetAnnotations(map[string]string{cache.InitialEventsEndAnnotation: "true"})
		endMark = obj
	}

	w := &watcher[T]{
		src:       s,
		filter:    f,
		bookmarks: opts.AllowWatchBookmarks,
		signal:    make(chan struct{}, 1),
	}
	if initial {
		for _, k := range sortedKeys(s.objects) {
			if obj := s.objects[k]; f.match(obj) {
				w.queue = append(w.queue, cache.Event[T]{Type: cache.EventAdded, Object: obj})
			}
		}
	}
	if streaming {
		w.queue = append(w.queue, cache.Event[T]{Type: cache.EventBookmark, Object: endMark})
	}
	for _, e := range s.log[s.firstAfter(from):] {
		if ev, ok := s.eventFor(e, f); ok {
			w.queue = append(w.queue, ev)
		}
	}
	s.watchers[w] = struct{}{}
	// The callbacks take s.mu first, so they cannot act before this Watch
	// call has finished registering w.
	w.mu.Lock()
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		w.timer = time.AfterFunc(time.Duration(*opts.TimeoutSeconds)*time.Second, w.expire)
	}
	w.stopCtx = context.AfterFunc(ctx, w.expire)
	w.mu.Unlock()
	return w, nil
}

var errNoNewObject = errors.New("cachetest: no NewObject constructor for bookmark objects; use WithNewObject")

func validateWatch(opts metav1.ListOptions) error {
	match := opts.ResourceVersionMatch
	if opts.SendInitialEvents == nil {
		if match != "" {
			return apierrors.NewBadRequest("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")
		}
		return nil
	}
	if match != metav1.ResourceVersionMatchNotOlderThan {
		return apierrors.NewBadRequest(`sendInitialEvents requires setting resourceVersionMatch to "NotOlderThan"`)
	}
	if !opts.AllowWatchBookmarks {
		return apierrors.NewBadRequest("sendInitialEvents requires setting allowWatchBookmarks to true")
	}
	return nil
}

// failedWatch answers a watch that cannot start, as configured: the error
// itself, or a stream holding only an ERROR event with its Status.
func (s *Source[T]) failedWatch(err *apierrors.StatusError) (cache.Watcher[T], error) {
	if s.cfg.returnWatchErrors {
		return nil, err
	}
	st := err.ErrStatus
	w := &watcher[T]{
		src:    s,
		filter: &filter[T]{},
		signal: make(chan struct{}, 1),
		queue:  []cache.Event[T]{{Type: cache.EventError, Status: &st}},
		ended:  true,
		endErr: io.EOF,
	}
	return w, nil
}

// Bookmark sends every open watch that allowed bookmarks a BOOKMARK event
// whose object carries only the current revision as its resourceVersion.
// It does nothing when the Source has no way to build an empty T (see
// WithNewObject).
func (s *Source[T]) Bookmark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok := s.newObject()
	if !ok {
		return
	}
	obj.SetResourceVersion(strconv.FormatInt(s.rev, 10))
	ev := cache.Event[T]{Type: cache.EventBookmark, Object: obj}
	for w := range s.watchers {
		if w.bookmarks {
			w.push(ev)
		}
	}
}

// remove unregisters w, so that no more events are queued on it.
func (s *Source[T]) remove(w *watcher[T]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watchers, w)
}

// watcher is one open watch. Lock order: Source.mu before watcher.mu.
type watcher[T cache.Object] struct {
	src       *Source[T]
	filter    *filter[T]
	bookmarks bool
	// signal holds a token when queue or state may have changed since Next
	// last looked; capacity 1, so senders never block.
	signal chan struct{}

	mu      sync.Mutex
	queue   []cache.Event[T]
	ended   bool  // no more events will be queued; Next returns endErr once queue is drained
	endErr  error // io.EOF for a normal end
	stopped bool
	timer   *time.Timer
	stopCtx func() bool
}

var _ cache.Watcher[cache.Object] = (*watcher[cache.Object])(nil)

func (w *watcher[T]) wake() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// push queues ev unless the watch has ended.
func (w *watcher[T]) push(ev cache.Event[T]) {
	w.mu.Lock()
	if w.ended || w.stopped {
		w.mu.Unlock()
		return
	}
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	w.wake()
}

// finish ends the stream after what is queued: with err, or normally if err
// is nil. w must already be unregistered.
func (w *watcher[T]) finish(err error) {
	if err == nil {
		err = io.EOF
	}
	w.mu.Lock()
	if w.ended || w.stopped {
		w.mu.Unlock()
		return
	}
	w.ended, w.endErr = true, err
	w.release()
	w.mu.Unlock()
	w.wake()
}

// expire ends the stream normally; it runs when the timeout fires or the
// watch's context ends.
func (w *watcher[T]) expire() {
	w.src.remove(w)
	w.finish(nil)
}

// release stops the timeout and the context hook. w.mu is held.
func (w *watcher[T]) release() {
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.stopCtx != nil {
		w.stopCtx()
	}
}

// Next returns the next queued event, blocking until there is one. Once the
// stream has ended and its queue is drained, it returns io.EOF for a normal
// end (timeout, context done, DropWatches, a start-up ERROR event already
// delivered) or the BreakWatches error. After Stop it returns io.EOF.
func (w *watcher[T]) Next() (cache.Event[T], error) {
	for {
		w.mu.Lock()
		switch {
		case w.stopped:
			w.mu.Unlock()
			return cache.Event[T]{}, io.EOF
		case len(w.queue) > 0:
			ev := w.queue[0]
			w.queue[0] = cache.Event[T]{} // let the object be collected
			w.queue = w.queue[1:]
			w.mu.Unlock()
			return ev, nil
		case w.ended:
			err := w.endErr
			w.mu.Unlock()
			return cache.Event[T]{}, err
		}
		w.mu.Unlock()
		<-w.signal
	}
}

// Stop ends the watch, drops what is queued and unblocks Next. It may be
// called more than once and from any goroutine.
func (w *watcher[T]) Stop() {
	w.src.remove(w)
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	w.queue = nil
	w.release()
	w.mu.Unlock()
	w.wake()
}
