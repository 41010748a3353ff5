package client

// Whole-path tests: this client, and informers made by the factory over it,
// against listwatch's own API server on 127.0.0.1, on both storage
// backends, through a proxy that counts requests and can cut watches.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/internal/proptest"
	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/internal/testbackends"
	"github.com/listwatch/listwatch/storage"
)

// backends are the storage backends every whole-path test runs on.
var backends = testbackends.All("client")

// realAPI is one of listwatch's API servers on 127.0.0.1, and a proxy in
// front of it.
type realAPI struct {
	st     storage.Interface
	direct string // the server's URL
	proxy  *cutProxy
	url    string // the proxy's URL
}

func startRealAPI(t *testing.T, st storage.Interface, wc apiserver.WatchCacheConfig) *realAPI {
	t.Helper()
	srv, err := apiserver.New(apiserver.Config{Storage: st, WatchCache: wc,
		// No controller-manager makes the default service accounts: as
		// kube's integration tests and envtest, ServiceAccount admission
		// is off on this bare API server.
		DisableAdmissionPlugins: []string{"ServiceAccount"}})
	if err != nil {
		t.Fatal(err)
	}
	stop := runtest.Start(t, srv)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		stop()
	})
	p := newCutProxy(t, hs.URL)
	ps := httptest.NewServer(p)
	t.Cleanup(func() {
		ps.CloseClientConnections()
		ps.Close()
		p.tr.CloseIdleConnections()
	})
	a := &realAPI{st: st, direct: hs.URL, proxy: p, url: ps.URL}
	// The server makes "default" at start, as kube-apiserver does; the
	// test may come first.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := NewResource[*corev1.Namespace](a.client(t, false, false), nsGVR, "").Create(t.Context(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return a
}

var nsGVR = corev1.SchemeGroupVersion.WithResource("namespaces")

// client returns a client of the server, through the proxy or not.
func (a *realAPI) client(t *testing.T, viaProxy, preferJSON bool) *Client {
	u := a.direct
	if viaProxy {
		u = a.url
	}
	c := newTestClient(t, u, func(cfg *Config) { cfg.PreferJSON = preferJSON })
	t.Cleanup(c.hc.CloseIdleConnections)
	return c
}

// cutProxy forwards requests to an API server, counts lists and watches,
// and cuts watch streams in the middle of an event when told to. While
// down, it answers 503.
type cutProxy struct {
	t        *testing.T
	upstream *url.URL
	tr       *http.Transport

	mu        sync.Mutex
	lists     int          // GETs of a collection that are not watches
	watchRVs  []string     // the resourceVersion of each watch
	watchQs   []url.Values // the query of each watch
	cutAfter  int          // events to let through before the next cut; < 0: none
	down      bool
	expired   int // watches answered with 410 Expired
	streams   map[int]context.CancelFunc
	nextID    int
	protoSeen bool // a watch was served as protobuf
}

func newCutProxy(t *testing.T, upstream string) *cutProxy {
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	return &cutProxy{t: t, upstream: u, tr: &http.Transport{}, cutAfter: -1, streams: map[int]context.CancelFunc{}}
}

// cut arms a cut of the next watch stream after n more events.
func (p *cutProxy) cut(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutAfter = n
}

// setDown makes the proxy refuse every request (down) and drop the open
// streams, or serve again.
func (p *cutProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for _, cancel := range p.streams {
			cancel()
		}
	}
}

type proxyCounts struct {
	lists    int
	watchRVs []string
	watchQs  []url.Values
	expired  int
}

func (p *cutProxy) counts() proxyCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return proxyCounts{lists: p.lists, watchRVs: slices.Clone(p.watchRVs), watchQs: slices.Clone(p.watchQs), expired: p.expired}
}

func (p *cutProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	watch := r.URL.Query().Get("watch") == "true"
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		writeStatus(w, metav1.Status{Status: metav1.StatusFailure, Code: 503, Reason: metav1.StatusReasonServiceUnavailable, Message: "proxy down"})
		return
	}
	isCollection := r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/pods")
	switch {
	case watch:
		p.watchRVs = append(p.watchRVs, r.URL.Query().Get("resourceVersion"))
		p.watchQs = append(p.watchQs, r.URL.Query())
	case isCollection:
		p.lists++
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id := p.nextID
	p.nextID++
	p.streams[id] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.streams, id)
		p.mu.Unlock()
	}()

	u := *p.upstream
	u.Path, u.RawPath, u.RawQuery = r.URL.Path, r.URL.RawPath, r.URL.RawQuery
	out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.ContentLength = r.ContentLength
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if !watch || resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	p.relay(ctx, w, resp)
}

