package watchcache

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const prefix = "/pods/"

func podKey(ns, name string) string { return prefix + ns + "/" + name }

// podValue encodes a pod as the API server stores it (no resourceVersion),
// with a uid that is the same for every version of the pod, as a server
// keeps it.
func podValue(ns, name string, lbls map[string]string, phase corev1.PodPhase) []byte {
	b, err := json.Marshal(&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, UID: types.UID("uid-" + ns + "-" + name)},
		Status:     corev1.PodStatus{Phase: phase},
	})
	if err != nil {
		panic(err)
	}
	return b
}

func decodePod(kv storage.KeyValue) (*corev1.Pod, error) {
	var p corev1.Pod
	if err := json.Unmarshal(kv.Value, &p); err != nil {
		return nil, err
	}
	p.ResourceVersion = strconv.FormatInt(kv.Revision, 10)
	return &p, nil
}

func podAttrs(p *corev1.Pod) (labels.Set, fields.Set, error) {
	return labels.Set(p.Labels), fields.Set{
		"metadata.name":      p.Name,
		"metadata.namespace": p.Namespace,
		"spec.nodeName":      p.Spec.NodeName,
		"status.phase":       string(p.Status.Phase),
	}, nil
}

// scanPod is a Config.Scan of pods: their attributes read without
// handing the cache an object.
func scanPod(kv storage.KeyValue) (Attributes, error) {
	p, err := decodePod(kv)
	if err != nil {
		return Attributes{}, err
	}
	ls, fs, err := podAttrs(p)
	return Attributes{Labels: ls, Fields: fs, UID: string(p.UID), Namespace: p.Namespace}, err
}

// newPodCache starts a pod cache on st, closed at the end of the test.
func newPodCache(t testing.TB, st storage.Interface, mod func(*Config[*corev1.Pod])) *Cache[*corev1.Pod] {
	t.Helper()
	cfg := Config[*corev1.Pod]{Storage: st, Prefix: prefix, Decode: decodePod, Attrs: podAttrs, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	runCache(t, c)
	return c
}

// runCache runs c until the test ends or stop is called, and waits until
// it is ready; stop returns once Run has.
func runCache[T Object](t testing.TB, c *Cache[T]) (stop func()) {
	t.Helper()
	stop = runtest.Start(t, c)
	<-c.Ready()
	return stop
}

func newStore(t testing.TB) *memory.Store {
	st := memory.New()
	t.Cleanup(func() { st.Close() })
	return st
}

// put creates or overwrites a pod and returns the revision.
func put(t testing.TB, st storage.Interface, ns, name string, lbls map[string]string, phase corev1.PodPhase) int64 {
	t.Helper()
	key := podKey(ns, name)
	v := podValue(ns, name, lbls, phase)
	rev, err := st.Create(context.Background(), key, v)
	if err == nil {
		return rev
	}
	rev, err = storage.GuaranteedUpdate(context.Background(), st, key, func(storage.KeyValue) ([]byte, error) { return v, nil })
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return rev
}

func del(t testing.TB, st storage.Interface, ns, name string) int64 {
	t.Helper()
	_, rev, err := st.Delete(context.Background(), podKey(ns, name), 0)
	if err != nil {
		t.Fatalf("delete %s/%s: %v", ns, name, err)
	}
	return rev
}

// ev is an event as tests compare them.
type ev struct {
	Type watch.EventType
	Name string
	RV   string
}

func (e ev) String() string { return fmt.Sprintf("%s %s@%s", e.Type, e.Name, e.RV) }

func toEv(e *Event[*corev1.Pod]) ev {
	return ev{Type: e.Type, Name: e.Object().Namespace + "/" + e.Object().Name, RV: e.Object().ResourceVersion}
}

// next returns the watcher's next event; ok is false when it has ended. It
// waits for the event without a deadline: a missing event fails the test
// by its timeout (or, in a synctest bubble, as a deadlock).
func next(w *Watcher[*corev1.Pod]) (ev, bool) {
	e, ok := <-w.Events()
	if !ok {
		return ev{}, false
	}
	return toEv(e), true
}

// collectUntil reads events until one at revision rev or later (bookmarks
// skipped) and returns them.
func collectUntil(t testing.TB, w *Watcher[*corev1.Pod], rev int64) []ev {
	t.Helper()
	var out []ev
	for {
		e, ok := <-w.Events()
		if !ok {
			t.Fatalf("watch ended before revision %d: %v (got %v)", rev, w.Err(), out)
		}
		if e.Type == watch.Bookmark {
			if e.Revision >= rev {
				return out
			}
			continue
		}
		out = append(out, toEv(e))
		if e.Revision >= rev {
			return out
		}
	}
}

// storageHistory returns every storage event under prefix after rev up to
// and including to, read from a storage watch.
func storageHistory(t testing.TB, st storage.Interface, from, to int64) []storage.Event {
	t.Helper()
	if to <= from {
		return nil
	}
	if from == 0 {
		t.Fatal("storageHistory: storage watches from 0 start now; write before the history begins")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := st.Watch(ctx, prefix, from)
	if err != nil {
		t.Fatalf("storage watch: %v", err)
	}
	defer w.Stop()
	var out []storage.Event
	for e := range w.Events() {
		out = append(out, e)
		if e.KV.Revision >= to {
			return out
		}
	}
	t.Fatalf("storage watch ended: %v", w.Err())
	return nil
}

// faultyStore is memory storage whose watches the test can end with an
// error, a fault memory cannot produce on demand for a watcher that keeps up.
type faultyStore struct {
	*memory.Store
	mu      sync.Mutex
	cur     *faultyWatcher
	watches int
}

func (s *faultyStore) Watch(ctx context.Context, p string, rev int64) (storage.Watcher, error) {
	w, err := s.Store.Watch(ctx, p, rev)
	if err != nil {
		return nil, err
	}
	fw := &faultyWatcher{Watcher: w, out: make(chan storage.Event), kill: make(chan error, 1), hold: make(chan struct{}), stopc: make(chan struct{}), done: make(chan struct{})}
	go fw.pump()
	s.mu.Lock()
	s.cur = fw
	s.watches++
	s.mu.Unlock()
	return fw, nil
}

// hold makes the current watch stop forwarding events, so that writes after
// it reach storage but not the cache; call it while the watch is idle.
func (s *faultyStore) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur.hold <- struct{}{}
}

// fail ends the current watch with err.
func (s *faultyStore) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur.kill <- err
}

