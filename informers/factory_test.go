package informers_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/informers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var (
	podsGVR       = corev1.SchemeGroupVersion.WithResource("pods")
	namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")
)

// testSource serves resources from cachetest Sources and records what the
// factory asked for.
type testSource struct {
	mu      sync.Mutex
	sources map[schema.GroupVersionResource]cache.ListerWatcher[cache.Object]
	asked   []string
}

func (s *testSource) ListerWatcher(gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, gvr.Resource+"@"+ns)
	lw := s.sources[gvr]
	apply := func(opts metav1.ListOptions) metav1.ListOptions {
		if tweak != nil {
			tweak(&opts)
		}
		if ns != "" {
			sel := "metadata.namespace=" + ns
			if opts.FieldSelector != "" {
				sel = opts.FieldSelector + "," + sel
			}
			opts.FieldSelector = sel
		}
		return opts
	}
	return cache.ListWatch[cache.Object]{
		ListFunc: func(ctx context.Context, opts metav1.ListOptions) (*cache.List[cache.Object], error) {
			if lw == nil {
				return nil, errors.New("resource not served")
			}
			return lw.List(ctx, apply(opts))
		},
		WatchFunc: func(ctx context.Context, opts metav1.ListOptions) (cache.Watcher[cache.Object], error) {
			if lw == nil {
				return nil, errors.New("resource not served")
			}
			return lw.Watch(ctx, apply(opts))
		},
	}
}

func newPod(ns, name string, lbl map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
}

func setup(t *testing.T, opts informers.Options) (*informers.SharedInformerFactory, *cachetest.Source[*corev1.Pod], *testSource) {
	pods := cachetest.New[*corev1.Pod]()
	src := &testSource{sources: map[schema.GroupVersionResource]cache.ListerWatcher[cache.Object]{
		podsGVR: cache.Erase[*corev1.Pod](pods),
	}}
	if opts.Reflector.Logger == nil {
		opts.Reflector.Logger = quiet
	}
	f := informers.NewSharedInformerFactory(src, opts)
	t.Cleanup(f.Shutdown)
	return f, pods, src
}

func TestFactory_SharesOneInformerPerResource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &recordingHandler{}
		f, pods, src := setup(t, informers.Options{Reflector: cache.ReflectorOptions{Logger: slog.New(logs)}})
		pods.Create(newPod("a", "p1", nil))
		c1, c2 := informers.For[*corev1.Pod](f), informers.For[*corev1.Pod](f)
		if c1.SharedIndexInformer != c2.SharedIndexInformer {
			t.Fatal("two requests for pods got two informers")
		}
		// Two controllers sharing the pod informer each see every event.
		var mu sync.Mutex
		seen := map[string][]string{}
		for _, name := range []string{"c1", "c2"} {
			_, err := c1.AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
				AddFunc: func(p *corev1.Pod, _ bool) {
					mu.Lock()
					defer mu.Unlock()
					seen[name] = append(seen[name], "add "+p.Name)
				},
				UpdateFunc: func(_, p *corev1.Pod) {
					mu.Lock()
					defer mu.Unlock()
					seen[name] = append(seen[name], "update "+p.Name)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		f.Start(t.Context())
		f.Start(t.Context()) // idempotent
		if got := f.WaitForCacheSync(t.Context()); !got[podsGVR] {
			t.Fatalf("WaitForCacheSync = %v", got)
		}
		pods.Create(newPod("a", "p2", nil))
		synctest.Wait()
		p, _ := pods.Get("a", "p1")
		p = p.DeepCopy()
		p.Labels = map[string]string{"x": "y"}
		pods.Update(p)
		synctest.Wait()
		mu.Lock()
		want := []string{"add p1", "add p2", "update p1"}
		for _, name := range []string{"c1", "c2"} {
			if !slices.Equal(seen[name], want) {
				t.Errorf("%s saw %v, want %v", name, seen[name], want)
			}
		}
		mu.Unlock()
		src.mu.Lock()
		defer src.mu.Unlock()
		if len(src.asked) != 1 {
			t.Errorf("source asked %v, want once", src.asked)
		}
		// The second Start ran nothing twice: one watch, a streaming list,
		// and no informer's Run was entered again (it would have warned).
		if n, w := pods.ListCalls(), pods.WatchCalls(); n != 0 || w != 1 {
			t.Errorf("%d lists and %d watches, want one streaming list: no list, one watch", n, w)
		}
		if msgs := logs.messages(); slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "Run called twice") }) {
			t.Errorf("an informer was run twice: %q", msgs)
		}
		// The default transform strips managedFields.
		got, err := c1.Lister().Namespace("a").Get("p1")
		if err != nil || got.ManagedFields != nil {
			t.Errorf("cached p1 = %v, %v; want managedFields stripped", got, err)
		}
	})
}