// relay passes a watch stream on event by event, so that it can be cut
// between two bytes of one.
func (p *cutProxy) relay(ctx context.Context, w http.ResponseWriter, resp *http.Response) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	proto := isProtobuf(resp.Header.Get("Content-Type"))
	if proto {
		p.mu.Lock()
		p.protoSeen = true
		p.mu.Unlock()
	}
	br := bufio.NewReader(resp.Body)
	for ctx.Err() == nil {
		ev, err := readFrame(br, proto)
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cutAfter == 0
		if p.cutAfter > 0 {
			p.cutAfter--
		}
		if cut {
			p.cutAfter = -1
		}
		if bytes.Contains(ev, []byte("Expired")) {
			p.expired++
		}
		p.mu.Unlock()
		if cut {
			// Half an event, then the connection goes: the client must
			// neither apply nor skip it, and resume before it.
			_, _ = w.Write(ev[:len(ev)/2])
			_ = rc.Flush()
			panic(http.ErrAbortHandler)
		}
		if _, err := w.Write(ev); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// readFrame reads one watch event as sent: a JSON line, or a
// length-prefixed protobuf frame with its prefix.
func readFrame(br *bufio.Reader, proto bool) ([]byte, error) {
	if !proto {
		return br.ReadBytes('\n')
	}
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, err
	}
	ev := make([]byte, 4+binary.BigEndian.Uint32(hdr[:]))
	copy(ev, hdr[:])
	if _, err := io.ReadFull(br, ev[4:]); err != nil {
		return nil, err
	}
	return ev, nil
}

// eventually polls cond until it holds, or fails the test after a while.
func eventually(t *testing.T, what string, cond func() bool, state ...func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, s := range state {
				b.WriteString("\n")
				b.WriteString(s())
			}
			t.Fatalf("timed out waiting for %s%s", what, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// serverPods returns name → resourceVersion of the pods the server has.
func serverPods(t *testing.T, pods *Resource[*corev1.Pod]) map[string]string {
	t.Helper()
	l, err := pods.ListAll(t.Context(), metav1.ListOptions{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	return rvs(l.Items)
}

func rvs(items []*corev1.Pod) map[string]string {
	m := make(map[string]string, len(items))
	for _, p := range items {
		m[p.Name] = p.ResourceVersion
	}
	return m
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// tracker is the state an informer's handler sees: name → resourceVersion
// built from the adds, updates and deletes it is told.
type tracker struct {
	mu   sync.Mutex
	pods map[string]string
	errs []string
}

func (tr *tracker) handler() cache.ResourceEventHandlerFuncs[*corev1.Pod] {
	return cache.ResourceEventHandlerFuncs[*corev1.Pod]{
		AddFunc: func(p *corev1.Pod, _ bool) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			if _, ok := tr.pods[p.Name]; ok {
				tr.errs = append(tr.errs, "add of a cached pod "+p.Name)
			}
			tr.pods[p.Name] = p.ResourceVersion
		},
		UpdateFunc: func(old, p *corev1.Pod) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			if tr.pods[old.Name] != old.ResourceVersion {
				tr.errs = append(tr.errs, fmt.Sprintf("update of %s from %s, handler saw %s", old.Name, old.ResourceVersion, tr.pods[old.Name]))
			}
			tr.pods[p.Name] = p.ResourceVersion
		},
		DeleteFunc: func(p *corev1.Pod, _ bool) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			if _, ok := tr.pods[p.Name]; !ok {
				tr.errs = append(tr.errs, "delete of an unknown pod "+p.Name)
			}
			delete(tr.pods, p.Name)
		},
	}
}

func (tr *tracker) snapshot() (map[string]string, []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	m := make(map[string]string, len(tr.pods))
	for k, v := range tr.pods {
		m[k] = v
	}
	return m, slices.Clone(tr.errs)
}

var quietLog = slog.New(slog.DiscardHandler)

// startPodInformer starts a factory over c, listing in pages (not
// streaming), and its pods informer with tr's handler, and waits for the
// sync.
func startPodInformer(t *testing.T, c *Client, pageSize int64, tr *tracker) *cache.SharedIndexInformer[*corev1.Pod] {
	t.Helper()
	return startPodInformerWith(t, c, cache.ReflectorOptions{PageSize: pageSize, DisableWatchList: true}, tr)
}

// startPodInformerWith is startPodInformer with the reflector options ro,
// quiet and with short backoffs.
func startPodInformerWith(t *testing.T, c *Client, ro cache.ReflectorOptions, tr *tracker) *cache.SharedIndexInformer[*corev1.Pod] {
	t.Helper()
	ro.Logger = quietLog
	ro.Backoff = cache.Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond}
	f := informers.NewSharedInformerFactory(c, informers.Options{Reflector: ro})
	t.Cleanup(f.Shutdown)
	pods := informers.For[*corev1.Pod](f)
	if tr != nil {
		if _, err := pods.AddEventHandler(tr.handler()); err != nil {
			t.Fatal(err)
		}
	}
	f.Start(t.Context())
	for gvr, ok := range f.WaitForCacheSync(t.Context()) {
		if !ok {
			t.Fatalf("%s did not sync", gvr)
		}
	}
	return pods.SharedIndexInformer
}

func pages(n int, size int64) int {
	if n == 0 {
		return 1
	}
	return (n + int(size) - 1) / int(size)
}

func newPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
}

