package cache

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func lpod(name, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

// noteLog records notifications as "add a@1", "update a@1->3",
// "delete a@4", "delete a@4?" (final state unknown).
type noteLog struct {
	mu    sync.Mutex
	notes []string
	block chan struct{} // when not nil, each call waits for it to close
}

func (n *noteLog) OnNotification(x Notification[*corev1.Pod]) {
	if n.block != nil {
		<-n.block
	}
	s := x.Type.String() + " " + x.Object.Name + "@" + x.Object.ResourceVersion
	switch {
	case x.Type == NotifyUpdate:
		s = "update " + x.Object.Name + "@" + x.OldObject.ResourceVersion + "->" + x.Object.ResourceVersion
	case x.FinalStateUnknown:
		s += "?"
	}
	n.mu.Lock()
	n.notes = append(n.notes, s)
	n.mu.Unlock()
}
func (n *noteLog) OnAdd(*corev1.Pod, bool)    {}
func (n *noteLog) OnUpdate(_, _ *corev1.Pod)  {}
func (n *noteLog) OnDelete(*corev1.Pod, bool) {}
func (n *noteLog) take() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := strings.Join(n.notes, ", ")
	n.notes = nil
	return s
}

// parseNote turns "add a@1", "update a@1->3", "delete a@4", "delete a@4?"
// into a notification.
func parseNote(s string) Notification[*corev1.Pod] {
	op, rest, _ := strings.Cut(s, " ")
	name, rv, _ := strings.Cut(rest, "@")
	switch op {
	case "add":
		return Notification[*corev1.Pod]{Type: NotifyAdd, Object: lpod(name, rv)}
	case "update":
		o, n, _ := strings.Cut(rv, "->")
		return Notification[*corev1.Pod]{Type: NotifyUpdate, Object: lpod(name, n), OldObject: lpod(name, o)}
	}
	unknown := strings.HasSuffix(rv, "?")
	return Notification[*corev1.Pod]{Type: NotifyDelete, Object: lpod(name, strings.TrimSuffix(rv, "?")), FinalStateUnknown: unknown}
}

func TestListener_MergesPendingNotificationsPerKey(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want string
	}{
		{"single add", []string{"add a@1"}, "add a@1"},
		{"update chain becomes one update", []string{"update a@1->2", "update a@2->3", "update a@3->4"}, "update a@1->4"},
		{"add then update becomes one add", []string{"add a@1", "update a@1->2", "update a@2->3"}, "add a@3"},
		{"add then delete unseen is dropped", []string{"add a@1", "update a@1->2", "delete a@3"}, ""},
		{"update then delete keeps the delete", []string{"update a@1->2", "delete a@3"}, "delete a@3"},
		{"update then tombstone keeps the tombstone", []string{"update a@1->2", "delete a@2?"}, "delete a@2?"},
		{"delete then add keeps both in order", []string{"delete a@2", "add a@5", "update a@5->6"}, "delete a@2, add a@6"},
		{"delete, add, delete keeps the first delete", []string{"delete a@2", "add a@5", "delete a@6"}, "delete a@2"},
		{"keys keep the order of their first pending change", []string{"update a@1->2", "add b@3", "update a@2->4", "delete c@5"}, "update a@1->4, add b@3, delete c@5"},
		{"a dropped key frees its place", []string{"add a@1", "add b@2", "delete a@3", "add a@4"}, "add b@2, add a@4"},
	}
	for _, tt := range tests {
		// An ordered listener (HandlerOptions.InOrder) merges nothing: it
		// delivers exactly what was queued.
		for _, ordered := range []bool{false, true} {
			want := tt.want
			if ordered {
				want = strings.Join(tt.in, ", ")
			}
			t.Run(fmt.Sprintf("%s/ordered=%v", tt.name, ordered), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := &noteLog{}
					l := newListener[*corev1.Pod](h, ordered, 0, 0, time.Now(), slogDiscard(), nil)
					// Queue everything before the delivery goroutine starts:
					// the handler is as far behind as it can be.
					for _, s := range tt.in {
						n := parseNote(s)
						l.add(n.Object.Name, &n, time.Now())
					}
					keys := map[string]bool{}
					for _, s := range tt.in {
						keys[parseNote(s).Object.Name] = true
					}
					if got := l.pendingKeys(); ordered && got != len(keys) {
						t.Errorf("pending keys %d, want %d", got, len(keys))
					}
					var wg sync.WaitGroup
					wg.Go(func() { l.run(context.Background()) })
					synctest.Wait()
					if got := l.pendingKeys(); got != 0 {
						t.Errorf("pending keys %d after delivery, want 0", got)
					}
					l.stop()
					wg.Wait()
					if got := h.take(); got != want {
						t.Errorf("delivered %q, want %q", got, want)
					}
				})
			})
		}
	}
}

