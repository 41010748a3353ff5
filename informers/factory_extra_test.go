package informers_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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

// recordingHandler is a slog.Handler that keeps every message.
type recordingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }
func (h *recordingHandler) messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.msgs)
}

func TestFactory_ResyncPeriods(t *testing.T) {
	for _, tc := range []struct {
		name           string
		opts           informers.Options
		wantPods       time.Duration
		wantNamespaces time.Duration
	}{
		{name: "none"},
		{name: "default", opts: informers.Options{DefaultResync: 30 * time.Second},
			wantPods: 30 * time.Second, wantNamespaces: 30 * time.Second},
		{name: "per-resource overrides default", opts: informers.Options{DefaultResync: 30 * time.Second,
			Resync: map[schema.GroupVersionResource]time.Duration{informers.PodsResource: 5 * time.Minute}},
			wantPods: 5 * time.Minute, wantNamespaces: 30 * time.Second},
		{name: "per-resource zero disables", opts: informers.Options{DefaultResync: 30 * time.Second,
			Resync: map[schema.GroupVersionResource]time.Duration{informers.PodsResource: 0}},
			wantPods: 0, wantNamespaces: 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, _ := setup(t, tc.opts)
			for _, c := range []struct {
				name string
				inf  interface {
					ResyncCheckPeriod() time.Duration
				}
				reg  func() (time.Duration, error)
				want time.Duration
			}{
				{"pods", f.Pods().Informer(), func() (time.Duration, error) {
					r, err := f.Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{})
					if err != nil {
						return 0, err
					}
					return r.ResyncPeriod(), nil
				}, tc.wantPods},
				{"namespaces", f.Namespaces().Informer(), func() (time.Duration, error) {
					r, err := f.Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Namespace]{})
					if err != nil {
						return 0, err
					}
					return r.ResyncPeriod(), nil
				}, tc.wantNamespaces},
			} {
				if got := c.inf.ResyncCheckPeriod(); got != c.want {
					t.Errorf("%s: ResyncCheckPeriod = %v, want %v", c.name, got, c.want)
				}
				got, err := c.reg()
				if err != nil {
					t.Fatal(err)
				}
				if got != c.want {
					t.Errorf("%s: default handler resync = %v, want %v", c.name, got, c.want)
				}
			}
		})
	}
}

// TestFactory_DefaultResyncFires checks the default period drives actual
// resyncs of a handler added with AddEventHandler.
func TestFactory_DefaultResyncFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, pods, _ := setup(t, informers.Options{DefaultResync: 30 * time.Second})
		pods.Create(newPod("a", "p1", nil))
		var mu sync.Mutex
		resyncs := 0
		f.Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			UpdateFunc: func(_, _ *corev1.Pod) { mu.Lock(); resyncs++; mu.Unlock() },
		})
		f.Start(t.Context())
		f.WaitForCacheSync(t.Context())
		time.Sleep(61 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if resyncs != 2 {
			t.Errorf("%d resyncs after 61 s at a 30 s default, want 2", resyncs)
		}
	})
}

// tweakSource records the tweak the factory hands to its Source.
type tweakSource struct {
	testSource
	tweaks []func(*metav1.ListOptions)
}

func (s *tweakSource) ListerWatcher(gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
	s.mu.Lock()
	s.tweaks = append(s.tweaks, tweak)
	s.mu.Unlock()
	return s.testSource.ListerWatcher(gvr, ns, tweak)
}

func TestFactory_FieldSelectorTweakReachesListerWatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pods := cachetest.New[*corev1.Pod]()
		src := &tweakSource{testSource: testSource{sources: map[schema.GroupVersionResource]cache.ListerWatcher[cache.Object]{
			informers.PodsResource: cache.Erase[*corev1.Pod](pods),
		}}}
		const sel = "metadata.name=p1"
		f := informers.NewSharedInformerFactory(src, informers.Options{
			TweakListOptions: func(o *metav1.ListOptions) { o.FieldSelector = sel },
			Reflector:        cache.ReflectorOptions{Logger: quiet},
		})
		t.Cleanup(f.Shutdown)
		pods.Create(newPod("a", "p1", nil))
		pods.Create(newPod("a", "p2", nil))
		h := f.Pods()
		// The Source got the tweak itself.
		src.mu.Lock()
		if len(src.tweaks) != 1 || src.tweaks[0] == nil {
			t.Fatalf("source got tweaks %v, want one", len(src.tweaks))
		}
		var probe metav1.ListOptions
		src.tweaks[0](&probe)
		src.mu.Unlock()
		if probe.FieldSelector != sel {
			t.Errorf("tweak sets field selector %q, want %q", probe.FieldSelector, sel)
		}
		f.Start(t.Context())
		if got := f.WaitForCacheSync(t.Context()); !got[informers.PodsResource] {
			t.Fatalf("WaitForCacheSync = %v", got)
		}
		pods.Create(newPod("a", "p1b", nil))
		synctest.Wait()
		// Every list and watch request carried it.
		for _, op := range []cachetest.Op{cachetest.OpList, cachetest.OpWatch} {
			reqs := pods.Requests(op)
			if len(reqs) == 0 {
				t.Errorf("no %v requests", op)
			}
			for _, r := range reqs {
				if r.FieldSelector != sel {
					t.Errorf("%v request field selector %q, want %q", op, r.FieldSelector, sel)
				}
			}
		}
		all, _ := h.Lister().List(labels.Everything())
		if len(all) != 1 || all[0].Name != "p1" {
			t.Errorf("cache holds %v, want p1 only", all)
		}
	})
}