// Over a random history of creates, updates, deletes and watches cut
// mid-event, an informer made by the factory syncs through pages, its
// cache and its handler's view end equal to the server's list, and no cut
// ever makes it relist.
func TestAPIServerInformerRandomHistory(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			proptest.ForEachSeedRealTime(t, 6, func(t *testing.T, seed uint64) {
				rng := rand.New(rand.NewPCG(seed, 0x5eed))
				api := startRealAPI(t, b.New(t), apiserver.WatchCacheConfig{BookmarkInterval: 50 * time.Millisecond})
				preferJSON := seed%2 == 0
				direct := NewResource[*corev1.Pod](api.client(t, false, false), podsGVR, "default")
				live := map[string]*corev1.Pod{}
				var names []string
				next := 0
				create := func() {
					p, err := direct.Create(t.Context(), newPod(fmt.Sprintf("p%03d", next)), metav1.CreateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					next++
					live[p.Name] = p
					names = append(names, p.Name)
				}
				n := rng.IntN(40)
				for range n {
					create()
				}
				pageSize := int64(1 + rng.IntN(9))
				tr := &tracker{pods: map[string]string{}}
				inf := startPodInformer(t, api.client(t, true, preferJSON), pageSize, tr)
				// A list at resourceVersion 0 may be served from a cache a little
				// behind the writes, so the pages are not known in advance; but
				// there must be no list after these.
				syncLists := api.proxy.counts().lists
				if syncLists < 1 || syncLists > pages(n, pageSize) {
					t.Fatalf("initial sync of %d pods in pages of %d: %d lists", n, pageSize, syncLists)
				}
				for range 60 {
					switch op := rng.IntN(10); {
					case op < 3 || len(names) == 0:
						create()
					case op < 6:
						name := names[rng.IntN(len(names))]
						p := live[name].DeepCopy()
						p.Labels["gen"] = strconv.Itoa(rng.IntN(1000))
						p, err := direct.Update(t.Context(), p, metav1.UpdateOptions{})
						if err != nil {
							t.Fatal(err)
						}
						live[name] = p
					case op < 8:
						i := rng.IntN(len(names))
						if err := direct.Delete(t.Context(), names[i], metav1.DeleteOptions{}); err != nil {
							t.Fatal(err)
						}
						delete(live, names[i])
						names = slices.Delete(names, i, i+1)
					default:
						api.proxy.cut(rng.IntN(4))
					}
				}
				want := serverPods(t, direct)
				if len(want) != len(live) {
					t.Fatalf("server has %d pods, the history left %d", len(want), len(live))
				}
				eventually(t, "the informer to catch up with the server", func() bool {
					got, _ := tr.snapshot()
					return mapsEqual(rvs(inf.GetStore().List()), want) && mapsEqual(got, want)
				})
				if _, errs := tr.snapshot(); len(errs) > 0 {
					t.Fatalf("handler saw impossible notifications: %v", errs)
				}
				c := api.proxy.counts()
				if c.lists != syncLists {
					t.Fatalf("%d lists after the history, want only the initial %d: cut watches must resume, not relist (watches from %v)", c.lists, syncLists, c.watchRVs)
				}
				for i, rv := range c.watchRVs {
					if rv == "" || rv == "0" {
						t.Fatalf("watch %d from resourceVersion %q: every watch must resume from one seen", i, rv)
					}
				}
				if !preferJSON && !api.proxy.protoSeen {
					t.Fatal("the watches were not protobuf")
				}
			})
		})
	}
}

