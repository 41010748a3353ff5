package cache_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
)

type podInformer = cache.SharedIndexInformer[*corev1.Pod]

func newShared(src *podSource, opts cache.SharedInformerOptions, typed ...cache.Option[*corev1.Pod]) *podInformer {
	if opts.Reflector.Logger == nil {
		opts.Reflector.Logger = quiet
	}
	return cache.NewSharedIndexInformer(src, opts, typed...)
}

// runShared runs inf until the test ends (or stop is called) and waits for
// Run to return.
func runShared(t *testing.T, inf *podInformer) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.Run(ctx)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	synctest.Wait()
	return stop
}

func mustAdd(t *testing.T, inf *podInformer, h cache.ResourceEventHandler[*corev1.Pod]) *cache.Registration[*corev1.Pod] {
	t.Helper()
	r, err := inf.AddEventHandlerWithResyncPeriod(h, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func update(t *testing.T, src *podSource, ns, name, label string) {
	t.Helper()
	p, ok := src.Get(ns, name)
	if !ok {
		t.Fatalf("%s/%s not in source", ns, name)
	}
	p = p.DeepCopy()
	p.Labels = map[string]string{"v": label}
	if _, err := src.Update(p); err != nil {
		t.Fatal(err)
	}
}

func TestSharedInformer_TwoHandlersEachSeeEveryEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		inf := newShared(src, cache.SharedInformerOptions{})
		a, b := &recorder{}, &recorder{}
		ra, rb := mustAdd(t, inf, a), mustAdd(t, inf, b)
		runShared(t, inf)
		if !inf.HasSynced() || !ra.HasSynced() || !rb.HasSynced() {
			t.Fatal("not synced after the first list was delivered")
		}
		// Waits between writes keep the handlers up to date, so nothing is
		// merged and each sees every event.
		mustCreate(t, src, "ns", "b")
		synctest.Wait()
		update(t, src, "ns", "a", "2")
		synctest.Wait()
		src.Delete("ns", "b")
		synctest.Wait()
		want := []string{"add ns/a@1 initial", "add ns/b@2", "update ns/a@3", "delete ns/b@4"}
		for i, r := range []*recorder{a, b} {
			if got := r.take(); !slices.Equal(got, want) {
				t.Errorf("handler %d saw %v, want %v", i, got, want)
			}
		}
	})
}

// TestSharedInformer_HandlerJoiningMidStreamMatchesCache adds a handler at a
// random moment while writes stream in, and checks that it ends holding
// exactly the cache's state, with no add of a key it already held and no
// update or delete of one it did not.
func TestSharedInformer_HandlerJoiningMidStreamMatchesCache(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				src := cachetest.New[*corev1.Pod]()
				inf := newShared(src, cache.SharedInformerOptions{})
				runShared(t, inf)
				joinAt := rng.IntN(300)
				var h *stateTracker
				for i := range 300 {
					if i == joinAt {
						h = &stateTracker{t: t, state: map[string]string{}}
						mustAdd(t, inf, h)
					}
					name := "p" + strconv.Itoa(rng.IntN(20))
					switch _, ok := src.Get("ns", name); {
					case !ok:
						mustCreate(t, src, "ns", name)
					case rng.IntN(4) == 0:
						src.Delete("ns", name)
					default:
						update(t, src, "ns", name, strconv.Itoa(i))
					}
					if rng.IntN(10) == 0 {
						synctest.Wait()
					}
				}
				synctest.Wait()
				want := map[string]string{}
				for _, p := range inf.GetStore().List() {
					want[key(p)] = p.ResourceVersion
				}
				h.mu.Lock()
				defer h.mu.Unlock()
				if fmt.Sprint(h.state) != fmt.Sprint(want) {
					t.Errorf("handler state %v != cache %v", h.state, want)
				}
			})
		})
	}
}

// stateTracker applies notifications to a map, failing on any that does not
// fit the state it holds.
type stateTracker struct {
	t     *testing.T
	mu    sync.Mutex
	state map[string]string
}

func (s *stateTracker) OnAdd(p *corev1.Pod, _ bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.state[key(p)]; ok {
		s.t.Errorf("duplicate add of %s", key(p))
	}
	s.state[key(p)] = p.ResourceVersion
}

