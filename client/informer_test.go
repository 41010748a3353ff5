package client

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/informers"
)

// fakeAPI is a small API server for pods: lists in pages at the latest
// state, and watches from a resourceVersion, answered from a history that
// can be compacted (a watch from before it gets a 410 ERROR event).
type fakeAPI struct {
	t         *testing.T
	mu        sync.Mutex
	rv        int
	pods      map[string]*corev1.Pod
	history   []recordedEvent
	compacted int
	changed   chan struct{}
	lists     int
	watchRVs  []string
	down      bool // answer every request with 503
}

func (a *fakeAPI) setDown(down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = down
}

func newFakeAPI(t *testing.T, n int) *fakeAPI {
	a := &fakeAPI{t: t, rv: 1, pods: map[string]*corev1.Pod{}, changed: make(chan struct{})}
	for i := range n {
		a.write(cache.EventAdded, makePod(i, 0))
	}
	return a
}

// write applies a change and wakes the watches.
func (a *fakeAPI) write(typ cache.EventType, p *corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	p = p.DeepCopy()
	p.ResourceVersion = strconv.Itoa(a.rv)
	if typ == cache.EventDeleted {
		delete(a.pods, p.Name)
	} else {
		a.pods[p.Name] = p
	}
	a.history = append(a.history, recordedEvent{typ: typ, pod: p})
	close(a.changed)
	a.changed = make(chan struct{})
}

// compact forgets the history up to now.
func (a *fakeAPI) compact() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.compacted = a.rv
	a.history = nil
}

func (a *fakeAPI) counts() (int, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lists, append([]string(nil), a.watchRVs...)
}