func TestFactory_Options(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, pods, _ := setup(t, informers.Options{
			Namespace:         "a",
			TweakListOptions:  func(o *metav1.ListOptions) { o.LabelSelector = "app=web" },
			KeepManagedFields: true,
			Resync:            map[schema.GroupVersionResource]time.Duration{podsGVR: time.Minute},
		})
		pods.Create(newPod("a", "web", map[string]string{"app": "web"}))
		pods.Create(newPod("a", "db", map[string]string{"app": "db"}))
		pods.Create(newPod("b", "web", map[string]string{"app": "web"}))
		h := informers.For[*corev1.Pod](f)
		var mu sync.Mutex
		resyncs := 0
		h.AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			UpdateFunc: func(_, _ *corev1.Pod) { mu.Lock(); resyncs++; mu.Unlock() },
		})
		f.Start(t.Context())
		f.WaitForCacheSync(t.Context())
		all, _ := h.Lister().List(labels.Everything())
		if len(all) != 1 || all[0].Namespace != "a" || all[0].Name != "web" {
			t.Errorf("namespace and selector not applied: %v", all)
		}
		if all[0].ManagedFields == nil {
			t.Error("managedFields stripped despite KeepManagedFields")
		}
		time.Sleep(61 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if resyncs != 1 {
			t.Errorf("per-resource resync: %d resyncs after 61 s, want 1", resyncs)
		}
	})
}

func TestFactory_StartOnlyNewAndReleaseStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, pods, src := setup(t, informers.Options{})
		pods.Create(newPod("a", "p1", nil))
		h1, release1 := informers.Acquire[*corev1.Pod](f, podsGVR)
		f.Start(t.Context())
		synctest.Wait()
		// An informer requested after Start runs from the next Start; the
		// running one is not started twice.
		ns := informers.For[*corev1.Namespace](f)
		f.Start(t.Context())
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if got := f.WaitForCacheSync(ctx); !got[podsGVR] || got[namespacesGVR] {
			t.Errorf("WaitForCacheSync = %v, want pods only", got)
		}
		// Namespaces are not served: the reason is readable.
		if st := ns.SyncStatus(); st.Synced || st.LastError == nil {
			t.Errorf("namespaces status %+v, want an error", st)
		}
		h2, release2 := informers.Acquire[*corev1.Pod](f, podsGVR)
		if h1 != h2 {
			t.Fatal("two holds on pods got two informers")
		}
		release1()
		release1() // idempotent
		synctest.Wait()
		if h2.IsStopped() {
			t.Fatal("informer stopped while a holder remains")
		}
		release2()
		synctest.Wait()
		if !h2.IsStopped() {
			t.Error("informer still runs after its last holder released it")
		}
		if pods.Watchers() != 0 {
			t.Errorf("%d pod watches still open", pods.Watchers())
		}
		// For pins the new informer: a hold released on it stops nothing.
		h3 := informers.For[*corev1.Pod](f)
		if h3 == h2 {
			t.Error("a released informer was handed out again")
		}
		_, release3 := informers.Acquire[*corev1.Pod](f, podsGVR)
		release3()
		f.Start(t.Context())
		synctest.Wait()
		if h3.IsStopped() || informers.For[*corev1.Pod](f) != h3 {
			t.Error("an informer For asked for stopped when a hold on it was released")
		}
		src.mu.Lock()
		defer src.mu.Unlock()
		if want := []string{"pods@", "namespaces@", "pods@"}; !slices.Equal(src.asked, want) {
			t.Errorf("source asked %v, want %v", src.asked, want)
		}
	})
}

func TestFactory_ShutdownWaitsForEveryGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, pods, _ := setup(t, informers.Options{})
		pods.Create(newPod("a", "p1", nil))
		release := make(chan struct{})
		informers.For[*corev1.Pod](f).AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc: func(*corev1.Pod, bool) { <-release },
		})
		informers.For[*corev1.Namespace](f)
		informers.For[*appsv1.Deployment](f)
		informers.For[*corev1.Service](f)
		//lint:ignore SA1019 any built-in resource will do.
		informers.For[*corev1.Endpoints](f)
		informers.For[*corev1.Event](f)
		informers.For[*coordinationv1.Lease](f)
		informers.For[*corev1.ReplicationController](f)
		f.Start(t.Context())
		synctest.Wait()
		done := make(chan struct{})
		go func() { f.Shutdown(); close(done) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Shutdown returned while a handler call was in progress")
		default:
		}
		close(release)
		<-done
		f.Start(t.Context()) // no-op after Shutdown
		synctest.Wait()
		if pods.Watchers() != 0 {
			t.Error("a watch is open after Shutdown")
		}
	})
}