func (s *stateTracker) OnUpdate(old, p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rv, ok := s.state[key(p)]; !ok || rv != old.ResourceVersion {
		s.t.Errorf("update of %s from %s, handler holds %q", key(p), old.ResourceVersion, rv)
	}
	s.state[key(p)] = p.ResourceVersion
}

func (s *stateTracker) OnDelete(p *corev1.Pod, _ bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.state[key(p)]; !ok {
		s.t.Errorf("delete of %s, which the handler does not hold", key(p))
	}
	delete(s.state, key(p))
}

func TestSharedInformer_RemoveEventHandlerStopsDeliveryAndFreesListener(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		inf := newShared(src, cache.SharedInformerOptions{})
		kept, removed := &recorder{}, &recorder{}
		mustAdd(t, inf, kept)
		reg := mustAdd(t, inf, removed)
		runShared(t, inf)
		mustCreate(t, src, "ns", "a")
		synctest.Wait()

		// The registration does not reach the listener once removed, so a
		// weak pointer to the handler tells whether the listener is gone.
		wp := weak.Make(removed)
		if err := inf.RemoveEventHandler(reg); err != nil {
			t.Fatal(err)
		}
		if err := inf.RemoveEventHandler(reg); !errors.Is(err, cache.ErrUnknownRegistration) {
			t.Errorf("second RemoveEventHandler = %v, want ErrUnknownRegistration", err)
		}
		if reg.HasSynced() {
			t.Error("a removed registration reports HasSynced")
		}
		if got := removed.take(); !slices.Equal(got, []string{"add ns/a@1"}) {
			t.Errorf("before removal: %v", got)
		}
		mustCreate(t, src, "ns", "b")
		synctest.Wait()
		if got := removed.take(); len(got) != 0 {
			t.Errorf("removed handler still received %v", got)
		}
		if got := kept.take(); len(got) != 2 {
			t.Errorf("kept handler received %v", got)
		}
		removed = nil
		runtime.GC()
		if wp.Value() != nil {
			t.Error("the removed listener is still reachable")
		}
	})
}

func TestSharedInformer_ResyncOnlyToHandlersThatAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		inf := newShared(src, cache.SharedInformerOptions{})
		asked, notAsked := &sourceLog{}, &sourceLog{}
		if _, err := inf.AddEventHandlerWithResyncPeriod(asked, time.Minute); err != nil {
			t.Fatal(err)
		}
		mustAdd(t, inf, notAsked)
		runShared(t, inf)
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if got, want := asked.take(), []string{"add ns/a@1 initial-list", "update ns/a@1 resync"}; !slices.Equal(got, want) {
			t.Errorf("handler that asked saw %v, want %v", got, want)
		}
		if got, want := notAsked.take(), []string{"add ns/a@1 initial-list"}; !slices.Equal(got, want) {
			t.Errorf("handler that did not ask saw %v, want %v", got, want)
		}
	})
}

// sourceLog records notifications with their source.
type sourceLog struct {
	mu    sync.Mutex
	notes []string
}

func (s *sourceLog) OnNotification(n cache.Notification[*corev1.Pod]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, fmt.Sprintf("%s %s@%s %s", n.Type, key(n.Object), n.Object.ResourceVersion, n.Source))
}
func (s *sourceLog) OnAdd(*corev1.Pod, bool)    {}
func (s *sourceLog) OnUpdate(_, _ *corev1.Pod)  {}
func (s *sourceLog) OnDelete(*corev1.Pod, bool) {}
func (s *sourceLog) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.notes
	s.notes = nil
	return out
}

// gatedLog is a sourceLog whose every call first waits for gate to close.
type gatedLog struct {
	sourceLog
	gate chan struct{}
}

func (g *gatedLog) OnNotification(n cache.Notification[*corev1.Pod]) {
	<-g.gate
	g.sourceLog.OnNotification(n)
}

