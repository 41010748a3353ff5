package cache

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncStatus says whether an informer has synced and, if a list or watch
// failed since the last one that succeeded, why.
type SyncStatus struct {
	// Synced is HasSynced.
	Synced bool
	// LastError is the last list or watch failure since a list or watch
	// last succeeded; nil when there is none.
	LastError error
	// LastErrorTime is when LastError happened.
	LastErrorTime time.Time
}

// Reason explains the status in a few words: "synced", "waiting for the
// first list", or the failure that keeps the informer from syncing, such
// as "Forbidden: pods is forbidden: ...".
func (s SyncStatus) Reason() string {
	switch {
	case s.Synced:
		return "synced"
	case s.LastError == nil:
		return "waiting for the first list"
	}
	if r := apierrors.ReasonForError(s.LastError); r != metav1.StatusReasonUnknown {
		return string(r) + ": " + s.LastError.Error()
	}
	return s.LastError.Error()
}

// SyncStatus returns whether the informer has synced and the last list or
// watch error, so that a caller waiting for a sync can tell why it is not
// coming (a 403 Forbidden, say) instead of only that it is not.
func (s *SharedIndexInformer[T]) SyncStatus() SyncStatus {
	at, err := s.status.get()
	return SyncStatus{Synced: s.HasSynced(), LastError: err, LastErrorTime: at}
}

// syncStatus holds an informer's last list or watch error.
type syncStatus struct {
	mu  sync.Mutex
	err error
	at  time.Time
}

func (st *syncStatus) set(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.err, st.at = err, time.Now()
}

func (st *syncStatus) clear() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.err, st.at = nil, time.Time{}
}

func (st *syncStatus) get() (time.Time, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.at, st.err
}

// wrapHandler returns a WatchErrorHandler that records each error, then
// passes it on to h (or logs it when h is nil). It is how failures the
// ListerWatcher never sees (a broken stream, an ERROR event) reach the
// status, without any hook in the Reflector.
func (st *syncStatus) wrapHandler(h WatchErrorHandler, log *slog.Logger) WatchErrorHandler {
	return func(ctx context.Context, err error) {
		st.set(err)
		if h != nil {
			h(ctx, err)
			return
		}
		if isExpired(err) || errors.Is(err, context.Canceled) {
			log.InfoContext(ctx, "cache: watch closed", "err", err)
			return
		}
		log.ErrorContext(ctx, "cache: list/watch failed", "err", err)
	}
}

// statusListerWatcher records the outcome of each list and watch call in a
// syncStatus: failures set it, successes clear it.
type statusListerWatcher[T Object] struct {
	lw     ListerWatcher[T]
	status *syncStatus
}

func (s statusListerWatcher[T]) List(ctx context.Context, opts metav1.ListOptions) (*List[T], error) {
	l, err := s.lw.List(ctx, opts)
	switch {
	case err != nil && ctx.Err() == nil:
		s.status.set(err)
	case err == nil:
		s.status.clear()
	}
	return l, err
}

func (s statusListerWatcher[T]) Watch(ctx context.Context, opts metav1.ListOptions) (Watcher[T], error) {
	w, err := s.lw.Watch(ctx, opts)
	switch {
	case err != nil && ctx.Err() == nil:
		s.status.set(err)
	case err == nil:
		s.status.clear()
	}
	return w, err
}

func (s statusListerWatcher[T]) SupportsWatchList() bool { return SupportsWatchList(s.lw) }