// TestListener_MergeKeepsSourceOfRealChange queues notifications with their
// sources at a handler that is behind, and checks the Source of what it
// receives: a resync merged with a pending change must not hide the change
// from a handler that skips resyncs.
func TestListener_MergeKeepsSourceOfRealChange(t *testing.T) {
	type in struct {
		note string // as parseNote reads it
		src  Source
	}
	w, rl, rs, il := SourceWatch, SourceRelist, SourceResync, SourceInitialList
	tests := []struct {
		name string
		in   []in
		want string // "note source", comma-separated
	}{
		{"watch update then resync", []in{{"update a@1->2", w}, {"update a@2->2", rs}}, "update a@1->2 watch"},
		{"relist update then resync", []in{{"update a@1->2", rl}, {"update a@2->2", rs}}, "update a@1->2 relist"},
		{"watch update then several resyncs", []in{{"update a@1->2", w}, {"update a@2->2", rs}, {"update a@2->2", rs}}, "update a@1->2 watch"},
		{"resync then watch update", []in{{"update a@1->1", rs}, {"update a@1->2", w}}, "update a@1->2 watch"},
		{"resync then relist update", []in{{"update a@1->1", rs}, {"update a@1->2", rl}}, "update a@1->2 relist"},
		{"resyncs only stay a resync", []in{{"update a@1->1", rs}, {"update a@1->1", rs}}, "update a@1->1 resync"},
		{"watch update, resync, relist update: the newest change", []in{{"update a@1->2", w}, {"update a@2->2", rs}, {"update a@2->3", rl}}, "update a@1->3 relist"},
		{"relist update then watch update: the newest change", []in{{"update a@1->2", rl}, {"update a@2->3", w}}, "update a@1->3 watch"},
		{"watch add then resync", []in{{"add a@1", w}, {"update a@1->1", rs}}, "add a@1 watch"},
		{"initial-list add then resync", []in{{"add a@1", il}, {"update a@1->1", rs}}, "add a@1 initial-list"},
		{"relist add then resync", []in{{"add a@1", rl}, {"update a@1->1", rs}}, "add a@1 relist"},
		{"delete, add, resync", []in{{"delete a@1", w}, {"add a@3", w}, {"update a@3->3", rs}}, "delete a@1 watch, add a@3 watch"},
		{"resync then relist delete", []in{{"update a@1->1", rs}, {"delete a@1?", rl}}, "delete a@1 relist"},
		{"update, resync, watch delete", []in{{"update a@1->2", w}, {"update a@2->2", rs}, {"delete a@3", w}}, "delete a@3 watch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var got []string
				h := NotificationHandlerFunc[*corev1.Pod](func(n Notification[*corev1.Pod]) {
					s := n.Type.String() + " " + n.Object.Name + "@" + n.Object.ResourceVersion
					if n.Type == NotifyUpdate {
						s = "update " + n.Object.Name + "@" + n.OldObject.ResourceVersion + "->" + n.Object.ResourceVersion
					}
					mu.Lock()
					defer mu.Unlock()
					got = append(got, s+" "+n.Source.String())
				})
				l := newListener[*corev1.Pod](h, false, 0, 0, time.Now(), slogDiscard(), nil)
				for _, x := range tt.in {
					n := parseNote(x.note)
					n.Source = x.src
					n.IsInInitialList = x.src == SourceInitialList && n.Type == NotifyAdd
					l.add(n.Object.Name, &n, time.Now())
				}
				var wg sync.WaitGroup
				wg.Go(func() { l.run(context.Background()) })
				synctest.Wait()
				l.stop()
				wg.Wait()
				if s := strings.Join(got, ", "); s != tt.want {
					t.Errorf("delivered %q, want %q", s, tt.want)
				}
			})
		})
	}
}