func (s *faultyStore) watchCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watches
}

type faultyWatcher struct {
	storage.Watcher
	out   chan storage.Event
	kill  chan error
	hold  chan struct{}
	stopc chan struct{}
	once  sync.Once
	done  chan struct{}
	err   error
}

func (w *faultyWatcher) pump() {
	defer close(w.done)
	defer close(w.out)
	in := w.Watcher.Events()
	for {
		select {
		case <-w.hold:
			in = nil
		case <-w.stopc:
			return
		case err := <-w.kill:
			w.err = err
			w.Watcher.Stop()
			return
		case e, ok := <-in:
			if !ok {
				w.err = w.Watcher.Err()
				return
			}
			select {
			case w.out <- e:
			case <-w.stopc:
				return
			case err := <-w.kill:
				w.err = err
				w.Watcher.Stop()
				return
			}
		}
	}
}

func (w *faultyWatcher) Events() <-chan storage.Event { return w.out }
func (w *faultyWatcher) Err() error                   { <-w.done; return w.err }
func (w *faultyWatcher) Stop() {
	w.once.Do(func() { close(w.stopc) })
	w.Watcher.Stop()
	<-w.done
}

// seen waits, without a deadline, until the cache has seen rev.
func seen[T Object](c *Cache[T], rev int64) {
	for {
		c.mu.Lock()
		cur, advanced := c.rev, c.advanced
		c.mu.Unlock()
		if cur >= rev {
			return
		}
		<-advanced
	}
}

// caughtUp waits until the cache has seen every write in st.
func caughtUp[T Object](t testing.TB, c *Cache[T], st storage.Interface) {
	t.Helper()
	rev, err := st.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen(c, rev)
}
