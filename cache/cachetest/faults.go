package cachetest

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

// errInjected stands in when a fault is injected with a nil error.
var errInjected = apierrors.NewInternalError(errors.New("cachetest: injected failure"))

func validOp(op Op) bool { return op >= 0 && op < numOps }

// FailNext makes the next n calls of op fail with err (an InternalError if
// err is nil) before doing anything else. It replaces any earlier FailNext
// for op; n <= 0 cancels it.
func (s *Source[T]) FailNext(op Op, n int, err error) {
	if !validOp(op) {
		return
	}
	if err == nil {
		err = errInjected
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failN[op] = max(n, 0)
	s.failErr[op] = err
}

// FailListAfterPages makes one paged list fail with err (an InternalError if
// err is nil) once k pages of it have been served: the next List call whose
// page number is above k fails, and the fault is then spent. A call without
// a continue token is page 1 and a continue token issued on page p leads to
// page p+1, so k = 0 fails the next List of any kind, and a fault with k >= 1
// waits through unpaged lists until a list goes that far. It replaces any
// earlier FailListAfterPages; k < 0 cancels it.
func (s *Source[T]) FailListAfterPages(k int, err error) {
	if err == nil {
		err = errInjected
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageFail = k >= 0
	s.pageFailK = k
	s.pageFailEr = err
}

// SetDelay makes every later call of op wait d before answering (0 removes
// the delay). A call whose context ends while it waits returns the context's
// error. The wait uses a time.Timer, so a synctest bubble's clock drives it.
func (s *Source[T]) SetDelay(op Op, d time.Duration) {
	if !validOp(op) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay[op] = max(d, 0)
}

// ListCalls counts the List calls so far, failed ones included.
func (s *Source[T]) ListCalls() int { return s.callCount(OpList) }

// WatchCalls counts the Watch calls so far, failed ones included.
func (s *Source[T]) WatchCalls() int { return s.callCount(OpWatch) }

func (s *Source[T]) callCount(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls[op])
}

// Requests returns copies of the options of every call of op so far, oldest
// first, failed calls included.
func (s *Source[T]) Requests(op Op) []metav1.ListOptions {
	if !validOp(op) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]metav1.ListOptions, len(s.calls[op]))
	for i := range s.calls[op] {
		s.calls[op][i].DeepCopyInto(&out[i])
	}
	return out
}

// begin does what every List and Watch call does first: record opts, then
// fail if ctx is done or a failure was injected (after the delay, if any).
func (s *Source[T]) begin(ctx context.Context, op Op, opts metav1.ListOptions) error {
	s.mu.Lock()
	s.calls[op] = append(s.calls[op], *opts.DeepCopy())
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return err
	}
	var injected error
	if s.failN[op] > 0 {
		s.failN[op]--
		injected = s.failErr[op]
	}
	d := s.delay[op]
	s.mu.Unlock()

	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return injected
}

// DropWatches ends every open watch normally: each delivers what is already
// queued and then Next returns io.EOF, as when a server closes the stream.
func (s *Source[T]) DropWatches() { s.endWatches(nil) }

// BreakWatches ends every open watch with err (ErrWatchBroken if nil): each
// delivers what is already queued and then Next returns err.
func (s *Source[T]) BreakWatches(err error) {
	if err == nil {
		err = ErrWatchBroken
	}
	s.endWatches(err)
}

func (s *Source[T]) endWatches(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		delete(s.watchers, w)
		w.finish(err)
	}
}

// InjectEvent queues ev, exactly as given, on every open watch, whatever
// its selectors or bookmark setting. It changes nothing in the Source, so it
// can feed a client input no real server would send: an ERROR event without
// a Status, an unknown type, a nil object.
func (s *Source[T]) InjectEvent(ev cache.Event[T]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		w.push(ev)
	}
}

// Watchers counts the open watches.
func (s *Source[T]) Watchers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watchers)
}
