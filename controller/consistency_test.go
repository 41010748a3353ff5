package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/proptest"
)

// laggingWatch delays every event of a watch by a random time, keeping
// the stream's order: each informer falls behind the server by its own
// amount, so what two informers show is reordered by chance.
type laggingWatch[T cache.Object] struct {
	cache.ListerWatcher[T]
	mu  sync.Mutex
	rng *rand.Rand
}

type laggingWatcher[T cache.Object] struct {
	cache.Watcher[T]
	lag func() time.Duration
}

func (w laggingWatcher[T]) Next() (cache.Event[T], error) {
	ev, err := w.Watcher.Next()
	time.Sleep(w.lag())
	return ev, err
}

func (l *laggingWatch[T]) Watch(ctx context.Context, opts metav1.ListOptions) (cache.Watcher[T], error) {
	w, err := l.ListerWatcher.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return laggingWatcher[T]{Watcher: w, lag: func() time.Duration {
		l.mu.Lock()
		defer l.mu.Unlock()
		return time.Duration(l.rng.IntN(40)) * time.Millisecond
	}}, nil
}

// versioned is an informer that names its resource, as the factory's do,
// so that stale-read protection checks its store.
type versioned[T cache.Object] struct {
	*cache.SharedIndexInformer[T]
	gr schema.GroupResource
}

func (v versioned[T]) GroupResource() schema.GroupResource { return v.gr }

var (
	podsGR = schema.GroupResource{Resource: "pods"}
	rcsGR  = schema.GroupResource{Resource: "replicationcontrollers"}
)

// runStaleHistory runs a replication controller in miniature over two
// lagging informers for one random history of spec changes and unrelated
// updates, and returns what it did wrong: pods created beyond what the
// spec asked for, and status writes made from a copy of the controller
// older than its own last write of it.
func runStaleHistory(t *testing.T, seed uint64, protect bool) (violations []string, skipped int64) {
	rng := rand.New(rand.NewPCG(seed, seed*31+7))
	rcs := cachetest.New[*corev1.ReplicationController]()
	pods := cachetest.New[*corev1.Pod]()
	quietOpts := cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{WatchErrorHandler: func(context.Context, error) {}}}
	rcInf := versioned[*corev1.ReplicationController]{cache.NewSharedIndexInformer[*corev1.ReplicationController](
		&laggingWatch[*corev1.ReplicationController]{ListerWatcher: rcs, rng: rand.New(rand.NewPCG(seed, 1))}, quietOpts), rcsGR}
	podInf := versioned[*corev1.Pod]{cache.NewSharedIndexInformer[*corev1.Pod](
		&laggingWatch[*corev1.Pod]{ListerWatcher: pods, rng: rand.New(rand.NewPCG(seed, 2))}, quietOpts), podsGR}

	var mu sync.Mutex
	created := map[string]int{}        // pods created per RC
	maxWanted := map[string]int{}      // the most replicas each RC asked for
	lastWritten := map[string]string{} // resourceVersion of the controller's last status write per RC
	next := 0
	syncFn := func(ctx context.Context, key string) (controller.Result, error) {
		rc, ok, _ := rcInf.GetIndexer().GetByKey(key)
		if !ok {
			return controller.Result{}, nil
		}
		have := 0
		for _, p := range podInf.GetIndexer().List() {
			if p.Labels["rc"] == rc.Name {
				have++
			}
		}
		want := int(*rc.Spec.Replicas)
		for ; have < want; have++ {
			mu.Lock()
			next++
			name := rc.Name + "-" + strconv.Itoa(next)
			mu.Unlock()
			p, err := pods.Create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"rc": rc.Name}}})
			if err != nil {
				return controller.Result{}, err
			}
			client.RecordWrite(ctx, podsGR, p)
			mu.Lock()
			created[rc.Name]++
			mu.Unlock()
		}
		if int(rc.Status.Replicas) == have {
			return controller.Result{}, nil
		}
		mu.Lock()
		if last := lastWritten[key]; last != "" {
			if c, _ := cache.CompareResourceVersion(rc.ResourceVersion, last); c < 0 {
				violations = append(violations, fmt.Sprintf("%s: status written from version %s, older than the controller's own write at %s", key, rc.ResourceVersion, last))
			}
		}
		mu.Unlock()
		upd := rc.DeepCopy()
		upd.Status.Replicas = int32(have)
		written, err := rcs.Update(upd)
		if err != nil {
			return controller.Result{}, err
		}
		client.RecordWrite(ctx, rcsGR, written)
		mu.Lock()
		lastWritten[key] = written.ResourceVersion
		mu.Unlock()
		return controller.Result{}, nil
	}
	timeout := time.Duration(-1)
	if protect {
		timeout = 0
	}
	ctrl, err := controller.New("stale", syncFn, controller.Options{Workers: 2, Logger: slog.New(slog.DiscardHandler), StaleReadTimeout: timeout},
		controller.For[*corev1.ReplicationController](rcInf),
		controller.Watches[*corev1.Pod](podInf, func(p *corev1.Pod) []string { return []string{"ns/" + p.Labels["rc"]} }))
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { rcInf.Run(ctx) })
	wg.Go(func() { podInf.Run(ctx) })
	wg.Go(func() { _ = ctrl.Run(ctx) })

	names := []string{"a", "b", "c"}
	for range 30 {
		name := names[rng.IntN(len(names))]
		mu.Lock()
		rc, ok := rcs.Get("ns", name)
		switch {
		case !ok:
			n := int32(1 + rng.IntN(4))
			_, err = rcs.Create(&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ReplicationControllerSpec{Replicas: &n}})
			maxWanted[name] = max(maxWanted[name], int(n))
		case rng.IntN(3) == 0:
			upd := rc.DeepCopy()
			n := *upd.Spec.Replicas + 1
			upd.Spec.Replicas = &n
			_, err = rcs.Update(upd)
			if err == nil {
				maxWanted[name] = max(maxWanted[name], int(n))
			}
		default: // a change the controller does not care about, which still queues it
			upd := rc.DeepCopy()
			upd.Labels = map[string]string{"touch": strconv.Itoa(rng.IntN(1000))}
			_, err = rcs.Update(upd)
		}
		mu.Unlock()
		_ = err // a conflict with the controller's status write: the user's change is dropped
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
	}
	time.Sleep(5 * time.Second) // let everything settle
	cancel()
	wg.Wait()

	for name, n := range created {
		if n > maxWanted[name] {
			violations = append(violations, fmt.Sprintf("%s: %d pods created, the spec asked for at most %d", name, n, maxWanted[name]))
		}
	}
	skipped, timedOut := ctrl.StaleSyncs()
	if protect && timedOut > 0 {
		violations = append(violations, fmt.Sprintf("%d keys waited past the timeout (%d skips)", timedOut, skipped))
	}
	return violations, skipped
}

