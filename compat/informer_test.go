package compat_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// eventLog counts what an informer's event handler was told, per object.
type eventLog struct {
	mu                     sync.Mutex
	adds, updates, deletes map[string]int
}

func newEventLog() *eventLog {
	return &eventLog{adds: map[string]int{}, updates: map[string]int{}, deletes: map[string]int{}}
}

func nameOf(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Key
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return key
}

func (l *eventLog) handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.adds[nameOf(obj)]++
		},
		UpdateFunc: func(_, obj any) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.updates[nameOf(obj)]++
		},
		DeleteFunc: func(obj any) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.deletes[nameOf(obj)]++
		},
	}
}

// counts returns copies of the three maps.
func (l *eventLog) counts() (adds, updates, deletes map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.adds), maps.Clone(l.updates), maps.Clone(l.deletes)
}

// once builds the map in which every key occurs once.
func once(keys ...string) map[string]int {
	m := make(map[string]int, len(keys))
	for _, k := range keys {
		m[k] = 1
	}
	return m
}

// informerModes are the two ways client-go fills an informer: WatchList
// (a watch with sendInitialEvents=true, the default of client-go v0.37)
// and the classic paged list followed by a watch.
var informerModes = []struct {
	name      string
	watchList bool
}{
	{"watchlist", true},
	{"list-watch", false},
}

