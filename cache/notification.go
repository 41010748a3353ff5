package cache

import "strconv"

// NotificationType says what a Notification tells a handler.
type NotificationType uint8

// The notification types, matching the three ResourceEventHandler methods.
const (
	NotifyAdd NotificationType = iota + 1
	NotifyUpdate
	NotifyDelete
)

func (t NotificationType) String() string {
	switch t {
	case NotifyAdd:
		return "add"
	case NotifyUpdate:
		return "update"
	case NotifyDelete:
		return "delete"
	}
	return "NotificationType(" + strconv.Itoa(int(t)) + ")"
}

// Source says where a notification came from.
type Source uint8

// The sources of notifications.
const (
	// SourceWatch is a change seen on the watch stream.
	SourceWatch Source = iota
	// SourceInitialList is an object of the informer's first list, or, for
	// a handler added after the informer started, one of the synthetic adds
	// that replay the cache to it.
	SourceInitialList
	// SourceRelist is a change found by a later list: an object that changed
	// or appeared while the watch was down, or one that vanished (a delete
	// with FinalStateUnknown).
	SourceRelist
	// SourceResync is a periodic resync, or a relisted object whose
	// resourceVersion did not change: the object is the one already cached.
	SourceResync
)

func (s Source) String() string {
	switch s {
	case SourceWatch:
		return "watch"
	case SourceInitialList:
		return "initial-list"
	case SourceRelist:
		return "relist"
	case SourceResync:
		return "resync"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// Notification is one change delivered to a handler, with where it came
// from.
//
// A handler that fell behind receives merged notifications (see
// SharedIndexInformer): an update then goes from the oldest old state to the
// newest new one, and Source is that of the newest change merged in, except
// that an add stays an add and keeps its Source and IsInInitialList, and
// that a resync merged into a pending change keeps the change's Source: a
// notification says SourceResync only when all it carries is resyncs.
type Notification[T Object] struct {
	Type NotificationType
	// Object is the new state; for a delete, the final state, or, when
	// FinalStateUnknown, the last state the cache knew.
	Object T
	// OldObject is the state before an update; the zero value otherwise.
	OldObject T
	Source    Source
	// IsInInitialList is set on adds of the first list (or of the cache
	// replay to a handler added after start).
	IsInInitialList bool
	// FinalStateUnknown is set on deletes inferred from a relist.
	FinalStateUnknown bool
}

// NotificationHandler is a handler that wants each notification whole,
// source included. A ResourceEventHandler given to a SharedIndexInformer that
// also implements NotificationHandler receives OnNotification instead of
// OnAdd, OnUpdate and OnDelete.
type NotificationHandler[T Object] interface {
	OnNotification(n Notification[T])
}

// NotificationHandlerFunc adapts a function to both NotificationHandler and
// ResourceEventHandler, so that it can be given to AddEventHandler.
type NotificationHandlerFunc[T Object] func(n Notification[T])

// OnNotification calls f(n).
func (f NotificationHandlerFunc[T]) OnNotification(n Notification[T]) { f(n) }

// OnAdd calls f with an add from the watch (or the initial list).
func (f NotificationHandlerFunc[T]) OnAdd(obj T, isInInitialList bool) {
	src := SourceWatch
	if isInInitialList {
		src = SourceInitialList
	}
	f(Notification[T]{Type: NotifyAdd, Object: obj, Source: src, IsInInitialList: isInInitialList})
}

// OnUpdate calls f with an update from the watch.
func (f NotificationHandlerFunc[T]) OnUpdate(oldObj, newObj T) {
	f(Notification[T]{Type: NotifyUpdate, Object: newObj, OldObject: oldObj})
}

// OnDelete calls f with a delete, from a relist when the final state is
// unknown and from the watch otherwise.
func (f NotificationHandlerFunc[T]) OnDelete(obj T, finalStateUnknown bool) {
	src := SourceWatch
	if finalStateUnknown {
		src = SourceRelist
	}
	f(Notification[T]{Type: NotifyDelete, Object: obj, Source: src, FinalStateUnknown: finalStateUnknown})
}