// TestStaleReadProtection: over random histories with lagging informers,
// a controller that creates children never creates more than its spec
// asks for, and never writes from a state older than its own last write;
// with the protection off the same histories break both.
func TestStaleReadProtection(t *testing.T) {
	var skipped int64
	proptest.ForEachSeed(t, 200, func(t *testing.T, seed uint64) {
		v, s := runStaleHistory(t, seed, true)
		if len(v) > 0 {
			t.Fatalf("with protection: %v", v)
		}
		skipped += s
	})
	if skipped == 0 {
		t.Fatal("with protection, no sync was ever put back: the informers never lagged")
	}
	broken := 0
	for seed := range uint64(20) {
		synctest.Test(t, func(t *testing.T) {
			if v, _ := runStaleHistory(t, seed+1, false); len(v) > 0 {
				broken++
			}
		})
	}
	if broken == 0 {
		t.Fatal("with the protection off no history went wrong: the test does not exercise it")
	}
	t.Logf("with protection, %d syncs put back over the histories; without, %d of 20 histories went wrong", skipped, broken)
}

// movableStore is a fake informer whose store states the resourceVersion
// a test sets: what an informer shows after events, a relist or a
// delete is, to stale-read protection, only that version.
type movableStore struct {
	*cachetest.Informer[*corev1.Pod]
	mu sync.Mutex
	rv string
}

func (m *movableStore) GroupResource() schema.GroupResource { return podsGR }

func (m *movableStore) LastStoreSyncResourceVersion() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rv
}

func (m *movableStore) set(rv string) {
	m.mu.Lock()
	m.rv = rv
	m.mu.Unlock()
}

