package cache

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Erase returns lw as a ListerWatcher of untyped Objects, for code that
// handles many resources through one interface (an informer factory's
// source). Unerase[T] gives the original back at no cost.
func Erase[T Object](lw ListerWatcher[T]) ListerWatcher[Object] {
	return erased[T]{lw: lw}
}

// Unerase returns lw as a ListerWatcher[T]. For one made by Erase[T] it is
// the original; otherwise each object is checked to be a T, and one that is
// not fails its list or watch with an error rather than a panic.
func Unerase[T Object](lw ListerWatcher[Object]) ListerWatcher[T] {
	if e, ok := lw.(erased[T]); ok {
		return e.lw
	}
	return unerased[T]{lw: lw}
}

type erased[T Object] struct{ lw ListerWatcher[T] }

func (e erased[T]) List(ctx context.Context, opts metav1.ListOptions) (*List[Object], error) {
	l, err := e.lw.List(ctx, opts)
	if err != nil || l == nil {
		return nil, err
	}
	items := make([]Object, len(l.Items))
	for i, obj := range l.Items {
		if !isNil(obj) {
			items[i] = obj
		}
	}
	return &List[Object]{Items: items, ResourceVersion: l.ResourceVersion, Continue: l.Continue, RemainingItemCount: l.RemainingItemCount, ShardInfo: l.ShardInfo}, nil
}

func (e erased[T]) Watch(ctx context.Context, opts metav1.ListOptions) (Watcher[Object], error) {
	w, err := e.lw.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return erasedWatcher[T]{w: w}, nil
}

type erasedWatcher[T Object] struct{ w Watcher[T] }

func (e erasedWatcher[T]) Next() (Event[Object], error) {
	ev, err := e.w.Next()
	out := Event[Object]{Type: ev.Type, Status: ev.Status}
	if !isNil(ev.Object) {
		out.Object = ev.Object
	}
	return out, err
}

func (e erasedWatcher[T]) Stop() { e.w.Stop() }

type unerased[T Object] struct{ lw ListerWatcher[Object] }

func (u unerased[T]) List(ctx context.Context, opts metav1.ListOptions) (*List[T], error) {
	l, err := u.lw.List(ctx, opts)
	if err != nil || l == nil {
		return nil, err
	}
	items := make([]T, len(l.Items))
	for i, obj := range l.Items {
		t, ok := obj.(T)
		if !ok && obj != nil {
			return nil, fmt.Errorf("cache: list item %d is a %T, not a %T", i, obj, t)
		}
		items[i] = t
	}
	return &List[T]{Items: items, ResourceVersion: l.ResourceVersion, Continue: l.Continue, RemainingItemCount: l.RemainingItemCount, ShardInfo: l.ShardInfo}, nil
}

func (u unerased[T]) Watch(ctx context.Context, opts metav1.ListOptions) (Watcher[T], error) {
	w, err := u.lw.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return unerasedWatcher[T]{w: w}, nil
}

type unerasedWatcher[T Object] struct{ w Watcher[Object] }

func (u unerasedWatcher[T]) Next() (Event[T], error) {
	ev, err := u.w.Next()
	out := Event[T]{Type: ev.Type, Status: ev.Status}
	if ev.Object != nil {
		t, ok := ev.Object.(T)
		if !ok {
			return Event[T]{}, fmt.Errorf("cache: %s event object is a %T, not a %T", ev.Type, ev.Object, t)
		}
		out.Object = t
	}
	return out, err
}

func (u unerasedWatcher[T]) Stop() { u.w.Stop() }

func (e erased[T]) SupportsWatchList() bool { return SupportsWatchList(e.lw) }

func (u unerased[T]) SupportsWatchList() bool { return SupportsWatchList(u.lw) }