// TestSharedInformer_ResyncMergedIntoPendingUpdateKeepsSource stalls a
// handler while an object changes and then a resync comes: the merged
// notification it gets must still say it is a change from the watch.
func TestSharedInformer_ResyncMergedIntoPendingUpdateKeepsSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		inf := newShared(src, cache.SharedInformerOptions{})
		h := &gatedLog{gate: make(chan struct{})}
		reg, err := inf.AddEventHandlerWithResyncPeriod(h, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		runShared(t, inf)
		defer close(h.gate)
		update(t, src, "ns", "a", "2")
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if n, _ := reg.Backlog(); n != 2 {
			t.Fatalf("backlog = %d, want the initial add in flight and one merged update", n)
		}
		h.gate <- struct{}{} // the initial add
		h.gate <- struct{}{} // the merged update
		synctest.Wait()
		if got, want := h.take(), []string{"add ns/a@1 initial-list", "update ns/a@2 watch"}; !slices.Equal(got, want) {
			t.Errorf("stalled handler saw %v, want %v", got, want)
		}
	})
}

func TestSharedInformer_ResyncPeriods(t *testing.T) {
	tests := []struct {
		name         string
		defaultSync  time.Duration
		requested    time.Duration
		afterStart   bool
		wantPeriod   time.Duration
		wantCheck    time.Duration
		wantResyncAt []time.Duration // times of the handler's resyncs within 250 s
	}{
		{"below 1 s is raised to 1 s", 0, 300 * time.Millisecond, false, time.Second, time.Second, nil},
		{"before start a shorter period shortens the check", 10 * time.Minute, time.Minute, false, time.Minute, time.Minute, []time.Duration{60 * time.Second, 120 * time.Second, 180 * time.Second, 240 * time.Second}},
		{"after start a shorter period gets the check period", time.Minute, 10 * time.Second, true, time.Minute, time.Minute, []time.Duration{60 * time.Second, 120 * time.Second, 180 * time.Second, 240 * time.Second}},
		{"after start a longer period is rounded up to check boundaries", time.Minute, 90 * time.Second, true, 90 * time.Second, time.Minute, []time.Duration{120 * time.Second, 240 * time.Second}},
		{"after start with no resync there is none", 0, 10 * time.Second, true, 0, 0, nil},
		{"zero asks for none", time.Minute, 0, false, 0, time.Minute, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := cachetest.New[*corev1.Pod]()
				mustCreate(t, src, "ns", "a")
				inf := newShared(src, cache.SharedInformerOptions{ResyncPeriod: tt.defaultSync})
				start := time.Now()
				if tt.afterStart {
					runShared(t, inf)
				}
				var mu sync.Mutex
				var at []time.Duration
				reg, err := inf.AddEventHandlerWithResyncPeriod(cache.NotificationHandlerFunc[*corev1.Pod](func(n cache.Notification[*corev1.Pod]) {
					if n.Source == cache.SourceResync {
						mu.Lock()
						at = append(at, time.Since(start))
						mu.Unlock()
					}
				}), tt.requested)
				if err != nil {
					t.Fatal(err)
				}
				if got := reg.ResyncPeriod(); got != tt.wantPeriod {
					t.Errorf("handler resync period = %v, want %v", got, tt.wantPeriod)
				}
				if got := inf.ResyncCheckPeriod(); got != tt.wantCheck {
					t.Errorf("check period = %v, want %v", got, tt.wantCheck)
				}
				if tt.requested >= time.Minute || tt.requested == 0 || tt.afterStart {
					if !tt.afterStart {
						runShared(t, inf)
					}
					time.Sleep(250 * time.Second)
					synctest.Wait()
					mu.Lock()
					defer mu.Unlock()
					if !slices.Equal(at, tt.wantResyncAt) {
						t.Errorf("resyncs at %v, want %v", at, tt.wantResyncAt)
					}
				}
			})
		})
	}
}

func TestSharedInformer_PanickingHandlerKeepsReceiving(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		var mu sync.Mutex
		var recovered []any
		inf := newShared(src, cache.SharedInformerOptions{},
			cache.OnHandlerPanic(func(r any, n cache.Notification[*corev1.Pod]) {
				mu.Lock()
				defer mu.Unlock()
				recovered = append(recovered, r)
			}))
		rec := &recorder{}
		reg := mustAdd(t, inf, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc: func(p *corev1.Pod, initial bool) {
				if p.Name == "bad" {
					panic("handler bug")
				}
				rec.OnAdd(p, initial)
			},
		})
		runShared(t, inf)
		mustCreate(t, src, "ns", "bad")
		mustCreate(t, src, "ns", "good")
		synctest.Wait()
		if got := rec.take(); !slices.Equal(got, []string{"add ns/good@2"}) {
			t.Errorf("after the panic the handler received %v", got)
		}
		if reg.Panics() != 1 {
			t.Errorf("Panics = %d, want 1", reg.Panics())
		}
		mu.Lock()
		defer mu.Unlock()
		if len(recovered) != 1 || recovered[0] != "handler bug" {
			t.Errorf("OnHandlerPanic got %v", recovered)
		}
	})
}