// ListAll follows the continue tokens across many pages, each a request,
// and returns every object once, in order.
func TestAPIServerPaging(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			api := startRealAPI(t, b.New(t), apiserver.WatchCacheConfig{})
			direct := NewResource[*corev1.Pod](api.client(t, false, false), podsGVR, "default")
			const n = 103
			for i := range n {
				if _, err := direct.Create(t.Context(), newPod(fmt.Sprintf("pod-%03d", i)), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for _, tt := range []struct {
				name  string
				json  bool
				limit int64
			}{{"protobuf", false, 7}, {"json", true, 10}, {"one page", false, 500}} {
				t.Run(tt.name, func(t *testing.T) {
					before := api.proxy.counts().lists
					pods := NewResource[*corev1.Pod](api.client(t, true, tt.json), podsGVR, "default")
					l, err := pods.ListAll(t.Context(), metav1.ListOptions{Limit: tt.limit})
					if err != nil {
						t.Fatal(err)
					}
					if got, want := api.proxy.counts().lists-before, pages(n, tt.limit); got != want {
						t.Errorf("%d requests, want %d pages", got, want)
					}
					if len(l.Items) != n {
						t.Fatalf("%d pods, want %d", len(l.Items), n)
					}
					for i, p := range l.Items {
						if want := fmt.Sprintf("pod-%03d", i); p.Name != want || p.Kind != "Pod" {
							t.Fatalf("item %d is %s %s, want Pod %s", i, p.Kind, p.Name, want)
						}
					}
					if l.ResourceVersion == "" || l.Continue != "" {
						t.Errorf("list resourceVersion %q continue %q", l.ResourceVersion, l.Continue)
					}
				})
			}
		})
	}
}

