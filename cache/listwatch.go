package cache

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// List is one page of a list response.
type List[T Object] struct {
	// Items are the objects of this page.
	Items []T
	// ResourceVersion is the version of the state the list was read at.
	ResourceVersion string
	// Continue, when not empty, asks for the next page.
	Continue string
	// RemainingItemCount, when known, counts the items after this page.
	RemainingItemCount *int64
	// ShardInfo, on the answer to a list with a shardSelector from a
	// server that applied it, echoes the selector (kube-apiserver sets it
	// on built-in resources' lists only).
	ShardInfo *metav1.ShardInfo
}

// EventType is the kind of a watch event, spelled as on the wire.
type EventType string

// The watch event types a Kubernetes API server sends.
const (
	EventAdded    EventType = "ADDED"
	EventModified EventType = "MODIFIED"
	EventDeleted  EventType = "DELETED"
	EventBookmark EventType = "BOOKMARK"
	EventError    EventType = "ERROR"
)

// InitialEventsEndAnnotation marks the BOOKMARK that ends the initial events
// of a streaming list (a watch with sendInitialEvents=true).
const InitialEventsEndAnnotation = "k8s.io/initial-events-end"

// Event is one watch event.
//
// For Added, Modified and Deleted, Object is the object's state after the
// change (for Deleted, its last state). For Bookmark, Object carries only a
// resourceVersion and annotations. For Error, Status says what went wrong and
// Object is the zero value.
type Event[T Object] struct {
	Type   EventType
	Object T
	Status *metav1.Status
}

// Watcher is an open watch stream.
//
// Next blocks until the next event arrives. It returns io.EOF when the server
// ended the stream normally (timeout, or the server closing it); the caller
// may then watch again from the last resourceVersion it saw. Any other error
// means the stream broke. After Stop, Next returns io.EOF. Next and Stop may
// be called from different goroutines; Next is not called concurrently with
// itself.
type Watcher[T Object] interface {
	Next() (Event[T], error)
	Stop()
}

// ListerWatcher lists and watches one resource. A REST client implements it
// for a real API server; cachetest implements it over an in-memory history.
//
// List returns one page: callers that want every item follow Continue. Watch
// opens a stream whose lifetime ends when ctx is done or Stop is called.
// Both take the Kubernetes list options as they are (labelSelector,
// fieldSelector, resourceVersion, resourceVersionMatch, limit, continue,
// timeoutSeconds, allowWatchBookmarks, sendInitialEvents).
type ListerWatcher[T Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (*List[T], error)
	Watch(ctx context.Context, opts metav1.ListOptions) (Watcher[T], error)
}

// WatchListSupporter is implemented by a ListerWatcher that knows whether
// its Watch honours sendInitialEvents (a streaming list). One that does not
// implement it is taken to honour it, as a Kubernetes API server does; a
// ListerWatcher over something else (a fake, a filter of another source)
// says false, so that reflectors list at once rather than wait for initial
// events that never come.
type WatchListSupporter interface {
	SupportsWatchList() bool
}

// SupportsWatchList reports whether lw's Watch honours sendInitialEvents:
// what lw says if it is a WatchListSupporter, true otherwise. A wrapper of
// another ListerWatcher forwards the question with it.
func SupportsWatchList[T Object](lw ListerWatcher[T]) bool {
	if s, ok := lw.(WatchListSupporter); ok {
		return s.SupportsWatchList()
	}
	return true
}

// ListWatch adapts a pair of functions to ListerWatcher.
type ListWatch[T Object] struct {
	ListFunc  func(ctx context.Context, opts metav1.ListOptions) (*List[T], error)
	WatchFunc func(ctx context.Context, opts metav1.ListOptions) (Watcher[T], error)
	// NoWatchList says WatchFunc does not honour sendInitialEvents
	// (WatchListSupporter), so that reflectors list rather than stream.
	NoWatchList bool
}

// SupportsWatchList reports !NoWatchList.
func (lw ListWatch[T]) SupportsWatchList() bool { return !lw.NoWatchList }

var errNoFunc = errors.New("cache: ListWatch function not set")

// List calls ListFunc.
func (lw ListWatch[T]) List(ctx context.Context, opts metav1.ListOptions) (*List[T], error) {
	if lw.ListFunc == nil {
		return nil, errNoFunc
	}
	return lw.ListFunc(ctx, opts)
}

// Watch calls WatchFunc.
func (lw ListWatch[T]) Watch(ctx context.Context, opts metav1.ListOptions) (Watcher[T], error) {
	if lw.WatchFunc == nil {
		return nil, errNoFunc
	}
	return lw.WatchFunc(ctx, opts)
}
