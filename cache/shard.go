package cache

import (
	"context"
	"log/slog"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
)

// sharded is the ListerWatcher of a sharded Reflector (ReflectorOptions.
// Shard): it asks the server for the shard alone (shardSelector, on every
// list page and watch), and keeps out of what it hands on any object the
// server sent from outside the shard, as a server that does not know the
// parameter (kube-apiserver with its ShardedListAndWatch gate off, or
// before v1.36) sends every object. uid and namespace never change, so an
// object is in the shard for all its life or never: dropping the events
// of the others loses no transition.
type sharded[T Object] struct {
	lw   ListerWatcher[T]
	sel  sharding.Selector
	wire string
	log  *slog.Logger
	once *sync.Once // the note that the server does not shard
}

func newSharded[T Object](lw ListerWatcher[T], sel sharding.Selector, log *slog.Logger) *sharded[T] {
	return &sharded[T]{lw: lw, sel: sel, wire: sel.String(), log: log, once: new(sync.Once)}
}

// in reports whether obj is in the shard. An object the selector cannot
// read (no metadata) is kept: the server decides for it.
func (s *sharded[T]) in(obj T) bool {
	ok, err := s.sel.Matches(obj)
	if err != nil || ok {
		return true
	}
	s.once.Do(func() {
		s.log.Info("the server sent an object outside the shard asked for (shardSelector unsupported: kube-apiserver's ShardedListAndWatch feature gate off?); keeping the shard in the client",
			"shardSelector", s.wire, "namespace", obj.GetNamespace(), "name", obj.GetName())
	})
	return false
}

func (s *sharded[T]) List(ctx context.Context, opts metav1.ListOptions) (*List[T], error) {
	opts.ShardSelector = s.wire
	l, err := s.lw.List(ctx, opts)
	if err != nil || l == nil {
		return l, err
	}
	kept := l.Items[:0]
	for _, obj := range l.Items {
		if isNil(obj) || s.in(obj) {
			kept = append(kept, obj)
		}
	}
	clear(l.Items[len(kept):])
	l.Items = kept
	return l, nil
}

func (s *sharded[T]) Watch(ctx context.Context, opts metav1.ListOptions) (Watcher[T], error) {
	opts.ShardSelector = s.wire
	w, err := s.lw.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return shardedWatcher[T]{Watcher: w, s: s}, nil
}

func (s *sharded[T]) SupportsWatchList() bool { return SupportsWatchList(s.lw) }

// shardedWatcher drops the events of objects outside the shard.
type shardedWatcher[T Object] struct {
	Watcher[T]
	s *sharded[T]
}

func (w shardedWatcher[T]) Next() (Event[T], error) {
	for {
		ev, err := w.Watcher.Next()
		if err != nil {
			return ev, err
		}
		switch ev.Type {
		case EventAdded, EventModified, EventDeleted:
			if !isNil(ev.Object) && !w.s.in(ev.Object) {
				continue
			}
		}
		return ev, nil
	}
}