// A watch cut in the middle of an event resumes from the resourceVersion of
// the last whole event, without a relist; then, after the server compacted
// past that resourceVersion, the re-watch gets 410 Expired and the informer
// relists.
func TestAPIServerWatchCutAndCompaction(t *testing.T) {
	for _, b := range backends {
		for _, preferJSON := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/json=%v", b.Name, preferJSON), func(t *testing.T) {
				// No periodic bookmarks, so that the events counted are the
				// writes; a small window, so that compaction is felt.
				api := startRealAPI(t, b.New(t), apiserver.WatchCacheConfig{BookmarkInterval: time.Hour, WindowSize: 8})
				direct := NewResource[*corev1.Pod](api.client(t, false, false), podsGVR, "default")
				for i := range 5 {
					if _, err := direct.Create(t.Context(), newPod(fmt.Sprintf("a%d", i)), metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				tr := &tracker{pods: map[string]string{}}
				// Paged, as the first list is: the relist after the 410 must
				// still converge (it goes unpaged, "not older than").
				inf := startPodInformer(t, api.client(t, true, preferJSON), 2, tr)
				eventually(t, "the first watch", func() bool { return len(api.proxy.counts().watchRVs) == 1 })
				synced := api.proxy.counts()
				// 5 pods in pages of 2: up to 3 requests (fewer when the
				// server answers resourceVersion "0" from its cache in
				// larger pages, which a limit allows).
				if synced.lists < 1 || synced.lists > 3 {
					t.Fatalf("sync: %d list requests, want 1 to 3", synced.lists)
				}

				// A list served from the watch cache may be a little behind
				// the writes, and the watch then brings the rest: let those
				// events through before counting, or the cut would count
				// them too.
				synced5 := serverPods(t, direct)
				eventually(t, "the pods written before the sync", func() bool { return mapsEqual(rvs(inf.GetStore().List()), synced5) })

				// Cut after 3 events, in the middle of the 4th.
				api.proxy.cut(3)
				var written []string
				for i := range 6 {
					p, err := direct.Create(t.Context(), newPod(fmt.Sprintf("b%d", i)), metav1.CreateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					written = append(written, p.ResourceVersion)
				}
				want := serverPods(t, direct)
				eventually(t, "the writes after the cut", func() bool { return mapsEqual(rvs(inf.GetStore().List()), want) })
				cut := api.proxy.counts()
				if cut.lists != synced.lists {
					t.Fatalf("the cut made the informer relist: %d lists, then %d", synced.lists, cut.lists)
				}
				if len(cut.watchRVs) != 2 || cut.watchRVs[1] != written[2] {
					t.Fatalf("watches from %v; want a re-watch from %s, the resourceVersion of the 3rd event, the last whole one", cut.watchRVs, written[2])
				}

				// Down, the informer's watch dropped; meanwhile more writes
				// than the window holds, and a compaction of storage.
				api.proxy.setDown(true)
				for i := range 12 {
					if _, err := direct.Create(t.Context(), newPod(fmt.Sprintf("c%02d", i)), metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				if err := direct.Delete(t.Context(), "a0", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				rev, err := api.st.Revision(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if err := api.st.Compact(t.Context(), rev); err != nil {
					t.Fatal(err)
				}
				api.proxy.setDown(false)
				want = serverPods(t, direct)
				eventually(t, "the relist after compaction", func() bool {
					got, _ := tr.snapshot()
					return mapsEqual(rvs(inf.GetStore().List()), want) && mapsEqual(got, want)
				}, func() string {
					got, _ := tr.snapshot()
					return fmt.Sprintf("proxy %+v\nserver %v\nstore %v\nhandler %v", api.proxy.counts(), want, rvs(inf.GetStore().List()), got)
				})
				after := api.proxy.counts()
				if after.expired == 0 {
					t.Errorf("no watch was answered 410 Expired (watches from %v)", after.watchRVs)
				}
				// One unpaged relist at the last resourceVersion ("not older
				// than", from the watch cache): a paged one would ask for
				// that exact, compacted version and be refused or loop.
				if after.lists != cut.lists+1 {
					t.Errorf("relist after 410: %d list requests, want %d", after.lists-cut.lists, 1)
				}
				if _, errs := tr.snapshot(); len(errs) > 0 {
					t.Fatalf("handler saw impossible notifications: %v", errs)
				}
			})
		}
	}
}

// A protobuf watch and a JSON watch of the same resource from the same
// resourceVersion see the same events, with equal objects.
func TestAPIServerProtobufAndJSONWatchesAgree(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			api := startRealAPI(t, b.New(t), apiserver.WatchCacheConfig{BookmarkInterval: time.Hour})
			direct := NewResource[*corev1.Pod](api.client(t, false, false), podsGVR, "default")
			first, err := direct.Create(t.Context(), newPod("w0"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			watch := func(json bool) cache.Watcher[*corev1.Pod] {
				r := NewResource[*corev1.Pod](api.client(t, true, json), podsGVR, "default")
				w, err := r.Watch(t.Context(), metav1.ListOptions{ResourceVersion: first.ResourceVersion})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(w.Stop)
				return w
			}
			pw, jw := watch(false), watch(true)
			// Every kind of change, with content of every sort: nested
			// structs, maps, quantities, times, a status.
			p1 := newPod("w1")
			p1.Annotations = map[string]string{"note": "ünïcode \"quoted\" \\ <tag>"}
			p1.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: mustQuantity(t, "250m"), corev1.ResourceMemory: mustQuantity(t, "64Mi")}
			p1.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "EMPTY"}}
			p1, err = direct.Create(t.Context(), p1, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p1.Labels["tier"] = "gold"
			if p1, err = direct.Update(t.Context(), p1, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			p1.Status.Phase = corev1.PodRunning
			p1.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(1700000000, 0))}}
			if _, err := direct.UpdateStatus(t.Context(), p1, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := direct.Patch(t.Context(), "w0", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"patched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := direct.Delete(t.Context(), "w1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := direct.Delete(t.Context(), "w0", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			// Each delete of a pod is graceful, as in kube-apiserver: the
			// pod is written with its deletionTimestamp (MODIFIED), then
			// removed (DELETED).
			wantTypes := []cache.EventType{cache.EventAdded, cache.EventModified, cache.EventModified, cache.EventModified,
				cache.EventModified, cache.EventDeleted, cache.EventModified, cache.EventDeleted}
			read := func(w cache.Watcher[*corev1.Pod]) []cache.Event[*corev1.Pod] {
				var evs []cache.Event[*corev1.Pod]
				for range wantTypes {
					ev, err := w.Next()
					if err != nil {
						t.Fatalf("after %d events: %v", len(evs), err)
					}
					evs = append(evs, ev)
				}
				return evs
			}
			pevs, jevs := read(pw), read(jw)
			if !api.proxy.protoSeen {
				t.Fatal("the protobuf watch was served as JSON")
			}
			for i := range wantTypes {
				p, j := pevs[i], jevs[i]
				if p.Type != wantTypes[i] || j.Type != wantTypes[i] {
					t.Errorf("event %d: protobuf %s, JSON %s, want %s", i, p.Type, j.Type, wantTypes[i])
				}
				if !apiequality.Semantic.DeepEqual(p.Object, j.Object) {
					t.Errorf("event %d (%s %s): objects differ\nprotobuf: %+v\njson:     %+v", i, p.Type, p.Object.GetName(), p.Object, j.Object)
				}
				if p.Object.GetResourceVersion() == "" || p.Object.Kind != "Pod" {
					t.Errorf("event %d: resourceVersion %q kind %q", i, p.Object.GetResourceVersion(), p.Object.Kind)
				}
			}
		})
	}
}

func mustQuantity(t *testing.T, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
