package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
)

// keyLog records the keys a sync handler was given, and when.
type keyLog struct {
	mu    sync.Mutex
	start time.Time
	keys  []string
	at    map[string][]time.Duration
}

func newKeyLog() *keyLog { return &keyLog{start: time.Now(), at: map[string][]time.Duration{}} }

func (l *keyLog) add(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key)
	l.at[key] = append(l.at[key], time.Since(l.start))
}

func (l *keyLog) sorted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.keys)
	slices.Sort(out)
	return out
}

func (l *keyLog) times(key string) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.at[key])
}

// TestResult: what a sync returns decides when its key comes back, under
// synctest's fake clock.
func TestResult(t *testing.T) {
	errTransient := errors.New("transient")
	tests := []struct {
		name string
		// first is what the first sync returns; later ones succeed.
		first  Result
		err    error
		wantAt []time.Duration
	}{
		{"success forgets", Result{}, nil, []time.Duration{0}},
		{"requeue after 30s", Result{RequeueAfter: 30 * time.Second}, nil, []time.Duration{0, 30 * time.Second}},
		{"error retries after the backoff, not RequeueAfter", Result{RequeueAfter: time.Hour}, errTransient, []time.Duration{0, time.Second}},
		{"terminal error is not retried", Result{RequeueAfter: time.Hour}, Terminal(errTransient), []time.Duration{0}},
		{"wrapped terminal error is not retried", Result{}, errors.Join(errTransient, Terminal(errTransient)), []time.Duration{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := newKeyLog()
				var calls int
				sync := func(_ context.Context, key string) (Result, error) {
					log.add(key)
					calls++
					if calls == 1 {
						return tt.first, tt.err
					}
					return Result{}, nil
				}
				c := newTest(t, sync, Options{RetryBaseDelay: time.Second})
				stop := run(c)
				c.Queue().Add("ns/a")
				time.Sleep(2 * time.Hour)
				synctest.Wait()
				if got := log.times("ns/a"); !slices.Equal(got, tt.wantAt) {
					t.Errorf("synced at %v, want %v", got, tt.wantAt)
				}
				if n := c.Queue().NumRequeues("ns/a"); n != 0 {
					t.Errorf("NumRequeues = %d, want 0", n)
				}
				if err := stop(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
	if Terminal(nil) != nil {
		t.Error("Terminal(nil) is not nil")
	}
	if !IsTerminal(Terminal(errTransient)) || IsTerminal(errTransient) || !errors.Is(Terminal(errTransient), errTransient) {
		t.Error("IsTerminal or Unwrap wrong")
	}
}

var fooKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

func newPod(ns, name string, owner *metav1.OwnerReference, labels map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, ResourceVersion: "1"}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func ownerRef(kind, apiVersion, name string, controller bool) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("u-" + name), Controller: &controller}
}

// TestSources drives each kind of source with a fake informer (no server,
// no reflector) and checks the keys the sync handler is given.
func TestSources(t *testing.T) {
	byApp := func(p *corev1.Pod) []string {
		if app := p.Labels["app"]; app != "" {
			return []string{p.Namespace + "/" + app}
		}
		return nil
	}
	moved := newPod("ns", "p", nil, map[string]string{"app": "new"})
	moved.ResourceVersion = "2"
	tests := []struct {
		name   string
		cached []*corev1.Pod
		source func(inf cache.Informer[*corev1.Pod], c func() *Controller[string]) Source[string]
		events func(f *cachetest.Informer[*corev1.Pod]) error
		want   []string
	}{{
		name:   "For: initial list, add, delete",
		cached: []*corev1.Pod{newPod("ns", "a", nil, nil)},
		source: func(inf cache.Informer[*corev1.Pod], _ func() *Controller[string]) Source[string] { return For(inf) },
		events: func(f *cachetest.Informer[*corev1.Pod]) error {
			return errors.Join(f.Add(newPod("ns", "b", nil, nil)), f.Delete(newPod("ns", "a", nil, nil), true))
		},
		want: []string{"ns/a", "ns/a", "ns/b"},
	}, {
		name: "Owns: only the controller owner of the kind",
		source: func(inf cache.Informer[*corev1.Pod], _ func() *Controller[string]) Source[string] {
			return Owns(inf, fooKind)
		},
		events: func(f *cachetest.Informer[*corev1.Pod]) error {
			return errors.Join(
				f.Add(newPod("ns", "owned", ownerRef("Deployment", "apps/v1", "web", true), nil)),
				f.Add(newPod("ns", "not-controller", ownerRef("Deployment", "apps/v1", "db", false), nil)),
				f.Add(newPod("ns", "other-group", ownerRef("Deployment", "example.com/v1", "x", true), nil)),
				f.Add(newPod("ns", "other-kind", ownerRef("ReplicaSet", "apps/v1", "y", true), nil)),
				f.Add(newPod("ns", "orphan", nil, nil)),
			)
		},
		want: []string{"ns/web"},
	}, {
		name:   "Watches: old and new keys of an update",
		cached: []*corev1.Pod{newPod("ns", "p", nil, map[string]string{"app": "old"})},
		source: func(inf cache.Informer[*corev1.Pod], _ func() *Controller[string]) Source[string] {
			return Watches(inf, byApp)
		},
		events: func(f *cachetest.Informer[*corev1.Pod]) error { return f.Update(moved) },
		want:   []string{"ns/new", "ns/old", "ns/old"},
	}, {
		name:   "Watches: a resync maps once",
		cached: []*corev1.Pod{newPod("ns", "p", nil, map[string]string{"app": "web"})},
		source: func(inf cache.Informer[*corev1.Pod], _ func() *Controller[string]) Source[string] {
			return Watches(inf, byApp)
		},
		events: func(f *cachetest.Informer[*corev1.Pod]) error {
			return f.Update(newPod("ns", "p", nil, map[string]string{"app": "web"}))
		},
		want: []string{"ns/web", "ns/web"},
	}, {
		name: "Handle: the handler queues what it likes",
		source: func(inf cache.Informer[*corev1.Pod], _ func() *Controller[string]) Source[string] {
			var c *Controller[string]
			return sourceFunc[string](func(ctrl *Controller[string]) (func() bool, func(), error) {
				c = ctrl
				return Handle[string](inf, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
					AddFunc: func(p *corev1.Pod, _ bool) { c.Queue().Add("added:" + p.Name) },
				}).Register(ctrl)
			})
		},
		events: func(f *cachetest.Informer[*corev1.Pod]) error { return f.Add(newPod("ns", "x", nil, nil)) },
		want:   []string{"added:x"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := cachetest.NewInformer(tt.cached...)
				log := newKeyLog()
				var c *Controller[string]
				c = newTest(t, func(_ context.Context, key string) (Result, error) {
					log.add(key)
					return Result{}, nil
				}, Options{}, tt.source(f, func() *Controller[string] { return c }))
				stop := run(c)
				synctest.Wait()
				if err := tt.events(f); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				if got := log.sorted(); !slices.Equal(got, tt.want) {
					t.Errorf("synced %q, want %q", got, tt.want)
				}
				if n := f.Handlers(); n != 0 {
					t.Errorf("%d handlers left on the informer after Run", n)
				}
			})
		})
	}
}

// TestWaitsForSourcesToSync: no key is synced before every source's
// informer has synced.
func TestWaitsForSourcesToSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pods := cachetest.NewInformer(newPod("ns", "a", nil, nil))
		pods.SetSynced(false)
		log := newKeyLog()
		c := newTest(t, func(_ context.Context, key string) (Result, error) {
			log.add(key)
			return Result{}, nil
		}, Options{}, For[*corev1.Pod](pods))
		stop := run(c)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := log.sorted(); len(got) != 0 {
			t.Fatalf("synced %q before the informer synced", got)
		}
		if c.HasSynced() {
			t.Fatal("HasSynced before the informer synced")
		}
		pods.SetSynced(true)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := log.sorted(); !slices.Equal(got, []string{"ns/a"}) {
			t.Fatalf("synced %q, want ns/a", got)
		}
		if !c.HasSynced() {
			t.Fatal("not HasSynced with the workers running")
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}
