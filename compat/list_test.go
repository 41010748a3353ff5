package compat_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/pager"
	watchtools "k8s.io/client-go/tools/watch"
)

// TestPagedList lists pods across namespaces through client-go's pager
// while pods are created and deleted between pages: every pod that existed
// when the first page was read comes back exactly once, and nothing
// written later, because every page is read at the first page's version.
func TestPagedList(t *testing.T) {
	const inDefault, inOther = 23, 5
	for _, b := range backends {
		for _, pageSize := range []int64{1, 7, 500} {
			t.Run(fmt.Sprintf("%s/limit=%d", b.name, pageSize), func(t *testing.T) {
				s := startServer(t, b, serverOptions{})
				cs := s.clientset(mediaJSON)
				ctx := t.Context()
				if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				want := map[string]int{}
				for i := range inDefault + inOther {
					ns := "default"
					if i >= inDefault {
						ns = "other"
					}
					p, err := cs.CoreV1().Pods(ns).Create(ctx, pod(fmt.Sprintf("p%02d", i), nil), metav1.CreateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					want[ns+"/"+p.Name] = 1
				}

				var pages int
				var firstRV string
				p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
					list, err := cs.CoreV1().Pods("").List(ctx, opts)
					if err != nil {
						return nil, err
					}
					pages++
					if pages == 1 {
						firstRV = list.ResourceVersion
						// Writes between pages must not show in later
						// pages: one new pod, one deleted pod.
						if _, err := cs.CoreV1().Pods("default").Create(ctx, pod("late", nil), metav1.CreateOptions{}); err != nil {
							return nil, err
						}
						if err := cs.CoreV1().Pods("other").Delete(ctx, fmt.Sprintf("p%02d", inDefault+inOther-1), metav1.DeleteOptions{}); err != nil {
							return nil, err
						}
					}
					return list, nil
				})
				p.PageSize = pageSize
				obj, paginated, err := p.List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				items, err := meta.ExtractList(obj)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]int{}
				for _, it := range items {
					m, _ := meta.Accessor(it)
					got[m.GetNamespace()+"/"+m.GetName()]++
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("paged list returned %v, want each of %v once", got, want)
				}
				wantPages := int((inDefault + inOther + pageSize - 1) / pageSize)
				if pages != wantPages || paginated != (wantPages > 1) {
					t.Errorf("%d pages (paginated %v), want %d", pages, paginated, wantPages)
				}
				if rv, _ := meta.NewAccessor().ResourceVersion(obj); rv != firstRV {
					t.Errorf("list resourceVersion %s, want the first page's %s", rv, firstRV)
				}

				// On the wire: the first page with limit and no continue,
				// every later page with the previous page's token.
				reqs := s.log.matching(func(r *loggedRequest) bool { return r.Path == "/api/v1/pods" })
				if len(reqs) != wantPages {
					t.Fatalf("server saw %d list requests, want %d", len(reqs), wantPages)
				}
				for i, r := range reqs {
					if r.Query.Get("limit") != strconv.FormatInt(pageSize, 10) || (i == 0) != (r.Query.Get("continue") == "") || r.Status != 200 {
						t.Errorf("page %d: query %v status %d", i, r.Query, r.Status)
					}
				}
			})
		}
	}
}

// wantEvent is an event a watch must deliver; rv "" matches any version
// newer than the previous event's (a delete's version is not returned to
// the client that deleted).
type wantEvent struct {
	typ  watch.EventType
	name string
	rv   string
}

// podDeleted is what a watch sees of a pod's delete: kube's pod strategy
// deletes gracefully, so the store first writes the pod's
// deletionTimestamp (MODIFIED) and then, the pod being on no node (a grace
// period of 0), removes it (DELETED). Neither version is returned to the
// client that deleted.
func podDeleted(name string) []wantEvent {
	return []wantEvent{{watch.Modified, name, ""}, {watch.Deleted, name, ""}}
}