func TestSharedInformer_SettingsAfterStartAreRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		p := newPod("ns", "a")
		p.Labels = map[string]string{"app": "x"}
		src.Create(p)
		inf := newShared(src, cache.SharedInformerOptions{})
		if err := inf.SetTransform(func(p *corev1.Pod) (*corev1.Pod, error) {
			p = p.DeepCopy()
			p.Annotations = map[string]string{"transformed": "yes"}
			return p, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := inf.SetWatchErrorHandler(func(context.Context, error) {}); err != nil {
			t.Fatal(err)
		}
		runShared(t, inf)
		if err := inf.SetTransform(nil); !errors.Is(err, cache.ErrAlreadyStarted) {
			t.Errorf("SetTransform after start = %v", err)
		}
		if err := inf.SetWatchErrorHandler(nil); !errors.Is(err, cache.ErrAlreadyStarted) {
			t.Errorf("SetWatchErrorHandler after start = %v", err)
		}
		got, _, _ := inf.GetStore().GetByKey("ns/a")
		if got.Annotations["transformed"] != "yes" {
			t.Errorf("transform not applied: %v", got.Annotations)
		}
		// Indexers can be added after start, built from what is cached.
		if err := inf.AddIndexers(cache.Indexers[*corev1.Pod]{cache.LabelIndexName("app"): cache.LabelIndexFunc[*corev1.Pod]("app")}); err != nil {
			t.Fatal(err)
		}
		if objs, _ := inf.GetIndexer().ByIndex(cache.LabelIndexName("app"), "x"); len(objs) != 1 {
			t.Errorf("index added after start has %d objects, want 1", len(objs))
		}
	})
}

func TestSharedInformer_NotificationSources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		mustCreate(t, src, "ns", "b")
		inf := newShared(src, cache.SharedInformerOptions{})
		log := &sourceLog{}
		if _, err := inf.AddEventHandlerWithResyncPeriod(log, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		runShared(t, inf)
		got := log.take()
		slices.Sort(got)
		if want := []string{"add ns/a@1 initial-list", "add ns/b@2 initial-list"}; !slices.Equal(got, want) {
			t.Errorf("first list: %v, want %v", got, want)
		}
		mustCreate(t, src, "ns", "c")
		synctest.Wait()
		if got, want := log.take(), []string{"add ns/c@3 watch"}; !slices.Equal(got, want) {
			t.Errorf("watch: %v, want %v", got, want)
		}
		// An outage with compaction: a relist.
		src.SetDelay(cachetest.OpWatch, time.Second)
		src.DropWatches()
		src.Delete("ns", "c")
		update(t, src, "ns", "a", "x")
		src.Compact(src.Revision())
		time.Sleep(3 * time.Second)
		src.SetDelay(cachetest.OpWatch, 0)
		synctest.Wait()
		got = log.take()
		slices.Sort(got)
		// b did not change: its Replaced delta is a resync, which this
		// handler is not due for.
		if want := []string{"delete ns/c@3 relist", "update ns/a@5 relist"}; !slices.Equal(got, want) {
			t.Errorf("relist: %v, want %v", got, want)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		got = log.take()
		slices.Sort(got)
		if want := []string{"update ns/a@5 resync", "update ns/b@2 resync"}; !slices.Equal(got, want) {
			t.Errorf("resync: %v, want %v", got, want)
		}
	})
}