// eventLog is an EventRecorder that keeps what it is given.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Eventf(obj runtime.Object, eventType, reason, messageFmt string, args ...any) {
	m, _ := meta.Accessor(obj)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%s %s %s/%s: %s", eventType, reason, m.GetNamespace(), m.GetName(), fmt.Sprintf(messageFmt, args...)))
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// TestStaleReadCases: what the informer shows after the controller's
// write decides whether the key's next sync waits: the write's own event,
// a relist after a 410 or a delete of the object all move the store past
// the written version and let it sync at once; versions that cannot be
// ordered are not waited for; a write shown while the key waits lets the
// key sync once, for the event; a write never shown holds the key until the
// timeout, which is counted and reported as one Warning event on the
// object written.
func TestStaleReadCases(t *testing.T) {
	const timeout = 2 * time.Second
	for _, tc := range []struct {
		name string
		// written is the resourceVersion the first sync's write answers;
		// shown, what the informer shows once the second sync is queued.
		written, shown string
		// catchUp, when set, is when the informer shows the write after the
		// second sync is queued, and its event queues the key again.
		catchUp time.Duration
		// wantSecondAfter is when the second sync runs, after it is queued.
		wantSecondAfter time.Duration
		wantSkips       bool
		wantTimeouts    int64
		wantEvents      []string
	}{
		{name: "the write's own event", written: "120", shown: "120"},
		{name: "a relist after a 410, past the write", written: "120", shown: "450"},
		{name: "the object's delete, after the write", written: "120", shown: "121"},
		{name: "versions that cannot be ordered", written: "a7", shown: "100"},
		{
			// The retries of the wait end with it: the key is synced once
			// for the event, not again when a retry comes due.
			name: "shown while waiting", written: "120", shown: "119", catchUp: 22 * time.Millisecond,
			wantSecondAfter: 22 * time.Millisecond, wantSkips: true,
		},
		{
			name: "never shown", written: "120", shown: "119",
			wantSecondAfter: timeout, wantSkips: true, wantTimeouts: 1,
			wantEvents: []string{"Warning StaleReadTimeout ns/p-1: A sync went ahead after waiting 2s for the pods informer to show resourceVersion 120 of this object, written by the controller; the informer shows 119"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &movableStore{Informer: cachetest.NewInformer[*corev1.Pod](), rv: "100"}
				events := &eventLog{}
				var mu sync.Mutex
				var syncs []time.Time
				syncFn := func(ctx context.Context, key string) (controller.Result, error) {
					mu.Lock()
					syncs = append(syncs, time.Now())
					first := len(syncs) == 1
					mu.Unlock()
					if first {
						client.RecordWrite(ctx, podsGR, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-1", ResourceVersion: tc.written}})
					}
					return controller.Result{}, nil
				}
				ctrl, err := controller.New("cases", syncFn, controller.Options{Logger: slog.New(slog.DiscardHandler), StaleReadTimeout: timeout, Recorder: events},
					controller.Handle[string](store, cache.ResourceEventHandlerFuncs[*corev1.Pod]{}))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error)
				go func() { done <- ctrl.Run(ctx) }()

				ctrl.Queue().Add("ns/a")
				synctest.Wait()
				store.set(tc.shown)
				queued := time.Now()
				ctrl.Queue().Add("ns/a")
				if tc.catchUp > 0 {
					time.Sleep(tc.catchUp)
					store.set(tc.written)
					ctrl.Queue().Add("ns/a")
				}
				time.Sleep(2 * timeout)
				synctest.Wait()
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}

				mu.Lock()
				defer mu.Unlock()
				if len(syncs) != 2 {
					t.Fatalf("%d syncs, want 2", len(syncs))
				}
				if got := syncs[1].Sub(queued); got < tc.wantSecondAfter || got > tc.wantSecondAfter+10*time.Millisecond {
					t.Errorf("second sync %v after it was queued, want %v", got, tc.wantSecondAfter)
				}
				skipped, timedOut := ctrl.StaleSyncs()
				if (skipped > 0) != tc.wantSkips || timedOut != tc.wantTimeouts {
					t.Errorf("StaleSyncs = %d skipped, %d timed out; want skips %v, %d timed out", skipped, timedOut, tc.wantSkips, tc.wantTimeouts)
				}
				if got := events.list(); !slices.Equal(got, tc.wantEvents) {
					t.Errorf("events:\n%q\nwant\n%q", got, tc.wantEvents)
				}
			})
		})
	}
}