// TestListener_StalledHandlerIsBoundedByKeys pushes 1M updates over 1k keys
// at a handler that is stuck, and checks that its backlog holds one entry
// per key and a heap of the same order, then that once it resumes it sees
// the latest state of every key.
func TestListener_StalledHandlerIsBoundedByKeys(t *testing.T) {
	const keys, updates = 1000, 1_000_000
	n := updates
	if testing.Short() {
		n = 100_000
	}
	h := &latest{seen: map[string]string{}, block: make(chan struct{})}
	l := newListener[*corev1.Pod](h, false, 0, 0, time.Now(), slogDiscard(), nil)
	var wg sync.WaitGroup
	wg.Go(func() { l.run(context.Background()) })

	// A pool of objects, two per key, so that the test measures the backlog,
	// not the objects.
	names := make([]string, keys)
	objs := make([][2]*corev1.Pod, keys)
	for i := range keys {
		names[i] = "ns/p" + strconv.Itoa(i)
		objs[i] = [2]*corev1.Pod{lpod("p"+strconv.Itoa(i), "0"), lpod("p"+strconv.Itoa(i), "1")}
	}
	first := Notification[*corev1.Pod]{Type: NotifyAdd, Object: objs[0][0]}
	l.add(names[0], &first, time.Now())
	for l.inFlight.Load() == 0 { // the handler is now stuck in its first call
		runtime.Gosched()
	}
	final := map[string]string{names[0]: "0"}
	for i := range n {
		k := i % keys
		x := Notification[*corev1.Pod]{Type: NotifyUpdate, OldObject: objs[k][i/keys%2], Object: objs[k][(i/keys+1)%2]}
		l.add(names[k], &x, time.Now())
		final[names[k]] = x.Object.ResourceVersion
	}
	if got := l.pendingKeys(); got > keys {
		t.Errorf("backlog holds %d keys, want at most %d", got, keys)
	}
	pending, _ := l.backlog()
	t.Logf("stalled handler after %d updates over %d keys: %d pending notifications", n, keys, pending)
	l.mu.Lock()
	slab := cap(l.nodes)
	l.mu.Unlock()
	// The slab's size is the bound itself (the heap figure, measured by the
	// bench, is noisy under the race detector).
	if slab > 2*keys {
		t.Errorf("backlog slab has room for %d entries after %d updates over %d keys: not bounded by keys", slab, n, keys)
	}
	t.Logf("backlog slab: %d entries of %d B", slab, unsafe.Sizeof(pendingNode[*corev1.Pod]{}))

	close(h.block)
	for l.pendingKeys() > 0 || l.inFlight.Load() > 0 {
		runtime.Gosched()
	}
	l.stop()
	wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, rv := range final {
		if h.seen[k] != rv {
			t.Errorf("%s: handler ended at %q, want %q", k, h.seen[k], rv)
		}
	}
	if h.calls > keys+1 {
		t.Errorf("handler was called %d times after resuming, want at most %d", h.calls, keys+1)
	}
}

// latest records the last state seen of each key.
type latest struct {
	mu    sync.Mutex
	seen  map[string]string
	calls int
	block chan struct{}
}

func (h *latest) OnAdd(p *corev1.Pod, _ bool) { h.record(p) }
func (h *latest) OnUpdate(_, p *corev1.Pod)   { h.record(p) }
func (h *latest) OnDelete(p *corev1.Pod, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.seen, p.Namespace+"/"+p.Name)
}
func (h *latest) record(p *corev1.Pod) {
	<-h.block
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	h.seen[p.Namespace+"/"+p.Name] = p.ResourceVersion
}

func TestListener_BacklogGaugeAndAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &noteLog{block: make(chan struct{})}
		l := newListener[*corev1.Pod](h, false, 0, 0, time.Now(), slogDiscard(), nil)
		var wg sync.WaitGroup
		wg.Go(func() { l.run(context.Background()) })
		for i := range 3 {
			n := parseNote(fmt.Sprintf("add p%d@%d", i, i))
			l.add(n.Object.Name, &n, time.Now())
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if n, oldest := l.backlog(); n != 3 || time.Since(oldest) != 3*time.Second {
			t.Errorf("backlog = %d, oldest %v ago; want 3, 3s", n, time.Since(oldest))
		}
		close(h.block)
		synctest.Wait()
		if n, oldest := l.backlog(); n != 0 || !oldest.IsZero() {
			t.Errorf("backlog after draining = %d, %v; want 0, zero", n, oldest)
		}
		l.stop()
		wg.Wait()
	})
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// BenchmarkHandlerBacklog queues 1,000 objects changed 100 times each at a
// handler that takes nothing, merged per key (the default) and in order
// (HandlerOptions.InOrder), and reports the entries the backlog then holds
// and the bytes its queueing allocated per change.
func BenchmarkHandlerBacklog(b *testing.B) {
	const keys, rounds = 1000, 100
	names := make([]string, keys)
	objs := make([]*corev1.Pod, keys)
	for i := range keys {
		names[i] = "ns/p" + strconv.Itoa(i)
		objs[i] = lpod("p"+strconv.Itoa(i), "1")
	}
	for _, ordered := range []bool{false, true} {
		b.Run(fmt.Sprintf("ordered=%v", ordered), func(b *testing.B) {
			b.ReportAllocs()
			var held int
			for b.Loop() {
				l := newListener[*corev1.Pod](&noteLog{}, ordered, 0, 0, time.Now(), slogDiscard(), nil)
				now := time.Now()
				for r := range rounds {
					for k := range keys {
						n := Notification[*corev1.Pod]{Type: NotifyUpdate, OldObject: objs[k], Object: objs[k]}
						if r == 0 {
							n = Notification[*corev1.Pod]{Type: NotifyAdd, Object: objs[k]}
						}
						l.add(names[k], &n, now)
					}
				}
				held = l.count
			}
			b.ReportMetric(float64(held), "entries")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*keys*rounds), "ns/change")
		})
	}
}