func TestSharedInformer_SyncStatusTellsWhyNotSynced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC: access denied"))
		src.FailNext(cachetest.OpList, 3, forbidden)
		inf := newShared(src, cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{DisableWatchList: true}})
		if st := inf.SyncStatus(); st.Synced || st.Reason() != "waiting for the first list" {
			t.Errorf("before Run: %+v (%s)", st, st.Reason())
		}
		runShared(t, inf)
		st := inf.SyncStatus()
		if st.Synced || !apierrors.IsForbidden(st.LastError) || !strings.HasPrefix(st.Reason(), "Forbidden: ") {
			t.Errorf("while the list is forbidden: %+v (%s)", st, st.Reason())
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if st := inf.SyncStatus(); !st.Synced || st.LastError != nil || st.Reason() != "synced" {
			t.Errorf("after the list succeeded: %+v (%s)", st, st.Reason())
		}
	})
}

// runMutatingInformer runs an informer with opts over pods ns/a and ns/b,
// created in src, whose handler mutates ns/a in place (the bug a mutation
// detector is for). It returns once the mutation happened, with what
// OnMutation reported so far. Objects from src are copied by a transform
// so that the mutation corrupts only the informer's cache.
func runMutatingInformer(t *testing.T, src *podSource, opts cache.SharedInformerOptions) (*podInformer, func() []string) {
	t.Helper()
	mustCreate(t, src, "ns", "a")
	mustCreate(t, src, "ns", "b")
	var mu sync.Mutex
	var reported []string
	opts.OnMutation = func(m cache.MutationError) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, m.Key)
	}
	copyPod := cache.WithTransform(func(p *corev1.Pod) (*corev1.Pod, error) { return p.DeepCopy(), nil })
	inf := newShared(src, opts, copyPod)
	mutated := make(chan struct{})
	mustAdd(t, inf, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
		AddFunc: func(p *corev1.Pod, _ bool) {
			if p.Name == "a" {
				p.Labels = map[string]string{"oops": "mutated"} // the bug under test
				close(mutated)
			}
		},
	})
	runShared(t, inf)
	<-mutated
	return inf, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(reported)
	}
}

func TestSharedInformer_MutationDetectorReportsInPlaceChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		inf, reported := runMutatingInformer(t, src, cache.SharedInformerOptions{
			MutationDetection: true,
			// The periodic check would race with the mutation below, which
			// the race detector rightly flags; the test checks by hand
			// after the mutation happened.
			MutationCheckPeriod: time.Hour,
		})
		found := inf.CheckMutations(t.Context())
		if len(found) != 1 || found[0].Key != "ns/a" {
			t.Errorf("CheckMutations = %v, want ns/a", found)
		}
		if again := inf.CheckMutations(t.Context()); len(again) != 0 {
			t.Errorf("a mutation was reported twice: %v", again)
		}
		if got := reported(); !slices.Equal(got, []string{"ns/a"}) {
			t.Errorf("mutations reported: %v, want [ns/a]", got)
		}
	})
}

func TestSharedInformer_LifecycleAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		inf := newShared(src, cache.SharedInformerOptions{})
		if inf.HasSynced() || inf.LastSyncResourceVersion() != "" || inf.IsStopped() {
			t.Fatal("state before Run")
		}
		release := make(chan struct{})
		mustAdd(t, inf, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc: func(*corev1.Pod, bool) { <-release },
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			inf.Run(ctx)
		}()
		synctest.Wait()
		inf.Run(ctx) // a second Run returns at once
		if inf.LastSyncResourceVersion() != "1" {
			t.Errorf("LastSyncResourceVersion = %q, want 1", inf.LastSyncResourceVersion())
		}
		cancel()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Run returned while a handler call was in progress")
		default:
		}
		if src.Watchers() != 0 {
			t.Error("the reflector's watch is still open after cancel")
		}
		close(release)
		<-done
		if !inf.IsStopped() {
			t.Error("IsStopped is false after Run returned")
		}
		if _, err := inf.AddEventHandler(&recorder{}); !errors.Is(err, cache.ErrStopped) {
			t.Errorf("AddEventHandler after stop = %v, want ErrStopped", err)
		}
	})
}