func (a *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	proto := wantsProto(r)
	a.mu.Lock()
	down := a.down
	a.mu.Unlock()
	if down {
		writeStatus(w, metav1.Status{Status: metav1.StatusFailure, Code: 503, Reason: metav1.StatusReasonServiceUnavailable})
		return
	}
	if q.Get("watch") == "true" {
		a.watch(w, r, proto)
		return
	}
	a.mu.Lock()
	a.lists++
	names := make([]string, 0, len(a.pods))
	for n := range a.pods {
		names = append(names, n)
	}
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(a.rv)}}
	sortStrings(names)
	start, _ := strconv.Atoi(q.Get("continue"))
	end := len(names)
	if l, _ := strconv.Atoi(q.Get("limit")); l > 0 && start+l < end {
		end = start + l
		list.Continue = strconv.Itoa(end)
	}
	for _, n := range names[start:end] {
		list.Items = append(list.Items, *a.pods[n])
	}
	a.mu.Unlock()
	if proto {
		raw, _ := list.Marshal()
		w.Header().Set("Content-Type", mediaTypeProtobuf)
		w.Write(wrapEnvelope(raw, "v1", "PodList"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(list)
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func (a *fakeAPI) watch(w http.ResponseWriter, r *http.Request, proto bool) {
	from, _ := strconv.Atoi(r.URL.Query().Get("resourceVersion"))
	a.mu.Lock()
	a.watchRVs = append(a.watchRVs, r.URL.Query().Get("resourceVersion"))
	a.mu.Unlock()
	encode := func(ev recordedEvent) []byte {
		if proto {
			return protoFrame(a.t, ev)
		}
		return jsonStream(a.t, []recordedEvent{ev})
	}
	if proto {
		w.Header().Set("Content-Type", mediaTypeProtobuf+";stream=watch")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for {
		a.mu.Lock()
		if from < a.compacted {
			a.mu.Unlock()
			w.Write(encode(recordedEvent{typ: cache.EventError, status: &metav1.Status{Status: metav1.StatusFailure, Code: 410,
				Reason: metav1.StatusReasonExpired, Message: fmt.Sprintf("too old resource version: %d (%d)", from, a.compacted)}}))
			return
		}
		var evs []recordedEvent
		for _, ev := range a.history {
			if rv, _ := strconv.Atoi(ev.pod.ResourceVersion); rv > from {
				evs = append(evs, ev)
			}
		}
		changed := a.changed
		a.mu.Unlock()
		for _, ev := range evs {
			if _, err := w.Write(encode(ev)); err != nil {
				return
			}
			from, _ = strconv.Atoi(ev.pod.ResourceVersion)
		}
		w.(http.Flusher).Flush()
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

// Informers made by the factory with this client as their source sync,
// follow creates, updates and deletes, resume a watch cut mid-stream from
// the last resourceVersion without a relist, and relist after a 410.
func TestInformerThroughFactory(t *testing.T) {
	for _, preferJSON := range []bool{false, true} {
		t.Run(fmt.Sprint("json=", preferJSON), func(t *testing.T) {
			api := newFakeAPI(t, 23)
			srv := startServer(t, api)
			c := newTestClient(t, srv.URL, func(cfg *Config) { cfg.PreferJSON = preferJSON })
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			f := informers.NewSharedInformerFactory(c, informers.Options{Reflector: cache.ReflectorOptions{PageSize: 5, Logger: quiet,
				Backoff: cache.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}}})
			defer f.Shutdown()
			pods := informers.For[*corev1.Pod](f)
			notify := make(chan struct{}, 1)
			poke := func() {
				select {
				case notify <- struct{}{}:
				default:
				}
			}
			if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
				AddFunc:    func(*corev1.Pod, bool) { poke() },
				UpdateFunc: func(_, _ *corev1.Pod) { poke() },
				DeleteFunc: func(*corev1.Pod, bool) { poke() },
			}); err != nil {
				t.Fatal(err)
			}
			f.Start(t.Context())
			for gvr, ok := range f.WaitForCacheSync(t.Context()) {
				if !ok {
					t.Fatalf("%s did not sync", gvr)
				}
			}
			store := pods.GetStore()
			waitFor := func(what string, cond func() bool) {
				t.Helper()
				deadline := time.After(30 * time.Second)
				for !cond() {
					select {
					case <-notify:
					case <-deadline:
						t.Fatalf("informer never saw %s", what)
					}
				}
			}
			has := func(name, rv string) func() bool {
				return func() bool {
					p, ok, _ := store.GetByKey("default/" + name)
					return ok && (rv == "" || p.ResourceVersion == rv)
				}
			}
			if n := len(store.List()); n != 23 {
				t.Fatalf("synced %d pods, want 23", n)
			}
			if p, _, _ := store.GetByKey("default/" + makePod(3, 0).Name); p == nil || len(p.ManagedFields) != 0 || p.Kind != "Pod" {
				t.Fatalf("cached pod %+v: want it typed, with managedFields stripped", p)
			}

			// Creates, updates and deletes.
			api.write(cache.EventAdded, makePod(100, 0))
			upd := makePod(1, 0)
			upd.Labels["tier"] = "gold"
			api.write(cache.EventModified, upd)
			api.write(cache.EventDeleted, makePod(2, 0))
			waitFor("the changes", func() bool {
				p, _, _ := store.GetByKey("default/" + upd.Name)
				return has(makePod(100, 0).Name, "")() && p != nil && p.Labels["tier"] == "gold" && !has(makePod(2, 0).Name, "")()
			})

			// A watch cut mid-stream resumes from the last resourceVersion.
			lists, watches := api.counts()
			srv.CloseClientConnections()
			api.write(cache.EventAdded, makePod(101, 0))
			waitFor("the pod created after the cut", has(makePod(101, 0).Name, ""))
			lists2, watches2 := api.counts()
			if lists2 != lists {
				t.Fatalf("a cut watch made the informer relist (%d lists, then %d)", lists, lists2)
			}
			if len(watches2) <= len(watches) {
				t.Fatalf("no new watch after the cut: %v", watches2)
			}
			// 23 pods (resourceVersions 2 to 24), then 3 changes: 27 is
			// the last resourceVersion the informer saw before the cut.
			if last := watches2[len(watches)]; last != "27" {
				t.Fatalf("re-watch from resourceVersion %q, want the last one seen, 27: %v", last, watches2)
			}

			// Compaction: the re-watch gets 410, and the informer relists.
			// The server is down while the changes are made and compacted,
			// so the re-watch can only come after.
			api.setDown(true)
			srv.CloseClientConnections()
			api.write(cache.EventModified, makePod(5, 0))
			api.write(cache.EventAdded, makePod(102, 0))
			api.compact()
			api.setDown(false)
			waitFor("the pods written after compaction", has(makePod(102, 0).Name, ""))
			lists3, _ := api.counts()
			if lists3 <= lists2 {
				t.Fatalf("no relist after 410 (%d lists)", lists3)
			}
			if n := len(store.List()); n != 25 {
				t.Fatalf("%d pods cached, want 25", n)
			}
		})
	}
}
