package cachetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type podSource = Source[*corev1.Pod]

func pod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

func mustCreate(t *testing.T, s *podSource, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := s.Create(p)
	if err != nil {
		t.Fatalf("Create %s/%s: %v", p.Namespace, p.Name, err)
	}
	return out
}

func mustUpdate(t *testing.T, s *podSource, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := s.Update(p)
	if err != nil {
		t.Fatalf("Update %s/%s: %v", p.Namespace, p.Name, err)
	}
	return out
}

func mustDelete(t *testing.T, s *podSource, ns, name string) *corev1.Pod {
	t.Helper()
	out, err := s.Delete(ns, name)
	if err != nil {
		t.Fatalf("Delete %s/%s: %v", ns, name, err)
	}
	return out
}

// ev is an event reduced to what tests compare: type, key and
// resourceVersion.
type ev struct {
	Type cache.EventType
	Key  string
	RV   string
}

func (e ev) String() string { return fmt.Sprintf("%s %s@%s", e.Type, e.Key, e.RV) }

func short[T cache.Object](e cache.Event[T]) ev {
	if isNil(e.Object) {
		return ev{Type: e.Type}
	}
	return ev{Type: e.Type, Key: keyOf(e.Object.GetNamespace(), e.Object.GetName()), RV: e.Object.GetResourceVersion()}
}

// queued reports how many events w holds; events are queued synchronously
// by writes, so tests can read exactly that many without blocking.
func queued[T cache.Object](w cache.Watcher[T]) int {
	ww := w.(*watcher[T])
	ww.mu.Lock()
	defer ww.mu.Unlock()
	return len(ww.queue)
}

// takeAll reads every event w holds now, without blocking.
func takeAll[T cache.Object](t *testing.T, w cache.Watcher[T]) []cache.Event[T] {
	t.Helper()
	var out []cache.Event[T]
	for n := queued(w); n > 0; n-- {
		e, err := w.Next()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, e)
	}
	return out
}

func shortAll[T cache.Object](evs []cache.Event[T]) []ev {
	out := make([]ev, len(evs))
	for i, e := range evs {
		out[i] = short(e)
	}
	return out
}

func eqEvents(t *testing.T, got, want []ev) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events:\n got  %v\n want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("events:\n got  %v\n want %v", got, want)
		}
	}
}

// expectEnd checks that w has nothing queued and Next returns wantErr.
func expectEnd[T cache.Object](t *testing.T, w cache.Watcher[T], wantErr error) {
	t.Helper()
	if n := queued(w); n != 0 {
		t.Fatalf("%d events still queued", n)
	}
	ww := w.(*watcher[T])
	ww.mu.Lock()
	ended := ww.ended || ww.stopped
	ww.mu.Unlock()
	if !ended {
		t.Fatalf("watch has not ended")
	}
	if _, err := w.Next(); !errors.Is(err, wantErr) {
		t.Fatalf("Next = %v, want %v", err, wantErr)
	}
}

func watch(t *testing.T, s *podSource, opts metav1.ListOptions) cache.Watcher[*corev1.Pod] {
	t.Helper()
	w, err := s.Watch(context.Background(), opts)
	if err != nil {
		t.Fatalf("Watch(%+v): %v", opts, err)
	}
	t.Cleanup(w.Stop)
	return w
}

func keys[T cache.Object](items []T) []string {
	out := make([]string, len(items))
	for i, o := range items {
		out[i] = keyOf(o.GetNamespace(), o.GetName()) + "@" + o.GetResourceVersion()
	}
	return out
}

func ptr[V any](v V) *V { return &v }

// listOpts spells metav1.ListOptions briefly in tables.
type listOpts struct {
	RV        string
	Match     string
	Limit     int64
	Continue  string
	Labels    string
	Fields    string
	Bookmarks bool
	Initial   *bool
	Timeout   int64
}

func (o listOpts) opts() metav1.ListOptions {
	out := metav1.ListOptions{
		ResourceVersion:      o.RV,
		ResourceVersionMatch: metav1.ResourceVersionMatch(o.Match),
		Limit:                o.Limit,
		Continue:             o.Continue,
		LabelSelector:        o.Labels,
		FieldSelector:        o.Fields,
		AllowWatchBookmarks:  o.Bookmarks,
		SendInitialEvents:    o.Initial,
	}
	if o.Timeout != 0 {
		out.TimeoutSeconds = ptr(o.Timeout)
	}
	return out
}

type cacheList = cache.List[*corev1.Pod]

func errorsAs(err error, target any) bool { return errors.As(err, target) }