func TestSharedInformer_LateRegistrationSyncsAfterReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		mustCreate(t, src, "ns", "a")
		mustCreate(t, src, "ns", "b")
		inf := newShared(src, cache.SharedInformerOptions{})
		runShared(t, inf)
		release := make(chan struct{})
		var mu sync.Mutex
		var initial []bool
		reg := mustAdd(t, inf, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc: func(_ *corev1.Pod, isInitial bool) {
				<-release
				mu.Lock()
				initial = append(initial, isInitial)
				mu.Unlock()
			},
		})
		synctest.Wait()
		if reg.HasSynced() {
			t.Error("registration synced before its replay was delivered")
		}
		if n, age := reg.Backlog(); n != 2 {
			t.Errorf("backlog = %d (%v), want 2", n, age)
		}
		time.Sleep(time.Minute)
		if _, age := reg.Backlog(); age != time.Minute {
			t.Errorf("oldest pending age = %v, want 1m", age)
		}
		close(release)
		synctest.Wait()
		if !reg.HasSynced() {
			t.Error("registration not synced after its replay")
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(initial, []bool{true, true}) {
			t.Errorf("replayed adds' isInInitialList = %v", initial)
		}
	})
}

// keyTracker records the newest resourceVersion a handler saw of each of
// the pods "ns/p<i>", and counts the keys that reached their final one.
type keyTracker struct {
	gate      chan struct{} // when not nil, every call waits for it to close
	entered   chan struct{} // closed when the first call starts
	enterOnce sync.Once

	mu        sync.Mutex
	cond      sync.Cond
	rv, final []int64
	reached   int // keys whose newest seen state is the final one
	calls     int
	backwards int // states seen older than one seen before
	deletes   int
}

func newKeyTracker(final []int64, gated bool) *keyTracker {
	h := &keyTracker{entered: make(chan struct{}), rv: make([]int64, len(final)), final: final}
	h.cond.L = &h.mu
	if gated {
		h.gate = make(chan struct{})
	}
	return h
}

func (h *keyTracker) OnAdd(p *corev1.Pod, _ bool) { h.record(p) }
func (h *keyTracker) OnUpdate(_, p *corev1.Pod)   { h.record(p) }
func (h *keyTracker) OnDelete(*corev1.Pod, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deletes++
}

func (h *keyTracker) record(p *corev1.Pod) {
	h.enterOnce.Do(func() { close(h.entered) })
	if h.gate != nil {
		<-h.gate
	}
	i, _ := strconv.Atoi(strings.TrimPrefix(p.Name, "p"))
	rv, _ := strconv.ParseInt(p.ResourceVersion, 10, 64)
	h.mu.Lock()
	h.calls++
	if rv < h.rv[i] {
		h.backwards++
	}
	if rv == h.final[i] && h.rv[i] != rv {
		h.reached++
	}
	h.rv[i] = rv
	h.mu.Unlock()
	h.cond.Broadcast()
}