// accessorCase is one typed accessor with a Source of its type.
type accessorCase struct {
	name string
	gvr  schema.GroupVersionResource
	lw   cache.ListerWatcher[cache.Object]
	// check asks the accessor for its informer (before Start) and returns
	// a check to run after sync.
	check func(t *testing.T, f *informers.SharedInformerFactory) func()
}

func newAccessorCase[T cache.Object](name string, gvr schema.GroupVersionResource, obj T, get func(*informers.SharedInformerFactory) *informers.Informer[T]) accessorCase {
	src := cachetest.New[T]()
	return accessorCase{
		name: name, gvr: gvr, lw: cache.Erase[T](src),
		check: func(t *testing.T, f *informers.SharedInformerFactory) func() {
			if _, err := src.Create(obj); err != nil {
				t.Fatal(err)
			}
			h := get(f)
			if h.Informer() != informers.InformerFor[T](f, gvr).Informer() {
				t.Errorf("%s: accessor and InformerFor(%v) disagree", name, gvr)
			}
			return func() {
				if !h.Informer().HasSynced() {
					t.Errorf("%s: not synced", name)
					return
				}
				items := h.Informer().GetStore().List()
				if len(items) != 1 || items[0].GetName() != obj.GetName() || items[0].GetNamespace() != obj.GetNamespace() {
					t.Errorf("%s: cache holds %v, want %s/%s", name, items, obj.GetNamespace(), obj.GetName())
				}
				got, err := h.Lister().Namespace(obj.GetNamespace()).Get(obj.GetName())
				if obj.GetNamespace() == "" {
					got, err = h.Lister().Get(obj.GetName())
				}
				if err != nil || got.GetName() != obj.GetName() {
					t.Errorf("%s: lister Get = %v, %v", name, got, err)
				}
			}
		},
	}
}

func TestFactory_TypedAccessors(t *testing.T) {
	om := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	cases := []accessorCase{
		newAccessorCase("namespaces", informers.NamespacesResource, &corev1.Namespace{ObjectMeta: om("", "n1")}, (*informers.SharedInformerFactory).Namespaces),
		newAccessorCase("pods", informers.PodsResource, &corev1.Pod{ObjectMeta: om("a", "p1")}, (*informers.SharedInformerFactory).Pods),
		newAccessorCase("replicationcontrollers", informers.ReplicationControllersResource, &corev1.ReplicationController{ObjectMeta: om("a", "rc1")}, (*informers.SharedInformerFactory).ReplicationControllers),
		newAccessorCase("services", informers.ServicesResource, &corev1.Service{ObjectMeta: om("a", "s1")}, (*informers.SharedInformerFactory).Services),
		//lint:ignore SA1019 the accessor under test serves core/v1 Endpoints.
		newAccessorCase("endpoints", informers.EndpointsResource, &corev1.Endpoints{ObjectMeta: om("a", "e1")}, (*informers.SharedInformerFactory).Endpoints),
		newAccessorCase("events", informers.EventsResource, &corev1.Event{ObjectMeta: om("a", "ev1")}, (*informers.SharedInformerFactory).Events),
		newAccessorCase("leases", informers.LeasesResource, &coordinationv1.Lease{ObjectMeta: om("a", "l1")}, (*informers.SharedInformerFactory).Leases),
		newAccessorCase("deployments", informers.DeploymentsResource, &appsv1.Deployment{ObjectMeta: om("a", "d1")}, (*informers.SharedInformerFactory).Deployments),
	}
	if len(cases) != len(informers.Resources()) {
		t.Fatalf("%d cases for %d resources", len(cases), len(informers.Resources()))
	}
	synctest.Test(t, func(t *testing.T) {
		src := &testSource{sources: map[schema.GroupVersionResource]cache.ListerWatcher[cache.Object]{}}
		for _, c := range cases {
			src.sources[c.gvr] = c.lw
		}
		f := informers.NewSharedInformerFactory(src, informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
		t.Cleanup(f.Shutdown)
		var checks []func()
		for _, c := range cases {
			checks = append(checks, c.check(t, f))
		}
		f.Start(t.Context())
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		got := f.WaitForCacheSync(ctx)
		for _, c := range cases {
			if !got[c.gvr] {
				t.Errorf("%s: WaitForCacheSync = %v", c.name, got)
			}
		}
		for _, check := range checks {
			check()
		}
		src.mu.Lock()
		defer src.mu.Unlock()
		var want []string
		for _, c := range cases {
			want = append(want, c.gvr.Resource+"@")
		}
		if !slices.Equal(src.asked, want) {
			t.Errorf("source asked %v, want %v", src.asked, want)
		}
	})
}