// history writes a fixed sequence and returns the events it must produce
// and the resourceVersion of each write.
func history(ctx context.Context, t *testing.T, pods podCRUD) []wantEvent {
	t.Helper()
	var evs []wantEvent
	a, err := pods.Create(ctx, pod("a", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evs = append(evs, wantEvent{watch.Added, "a", a.ResourceVersion})
	a.Labels = map[string]string{"v": "2"}
	if a, err = pods.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, wantEvent{watch.Modified, "a", a.ResourceVersion})
	b, err := pods.Create(ctx, pod("b", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evs = append(evs, wantEvent{watch.Added, "b", b.ResourceVersion})
	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, podDeleted("a")...)
	b.Labels = map[string]string{"v": "2"}
	if b, err = pods.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, wantEvent{watch.Modified, "b", b.ResourceVersion})
	return evs
}

type podCRUD interface {
	Create(context.Context, *corev1.Pod, metav1.CreateOptions) (*corev1.Pod, error)
	Update(context.Context, *corev1.Pod, metav1.UpdateOptions) (*corev1.Pod, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

// expectEvents reads want from ch in order, and fails on anything else.
func expectEvents(t *testing.T, ch <-chan watch.Event, want []wantEvent) {
	t.Helper()
	var prev int64
	for i, w := range want {
		ev, ok := <-ch
		if !ok {
			t.Fatalf("event %d: watch ended, want %s %s", i, w.typ, w.name)
		}
		p, isPod := ev.Object.(*corev1.Pod)
		if !isPod {
			t.Fatalf("event %d: %s %T, want %s %s", i, ev.Type, ev.Object, w.typ, w.name)
		}
		rv, err := strconv.ParseInt(p.ResourceVersion, 10, 64)
		if err != nil {
			t.Fatalf("event %d: resourceVersion %q: %v", i, p.ResourceVersion, err)
		}
		if ev.Type != w.typ || p.Name != w.name || (w.rv != "" && p.ResourceVersion != w.rv) || rv <= prev {
			t.Fatalf("event %d: %s %s@%s, want %s %s@%s after %d", i, ev.Type, p.Name, p.ResourceVersion, w.typ, w.name, w.rv, prev)
		}
		prev = rv
	}
}

// TestWatchResume starts watches from the version of each write of a
// history and checks they deliver exactly the events after it, with a
// plain client-go watch and with a RetryWatcher whose connection the
// server drops in the middle.
func TestWatchResume(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, serverOptions{})
			cs := s.clientset(mediaJSON)
			ctx := t.Context()
			pods := cs.CoreV1().Pods("default")
			evs := history(ctx, t, pods)
			// From each write whose version its writer knows: not the
			// events of a's delete.
			for _, from := range []int{0, 1, 2, len(evs) - 1} {
				t.Run(fmt.Sprintf("after-%s-%s", evs[from].typ, evs[from].name), func(t *testing.T) {
					w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: evs[from].rv})
					if err != nil {
						t.Fatal(err)
					}
					defer w.Stop()
					expectEvents(t, w.ResultChan(), evs[from+1:])
					// Nothing else was queued: the next event is the next
					// write.
					c, err := pods.Create(ctx, pod(fmt.Sprintf("after-%d", from), nil), metav1.CreateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					expectEvents(t, w.ResultChan(), []wantEvent{{watch.Added, c.Name, c.ResourceVersion}})
					if err := pods.Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					// Later watches from older versions see these too.
					evs = append(append(evs, wantEvent{watch.Added, c.Name, c.ResourceVersion}), podDeleted(c.Name)...)
				})
			}
			t.Run("retrywatcher-across-disconnect", func(t *testing.T) {
				// The deletes of the subtests above are part of history
				// now: start after them.
				list, err := pods.List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				evs := history2(ctx, t, pods, "x", "y")
				podWatches := func() []loggedRequest {
					return s.log.matching(func(r *loggedRequest) bool {
						return isWatch(r) && r.Path == "/api/v1/namespaces/default/pods"
					})
				}
				before := len(podWatches())
				rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, podLW(cs, "default"))
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					rw.Stop()
					<-rw.Done()
				}()
				expectEvents(t, rw.ResultChan(), evs[:2])
				// The server ends the watch; what is written meanwhile
				// comes once the RetryWatcher has watched again from the
				// last version it delivered, and nothing twice: the next
				// event after them is the next write.
				s.log.endWatches()
				evs = append(evs, history2(ctx, t, pods, "z", "w")...)
				sentinel, err := pods.Create(ctx, pod("sentinel", nil), metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				evs = append(evs, wantEvent{watch.Added, sentinel.Name, sentinel.ResourceVersion})
				expectEvents(t, rw.ResultChan(), evs[2:])
				watches := podWatches()[before:]
				if len(watches) < 2 {
					t.Fatalf("server saw %d watches from the RetryWatcher, want a re-watch", len(watches))
				}
				// It may have read one more event than it delivered when
				// the watch ended, so the re-watch is from y's version or
				// later, never from scratch.
				from, _ := strconv.ParseInt(watches[1].Query.Get("resourceVersion"), 10, 64)
				if y, _ := strconv.ParseInt(evs[1].rv, 10, 64); from < y {
					t.Errorf("re-watch from %q, want from %d or later", watches[1].Query.Get("resourceVersion"), y)
				}
			})
		})
	}
}

// history2 creates two pods and deletes the first, for the RetryWatcher.
func history2(ctx context.Context, t *testing.T, pods podCRUD, first, second string) []wantEvent {
	t.Helper()
	var evs []wantEvent
	for _, name := range []string{first, second} {
		p, err := pods.Create(ctx, pod(name, nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, wantEvent{watch.Added, name, p.ResourceVersion})
	}
	if err := pods.Delete(ctx, first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	return append(evs, podDeleted(first)...)
}
