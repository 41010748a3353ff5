package compat_test

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// recordingLW is a cache.ListerWatcher over a typed client that records
// every list and watch a reflector makes and what the server answered, so
// that a test can tell a relist from a re-watch. It can also freeze the
// watch in progress (drop what the server sends, as a network partition
// would) and cut it, to put a reflector behind the server's history.
type recordingLW struct {
	list  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
	// watchList false makes reflectors fall back to list+watch even though
	// the WatchListClient feature gate is on: client-go's documented
	// per-client opt-out.
	watchList bool

	mu      sync.Mutex
	calls   []lwCall
	current *gatedWatch
}

// lwCall is one list or watch request and its outcome. For a watch, Err
// is the ERROR event that ended it, if any.
type lwCall struct {
	Watch bool
	Opts  metav1.ListOptions
	Err   error
}

var (
	_ cache.ListerWatcherWithContext = (*recordingLW)(nil)
	_ cache.ListerWatcher            = (*recordingLW)(nil)
)

func (l *recordingLW) IsWatchListSemanticsUnSupported() bool { return !l.watchList }

func (l *recordingLW) record(c lwCall) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
	return len(l.calls) - 1
}

func (l *recordingLW) setErr(i int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[i].Err = err
}

// history returns the calls so far.
func (l *recordingLW) history() []lwCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]lwCall(nil), l.calls...)
}

func (l *recordingLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	i := l.record(lwCall{Opts: opts})
	obj, err := l.list(ctx, opts)
	if err != nil {
		l.setErr(i, err)
	}
	return obj, err
}

func (l *recordingLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	i := l.record(lwCall{Watch: true, Opts: opts})
	w, err := l.watch(ctx, opts)
	if err != nil {
		l.setErr(i, err)
		return nil, err
	}
	g := &gatedWatch{w: w, out: make(chan watch.Event), stop: make(chan struct{}), done: make(chan struct{})}
	g.onError = func(err error) { l.setErr(i, err) }
	l.mu.Lock()
	l.current = g
	l.mu.Unlock()
	go g.run()
	return g, nil
}

// List and Watch make recordingLW a plain cache.ListerWatcher, which
// cache.NewSharedIndexInformer asks for; reflectors use the context forms.
func (l *recordingLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *recordingLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

// freeze makes the watch in progress drop everything the server sends
// from now on; later watches are not affected.
func (l *recordingLW) freeze() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current != nil {
		l.current.freeze()
	}
}

// cut ends the watch in progress as a dropped connection would: its
// result channel closes and the reflector watches again from the last
// resourceVersion it saw.
func (l *recordingLW) cut() {
	l.mu.Lock()
	g := l.current
	l.mu.Unlock()
	if g != nil {
		g.Stop()
	}
}

// gatedWatch forwards a watch's events unless frozen.
type gatedWatch struct {
	w       watch.Interface
	out     chan watch.Event
	onError func(error)

	mu       sync.Mutex
	frozen   bool
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func (g *gatedWatch) freeze() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.frozen = true
}

func (g *gatedWatch) isFrozen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.frozen
}

func (g *gatedWatch) run() {
	defer close(g.done)
	defer close(g.out)
	for {
		select {
		case <-g.stop:
			return
		case ev, ok := <-g.w.ResultChan():
			if !ok {
				return
			}
			if g.isFrozen() {
				continue
			}
			if ev.Type == watch.Error {
				g.onError(apierrors.FromObject(ev.Object))
			}
			select {
			case g.out <- ev:
			case <-g.stop:
				return
			}
		}
	}
}

func (g *gatedWatch) ResultChan() <-chan watch.Event { return g.out }

// Stop ends the underlying watch and waits for the forwarding goroutine,
// so that no goroutine outlives the reflector that used the watch.
func (g *gatedWatch) Stop() {
	g.stopOnce.Do(func() {
		close(g.stop)
		g.w.Stop()
	})
	<-g.done
}