// TestSharedInformerFactory runs a SharedInformerFactory's pod and
// replicationcontroller informers against the server through creates,
// updates and deletes, and checks that the informers' caches end equal to
// the server's lists and that the handlers were told each change once.
func TestSharedInformerFactory(t *testing.T) {
	for _, b := range backends {
		for _, mode := range informerModes {
			t.Run(b.name+"/"+mode.name, func(t *testing.T) {
				s := startServer(t, b, serverOptions{})
				cs := s.clientset(mediaJSON)
				ctx := t.Context()
				pods, rcs := cs.CoreV1().Pods("default"), cs.CoreV1().ReplicationControllers("default")

				// Objects that exist before the informers start arrive
				// in the initial list.
				for i := range 5 {
					if _, err := pods.Create(ctx, pod(fmt.Sprintf("p%d", i), nil), metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				for i := range 2 {
					if _, err := rcs.Create(ctx, rc(fmt.Sprintf("r%d", i), 1), metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}

				factory := informers.NewSharedInformerFactory(cs, 0)
				var podInf, rcInf cache.SharedIndexInformer
				if mode.watchList {
					podInf = factory.Core().V1().Pods().Informer()
					rcInf = factory.Core().V1().ReplicationControllers().Informer()
				} else {
					podInf = factory.InformerFor(&corev1.Pod{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
						return cache.NewSharedIndexInformer(podLW(c, ""), &corev1.Pod{}, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
					})
					rcInf = factory.InformerFor(&corev1.ReplicationController{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
						return cache.NewSharedIndexInformer(rcLW(c, ""), &corev1.ReplicationController{}, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
					})
				}
				podEvents, rcEvents := newEventLog(), newEventLog()
				if _, err := podInf.AddEventHandler(podEvents.handler()); err != nil {
					t.Fatal(err)
				}
				if _, err := rcInf.AddEventHandler(rcEvents.handler()); err != nil {
					t.Fatal(err)
				}
				runCtx, stop := context.WithCancel(ctx)
				t.Cleanup(func() {
					stop()
					factory.Shutdown()
				})
				factory.Start(runCtx.Done())
				for typ, ok := range factory.WaitForCacheSync(runCtx.Done()) {
					if !ok {
						t.Fatalf("%v did not sync", typ)
					}
				}
				// A WatchList sync is a consistent read; the classic list is
				// at resourceVersion "0", which may be served from a cache
				// that trails storage, so only WatchList must be exact here.
				if got, want := versionsOf(podInf.GetStore().List()), serverVersions(ctx, t, podList(pods)); mode.watchList && got.String() != want.String() {
					t.Fatalf("pods after sync: informer has %v, server %v", got, want)
				}

				// Creates, updates (label and spec changes) and deletes.
				for i := 5; i < 10; i++ {
					if _, err := pods.Create(ctx, pod(fmt.Sprintf("p%d", i), nil), metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				for _, name := range []string{"p1", "p2", "p3"} {
					p, err := pods.Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					p.Labels = map[string]string{"touched": "yes"}
					if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				for _, name := range []string{"p0", "p4"} {
					if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := rcs.Create(ctx, rc("r2", 2), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				r0, err := rcs.Get(ctx, "r0", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				*r0.Spec.Replicas = 3
				if _, err := rcs.Update(ctx, r0, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				// Replication controllers default to orphaning their pods,
				// which leaves the object behind a finalizer for the
				// garbage collector; background deletion removes it now.
				background := metav1.DeletePropagationBackground
				if err := rcs.Delete(ctx, "r1", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
					t.Fatal(err)
				}

				converges(t, "pods", podInf.GetStore(), podList(pods))
				converges(t, "replicationcontrollers", rcInf.GetStore(), rcList(rcs))

				// The listers the factory hands out read the same caches.
				if got, err := factory.Core().V1().ReplicationControllers().Lister().ReplicationControllers("default").Get("r0"); err != nil || *got.Spec.Replicas != 3 {
					t.Errorf("lister r0: %v, %v; want 3 replicas", got, err)
				}

				// Each change reached the handlers exactly once: no relist
				// replayed anything. A pod's delete is an update (its
				// deletionTimestamp written) and then the delete.
				checkEvents(t, "pods", podEvents,
					once("default/p0", "default/p1", "default/p2", "default/p3", "default/p4", "default/p5", "default/p6", "default/p7", "default/p8", "default/p9"),
					once("default/p0", "default/p1", "default/p2", "default/p3", "default/p4"),
					once("default/p0", "default/p4"))
				checkEvents(t, "replicationcontrollers", rcEvents,
					once("default/r0", "default/r1", "default/r2"),
					once("default/r0"),
					once("default/r1"))

				checkFillMode(t, s, "pods", mode.watchList)
				checkFillMode(t, s, "replicationcontrollers", mode.watchList)
			})
		}
	}
}

// checkEvents compares what a handler was told with what the test did.
func checkEvents(t *testing.T, what string, l *eventLog, adds, updates, deletes map[string]int) {
	t.Helper()
	// Handlers run after the store is updated: wait for the last of them.
	eventually(t, what+" handlers", func() (bool, string) {
		a, u, d := l.counts()
		return maps.Equal(a, adds) && maps.Equal(u, updates) && maps.Equal(d, deletes),
			fmt.Sprintf("adds %v updates %v deletes %v; want %v %v %v", a, u, d, adds, updates, deletes)
	})
}

// checkFillMode checks in the server's request log how the informer on
// resource filled its cache: by a watch with sendInitialEvents=true and no
// list at all, or by a list and then a watch from the list's version.
func checkFillMode(t *testing.T, s *server, resource string, watchList bool) {
	t.Helper()
	reqs := s.log.matching(func(r *loggedRequest) bool {
		return r.Method == "GET" && strings.HasSuffix(r.Path, "/"+resource) && r.Query.Get("allowWatchBookmarks") == "true"
	})
	lists := s.log.matching(func(r *loggedRequest) bool {
		return r.Method == "GET" && r.Path == "/api/v1/"+resource && !isWatch(r)
	})
	if len(reqs) == 0 {
		t.Fatalf("%s: the server saw no watch from the informer", resource)
	}
	first := reqs[0]
	if watchList {
		// The reflector's own requests are cluster-wide; the test's
		// consistent lists are namespaced, so lists must be empty.
		if first.Query.Get("sendInitialEvents") != "true" || first.Query.Get("resourceVersionMatch") != "NotOlderThan" || first.Status != 200 {
			t.Errorf("%s: first informer request %v %d, want a watch with sendInitialEvents=true&resourceVersionMatch=NotOlderThan answered 200", resource, first.Query, first.Status)
		}
		if len(lists) != 0 {
			t.Errorf("%s: informer listed %d times in WatchList mode: %v", resource, len(lists), lists[0].Query)
		}
		return
	}
	if first.Query.Has("sendInitialEvents") {
		t.Errorf("%s: list-watch informer sent sendInitialEvents: %v", resource, first.Query)
	}
	if len(lists) != 1 || lists[0].Query.Get("resourceVersion") != "0" {
		t.Errorf("%s: informer lists %v, want one at resourceVersion 0", resource, lists)
	}
}

// converges waits until a client-side store holds exactly what the server
// lists.
func converges(t *testing.T, what string, store cache.Store, list func(context.Context, metav1.ListOptions) (runtime.Object, error)) {
	t.Helper()
	var want versions
	eventually(t, what+" cache converges", func() (bool, string) {
		want = serverVersions(t.Context(), t, list)
		got := versionsOf(store.List())
		return got.String() == want.String(), fmt.Sprintf("cache %v, server %v", got, want)
	})
}

type podClient interface {
	List(context.Context, metav1.ListOptions) (*corev1.PodList, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

type rcClient interface {
	List(context.Context, metav1.ListOptions) (*corev1.ReplicationControllerList, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

func podList(c podClient) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
}

func rcList(c rcClient) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
}

// podLW is a list+watch (no WatchList) recordingLW on the pods of ns
// ("" for all namespaces).
func podLW(cs kubernetes.Interface, ns string) *recordingLW {
	c := cs.CoreV1().Pods(ns)
	return &recordingLW{list: podList(c), watch: c.Watch}
}

func rcLW(cs kubernetes.Interface, ns string) *recordingLW {
	c := cs.CoreV1().ReplicationControllers(ns)
	return &recordingLW{list: rcList(c), watch: c.Watch}
}