// waitUntil blocks until ok, evaluated under h.mu, holds.
func (h *keyTracker) waitUntil(ok func() bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for !ok() {
		h.cond.Wait()
	}
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestSharedInformer_StalledHandlerDoesNotHoldBackOthers streams a million
// updates (fewer under -race) over a thousand keys through an informer with
// two handlers, one of them stuck in its first call, and checks that the
// indexer and the other handler keep up, that the stuck one's backlog stays
// one entry per key, and that once it resumes it ends at the latest state
// of every key. It logs how much heap the stuck handler costs.
//
// It runs in real time, outside a bubble, since a million events through
// synctest.Wait would measure the bubble, not the informer. The updates are
// injected into the watch rather than written to the Source, whose history
// keeps every write: that way the heap figure is the informer's alone.
func TestSharedInformer_StalledHandlerDoesNotHoldBackOthers(t *testing.T) {
	const keys = 1000
	updates := stalledInformerUpdates
	if testing.Short() {
		updates = min(updates, 100_000)
	}
	src := cachetest.New[*corev1.Pod]()
	names := make([]string, keys)
	for i := range keys {
		names[i] = "p" + strconv.Itoa(i)
		mustCreate(t, src, "ns", names[i])
	}
	// Update u goes to key u%keys at resourceVersion base+u+1.
	base := src.Revision()
	rvOf := func(u int) int64 { return base + int64(u) + 1 }
	final := make([]int64, keys)
	for k := range keys {
		final[k] = rvOf(updates - keys + k)
	}
	fast, stalled := newKeyTracker(final, false), newKeyTracker(final, true)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(stalled.gate) }) }
	defer release() // before the informer stops: it waits for its handlers

	// The watch must not be renewed mid-test: the injected resourceVersions
	// are beyond the Source's, which would refuse to watch from them.
	inf := newShared(src, cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{MinWatchTimeout: time.Hour}})
	mustAdd(t, inf, fast)
	stalledReg := mustAdd(t, inf, stalled)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-stalled.entered
	fast.waitUntil(func() bool { return fast.calls == keys })
	for src.Watchers() == 0 {
		runtime.Gosched()
	}

	before := heapInuse()
	start := time.Now()
	maxBacklog, maxKeys := 0, 0
	for u := 0; u < updates; u++ {
		k := u % keys
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: names[k], ResourceVersion: strconv.FormatInt(rvOf(u), 10)}}
		src.InjectEvent(cache.Event[*corev1.Pod]{Type: cache.EventModified, Object: p})
		if k != keys-1 {
			continue
		}
		// Keep at most two rounds of updates ahead of the fast handler, so
		// that what queues up in the watch and the DeltaFIFO stays small and
		// the stalled handler's backlog is what grows, if anything does.
		if u >= 2*keys {
			want := rvOf(u - 2*keys)
			fast.waitUntil(func() bool { return fast.rv[keys-1] >= want })
		}
		n, _ := stalledReg.Backlog()
		maxBacklog = max(maxBacklog, n)
		maxKeys = max(maxKeys, stalledReg.PendingKeys())
	}
	fast.waitUntil(func() bool { return fast.reached == keys })
	elapsed := time.Since(start)

	// (a) The indexer and the other handler are at the end while the
	// stalled handler has not returned from its first call.
	for k := range keys {
		p, ok, _ := inf.GetIndexer().GetByKey("ns/" + names[k])
		if !ok || p.ResourceVersion != strconv.FormatInt(final[k], 10) {
			t.Fatalf("indexer holds %v for ns/%s, want resourceVersion %d", p, names[k], final[k])
		}
	}
	stalled.mu.Lock()
	if stalled.calls != 0 {
		t.Fatalf("stalled handler returned %d times before it was released", stalled.calls)
	}
	stalled.mu.Unlock()

	// (b) Its backlog is one entry per key, plus the batch it holds.
	const inFlight = 64
	n, _ := stalledReg.Backlog()
	maxBacklog = max(maxBacklog, n)
	if maxBacklog > keys+inFlight {
		t.Errorf("stalled handler's backlog reached %d notifications over %d keys, want at most %d", maxBacklog, keys, keys+inFlight)
	}
	if maxKeys > keys {
		t.Errorf("stalled handler's backlog reached %d keys, want at most %d", maxKeys, keys)
	}
	stalledHeap := heapInuse()

	// (c) Released, it ends at the latest state of every key, seeing each
	// key about once.
	release()
	stalled.waitUntil(func() bool { return stalled.reached == keys })
	drainedHeap := heapInuse()
	stalled.mu.Lock()
	calls, backwards, deletes := stalled.calls, stalled.backwards, stalled.deletes
	stalled.mu.Unlock()
	if calls > keys+inFlight {
		t.Errorf("stalled handler was called %d times after release, want at most %d", calls, keys+inFlight)
	}
	if backwards != 0 || deletes != 0 {
		t.Errorf("stalled handler saw %d states older than one it had seen and %d deletes, want none", backwards, deletes)
	}
	fast.mu.Lock()
	if fast.backwards != 0 || fast.deletes != 0 {
		t.Errorf("fast handler saw %d states out of order and %d deletes, want none", fast.backwards, fast.deletes)
	}
	fast.mu.Unlock()

	mib := func(from, to uint64) float64 { return (float64(to) - float64(from)) / (1 << 20) }
	t.Logf("%d updates over %d keys in %v; stalled handler's backlog peaked at %d notifications (%d keys)",
		updates, keys, elapsed.Round(time.Millisecond), maxBacklog, maxKeys)
	t.Logf("HeapInuse growth after GC: %.2f MiB with the handler stalled, %.2f MiB once it drained (%.0f B per key held by the stalled backlog)",
		mib(before, stalledHeap), mib(before, drainedHeap), (float64(stalledHeap)-float64(drainedHeap))/keys)
}

