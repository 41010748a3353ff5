package informers_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
			Resync: map[schema.GroupVersionResource]time.Duration{podsGVR: 5 * time.Minute}},
			wantPods: 5 * time.Minute, wantNamespaces: 30 * time.Second},
		{name: "per-resource zero disables", opts: informers.Options{DefaultResync: 30 * time.Second,
			Resync: map[schema.GroupVersionResource]time.Duration{podsGVR: 0}},
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
				{"pods", informers.For[*corev1.Pod](f).SharedIndexInformer, func() (time.Duration, error) {
					r, err := informers.For[*corev1.Pod](f).AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{})
					return resyncPeriod[*corev1.Pod](r, err)
				}, tc.wantPods},
				{"namespaces", informers.For[*corev1.Namespace](f).SharedIndexInformer, func() (time.Duration, error) {
					r, err := informers.For[*corev1.Namespace](f).AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Namespace]{})
					return resyncPeriod[*corev1.Namespace](r, err)
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
		informers.For[*corev1.Pod](f).AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
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
			podsGVR: cache.Erase[*corev1.Pod](pods),
		}}}
		const sel = "metadata.name=p1"
		f := informers.NewSharedInformerFactory(src, informers.Options{
			TweakListOptions: func(o *metav1.ListOptions) { o.FieldSelector = sel },
			Reflector:        cache.ReflectorOptions{Logger: quiet},
		})
		t.Cleanup(f.Shutdown)
		pods.Create(newPod("a", "p1", nil))
		pods.Create(newPod("a", "p2", nil))
		h := informers.For[*corev1.Pod](f)
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
		if got := f.WaitForCacheSync(t.Context()); !got[podsGVR] {
			t.Fatalf("WaitForCacheSync = %v", got)
		}
		pods.Create(newPod("a", "p1b", nil))
		synctest.Wait()
		// Every request carried it: the watch (a streaming list) and any
		// list.
		if len(pods.Requests(cachetest.OpWatch)) == 0 {
			t.Error("no watch requests")
		}
		for _, op := range []cachetest.Op{cachetest.OpList, cachetest.OpWatch} {
			reqs := pods.Requests(op)
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

// accessorCase is one way to ask for a typed informer, with a Source of
// its type.
type accessorCase struct {
	name string
	gvr  schema.GroupVersionResource
	lw   cache.ListerWatcher[cache.Object]
	// check asks for the informer (before Start) and returns a check to
	// run after sync.
	check func(t *testing.T, f *informers.SharedInformerFactory) func()
}

// newAccessorCase checks that get, For[T], hands out the
// informer of the registry's resource of T, which InformerFor with gvr
// (stated here, not read from the registry) hands out too.
func newAccessorCase[T cache.Object](name string, gvr schema.GroupVersionResource, obj T, get func(*informers.SharedInformerFactory) *informers.Informer[T]) accessorCase {
	src := cachetest.New[T]()
	return accessorCase{
		name: name, gvr: gvr, lw: cache.Erase[T](src),
		check: func(t *testing.T, f *informers.SharedInformerFactory) func() {
			if _, err := src.Create(obj); err != nil {
				t.Fatal(err)
			}
			h := get(f)
			if h.SharedIndexInformer != informers.InformerFor[T](f, gvr).SharedIndexInformer {
				t.Errorf("%s: accessor and InformerFor(%v) disagree", name, gvr)
			}
			return func() {
				if !h.HasSynced() {
					t.Errorf("%s: not synced", name)
					return
				}
				items := h.GetStore().List()
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
	core, apps := corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion
	cases := []accessorCase{
		newAccessorCase("namespaces", core.WithResource("namespaces"), &corev1.Namespace{ObjectMeta: om("", "n1")}, informers.For[*corev1.Namespace]),
		newAccessorCase("pods", core.WithResource("pods"), &corev1.Pod{ObjectMeta: om("a", "p1")}, informers.For[*corev1.Pod]),
		newAccessorCase("replicationcontrollers", core.WithResource("replicationcontrollers"), &corev1.ReplicationController{ObjectMeta: om("a", "rc1")}, informers.For[*corev1.ReplicationController]),
		newAccessorCase("services", core.WithResource("services"), &corev1.Service{ObjectMeta: om("a", "s1")}, informers.For[*corev1.Service]),
		//lint:ignore SA1019 the endpoints controller still reads core/v1 Endpoints.
		newAccessorCase("endpoints", core.WithResource("endpoints"), &corev1.Endpoints{ObjectMeta: om("a", "e1")}, informers.For[*corev1.Endpoints]),
		// For finds any built-in resource from its type alone.
		newAccessorCase("For events", core.WithResource("events"), &corev1.Event{ObjectMeta: om("a", "ev1")}, informers.For[*corev1.Event]),
		newAccessorCase("For leases", coordinationv1.SchemeGroupVersion.WithResource("leases"), &coordinationv1.Lease{ObjectMeta: om("a", "l1")}, informers.For[*coordinationv1.Lease]),
		newAccessorCase("For deployments", apps.WithResource("deployments"), &appsv1.Deployment{ObjectMeta: om("a", "d1")}, informers.For[*appsv1.Deployment]),
		newAccessorCase("For replicasets", apps.WithResource("replicasets"), &appsv1.ReplicaSet{ObjectMeta: om("a", "rs1")}, informers.For[*appsv1.ReplicaSet]),
		newAccessorCase("For configmaps", core.WithResource("configmaps"), &corev1.ConfigMap{ObjectMeta: om("a", "cm1")}, informers.For[*corev1.ConfigMap]),
		newAccessorCase("For nodes", core.WithResource("nodes"), &corev1.Node{ObjectMeta: om("", "node1")}, informers.For[*corev1.Node]),
		newAccessorCase("For clusterroles", rbacv1.SchemeGroupVersion.WithResource("clusterroles"), &rbacv1.ClusterRole{ObjectMeta: om("", "cr1")}, informers.For[*rbacv1.ClusterRole]),
		newAccessorCase("For jobs", batchv1.SchemeGroupVersion.WithResource("jobs"), &batchv1.Job{ObjectMeta: om("a", "j1")}, informers.For[*batchv1.Job]),
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

// TestFactory_ForUnknownType: For of a type the registry does not know
// never asks the source, and its informer tells why it cannot sync.
func TestFactory_ForUnknownType(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _, src := setup(t, informers.Options{})
		h := informers.For[*unstructured.Unstructured](f)
		if h2 := informers.For[*unstructured.Unstructured](f); h2 != h {
			t.Error("two requests for one type got two informers")
		}
		f.Start(t.Context())
		synctest.Wait()
		st := h.SyncStatus()
		if st.Synced || !errors.Is(st.LastError, informers.ErrNotBuiltin) {
			t.Errorf("status %+v, want ErrNotBuiltin", st)
		}
		src.mu.Lock()
		defer src.mu.Unlock()
		if len(src.asked) != 0 {
			t.Errorf("source asked %v, want nothing", src.asked)
		}
	})
}

// metadataSource is a testSource that also serves metadata-only
// ListerWatchers, recording each request.
type metadataSource struct {
	*testSource
	meta  map[schema.GroupVersionResource]cache.ListerWatcher[cache.Object]
	asked []string
}

func (m *metadataSource) MetadataListerWatcher(gvr schema.GroupVersionResource, ns string, _ func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
	m.testSource.mu.Lock()
	defer m.testSource.mu.Unlock()
	m.asked = append(m.asked, gvr.Resource+"@"+ns)
	return m.meta[gvr]
}

// TestFactory_Metadata: a metadata informer reads the source's metadata
// form when it has one, and the metadata of its whole objects otherwise;
// either way it is an informer of its own beside the typed one.
func TestFactory_Metadata(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p1", UID: "u1", Labels: map[string]string{"app": "x"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ReplicationController", Name: "rc", UID: "u0"}}},
		Spec: corev1.PodSpec{NodeName: "n"}}
	for _, tc := range []struct {
		name      string
		metaForm  bool     // the source is a MetadataSource
		wantTyped []string // what the factory asks of the typed form
	}{
		{name: "from the whole objects", wantTyped: []string{"pods@", "pods@"}},
		{name: "from a MetadataSource", metaForm: true, wantTyped: []string{"pods@"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pods := cachetest.New[*corev1.Pod]()
				if _, err := pods.Create(pod); err != nil {
					t.Fatal(err)
				}
				ts := &testSource{sources: map[schema.GroupVersionResource]cache.ListerWatcher[cache.Object]{podsGVR: cache.Erase[*corev1.Pod](pods)}}
				var src informers.Source = ts
				var ms *metadataSource
				if tc.metaForm {
					metas := cachetest.New[*metav1.PartialObjectMetadata]()
					if _, err := metas.Create(&metav1.PartialObjectMetadata{ObjectMeta: *pod.ObjectMeta.DeepCopy()}); err != nil {
						t.Fatal(err)
					}
					ms = &metadataSource{testSource: ts, meta: map[schema.GroupVersionResource]cache.ListerWatcher[cache.Object]{
						podsGVR: cache.Erase[*metav1.PartialObjectMetadata](metas)}}
					src = ms
				}
				f := informers.NewSharedInformerFactory(src, informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
				t.Cleanup(f.Shutdown)
				h := informers.MetadataFor(f, podsGVR)
				typed := informers.For[*corev1.Pod](f)
				if any(h.SharedIndexInformer) == any(typed.SharedIndexInformer) {
					t.Fatal("the metadata informer is the typed one")
				}
				f.Start(t.Context())
				if got := f.WaitForCacheSync(t.Context()); !got[podsGVR] {
					t.Fatalf("WaitForCacheSync = %v", got)
				}
				got, err := h.Lister().Namespace("a").Get("p1")
				if err != nil {
					t.Fatal(err)
				}
				if got.UID != "u1" || got.Labels["app"] != "x" || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "u0" {
					t.Errorf("metadata %+v", got.ObjectMeta)
				}
				if !tc.metaForm && (got.Kind != "PartialObjectMetadata" || got.APIVersion != "meta.k8s.io/v1") {
					t.Errorf("kind %s %s, want meta.k8s.io/v1 PartialObjectMetadata", got.APIVersion, got.Kind)
				}
				ts.mu.Lock()
				defer ts.mu.Unlock()
				// The typed informer, and the metadata one when the
				// source has no metadata form.
				if !slices.Equal(ts.asked, tc.wantTyped) {
					t.Errorf("source asked %v, want %v", ts.asked, tc.wantTyped)
				}
				if ms != nil && !slices.Equal(ms.asked, []string{"pods@"}) {
					t.Errorf("metadata source asked %v, want pods once", ms.asked)
				}
			})
		})
	}
}

// resyncPeriod is the resync period of the handler registration r, which
// a SharedIndexInformer[T] made.
func resyncPeriod[T cache.Object](r cache.ResourceEventHandlerRegistration, err error) (time.Duration, error) {
	if err != nil {
		return 0, err
	}
	reg, ok := r.(*cache.Registration[T])
	if !ok {
		return 0, fmt.Errorf("registration %T is not a *cache.Registration", r)
	}
	return reg.ResyncPeriod(), nil
}