// orderLog records what a handler is told as "add|update|delete key@rv",
// waiting for gate (when not nil) before its first call returns.
type orderLog struct {
	mu    sync.Mutex
	got   []string
	gate  chan struct{}
	once  sync.Once
	calls atomic.Int64
}

func (o *orderLog) note(op string, p *corev1.Pod) {
	o.calls.Add(1)
	o.once.Do(func() {
		if o.gate != nil {
			<-o.gate
		}
	})
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, op+" "+p.Namespace+"/"+p.Name+"@"+p.ResourceVersion)
}

func (o *orderLog) OnAdd(p *corev1.Pod, _ bool)    { o.note("add", p) }
func (o *orderLog) OnUpdate(_, p *corev1.Pod)      { o.note("update", p) }
func (o *orderLog) OnDelete(p *corev1.Pod, _ bool) { o.note("delete", p) }

// TestSharedInformer_InOrderHandlerSeesEveryChangeInWatchOrder: over random
// histories of creates, updates and deletes on a few keys, written while
// the handlers are stalled in their first call, a handler registered
// InOrder is told of every change, in the order of the watch, across all
// keys; the default handler of the same informer is told the same changes
// merged: fewer, per key in order, ending at the same states.
func TestSharedInformer_InOrderHandlerSeesEveryChangeInWatchOrder(t *testing.T) {
	for seed := range 50 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 7))
				src := cachetest.New[*corev1.Pod]()
				inf := newShared(src, cache.SharedInformerOptions{})
				gate := make(chan struct{})
				ordered, merged := &orderLog{gate: gate}, &orderLog{gate: gate}
				if _, err := inf.AddEventHandlerWithOptions(ordered, cache.HandlerOptions{InOrder: true}); err != nil {
					t.Fatal(err)
				}
				if _, err := inf.AddEventHandler(merged); err != nil {
					t.Fatal(err)
				}
				runShared(t, inf)
				// The first write reaches both handlers, which then stall in
				// it while the rest of the history is written.
				var want []string
				record := func(op string, p *corev1.Pod) {
					want = append(want, op+" "+p.Namespace+"/"+p.Name+"@"+p.ResourceVersion)
				}
				record("add", mustCreate(t, src, "ns", "k0"))
				synctest.Wait()
				live := map[string]bool{"k0": true}
				for range 40 + rng.IntN(80) {
					name := fmt.Sprintf("k%d", rng.IntN(6))
					switch {
					case !live[name]:
						record("add", mustCreate(t, src, "ns", name))
						live[name] = true
					case rng.IntN(4) == 0:
						p, err := src.Delete("ns", name)
						if err != nil {
							t.Fatal(err)
						}
						record("delete", p)
						delete(live, name)
					default:
						p, _ := src.Get("ns", name)
						p = p.DeepCopy()
						p.Labels = map[string]string{"n": fmt.Sprint(rng.Int())}
						p, err := src.Update(p)
						if err != nil {
							t.Fatal(err)
						}
						record("update", p)
					}
				}
				synctest.Wait()
				close(gate)
				synctest.Wait()
				ordered.mu.Lock()
				defer ordered.mu.Unlock()
				merged.mu.Lock()
				defer merged.mu.Unlock()
				if !slices.Equal(ordered.got, want) {
					t.Fatalf("in-order handler saw\n%v\nwant the watch's order\n%v", ordered.got, want)
				}
				// The merged handler: per key, a subsequence of the changes,
				// ending with each key's last state.
				last := func(log []string) map[string]string {
					m := map[string]string{}
					for _, s := range log {
						op, rest, _ := strings.Cut(s, " ")
						key, _, _ := strings.Cut(rest, "@")
						if op == "delete" {
							delete(m, key)
						} else {
							m[key] = rest
						}
					}
					return m
				}
				if a, b := last(merged.got), last(want); !maps.Equal(a, b) {
					t.Errorf("merged handler ended at %v, want %v", a, b)
				}
				if len(merged.got) > len(want) {
					t.Errorf("merged handler was told %d changes, more than the %d made", len(merged.got), len(want))
				}
				t.Logf("%d changes: %d told in order, %d merged", len(want), len(ordered.got), len(merged.got))
			})
		})
	}
}
