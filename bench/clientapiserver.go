package main

// The client-sync and client-events workloads end to end against
// listwatch's own API server (memory storage, HTTP on 127.0.0.1), for
// listwatch's client and informer and client-go's clientset and informer,
// each with its defaults, in JSON and in protobuf.
//
// The API server runs in a child process: this same binary, started with
// apiserverChildEnv set. In one process its watch cache (hundreds of
// megabytes of decoded objects and their memoized encodings) would count
// in the client's heap per cached pod, and its collections would slow the
// client's; in its own process only the CPU is shared, as on a machine
// that runs both. The child seeds its storage with the realistic pods of
// pods.go, stored as the API server stores them (JSON under
// apiserver.StorageKey), and serves them with an API
// server it starts over that storage, afresh for each events run; after
// each of its own steps it collects its garbage, so that its collector
// does not run on a core of the measure that follows.
//
// Sync: from the informer's start until it has synced (listwatch lists;
// client-go streams the list as a watch with sendInitialEvents), against a
// server that has listed the pods in that encoding before, as a running
// API server has: the watch cache memoizes each object's encoding, so
// every run pays the server's framing and transport but not its first
// encoding of the pods, which would go to whichever run came first.
//
// Events: once the informer has synced and its watch is open, the child
// holds every write to watch responses, writes the updates to storage,
// waits until the watch cache has them all (its window and each watcher's
// buffer hold them, so no watcher is cut off as too slow) and reads them
// once through a watch of its own in the encoding measured, as any other
// watcher of pods would have: the events' encodings are memoized, as for
// sync. The clock runs from the opening of the gate until the handler has
// seen every pod's last update.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/internal/kubelog"
	"github.com/listwatch/listwatch/storage/memory"
)

// apiserverChildEnv, when set ("pods seed keep"), makes this binary the
// API server of the client-apiserver workloads instead of the bench.
const apiserverChildEnv = "LISTWATCH_BENCH_APISERVER"

func init() {
	if spec := os.Getenv(apiserverChildEnv); spec != "" {
		// The child starts here, before main routes klog.
		kubelog.ToStderr()
		os.Exit(runAPIServerChild(spec))
	}
	register("client-apiserver-sync-100k", func(cfg config) ([]Row, error) {
		return benchAPIServerSync("client-apiserver-sync-%s-100k", sizeFor(cfg, 100_000, 2_000))
	})
	for _, enc := range []string{"json", "protobuf"} {
		name := "client-apiserver-events-" + enc
		register(name, func(cfg config) ([]Row, error) {
			return benchAPIServerEvents(name, enc, sizeFor(cfg, 20_000, 2_000))
		})
	}
}

// sizeFor is full for a full run and quick for a quick one: less
// than a tenth, since the server's own work (seeding, watch cache, the
// encoding of each event) takes longer than the clients'.
func sizeFor(cfg config, full, quick int) int {
	if cfg.scale > 1 {
		return quick
	}
	return full
}

// benchAPIServerSync measures both encodings on one server, seeded once:
// the rows of encoding enc go to workload fmt.Sprintf(nameFormat, enc).
func benchAPIServerSync(nameFormat string, n int) ([]Row, error) {
	child, err := startAPIChild(n, 42, false)
	if err != nil {
		return nil, err
	}
	defer child.close()
	if _, err := child.call("/bench/fresh", nil); err != nil {
		return nil, err
	}
	var rows []Row
	for _, enc := range []string{"json", "protobuf"} {
		proto := enc == "protobuf"
		if _, err := child.call("/bench/warm", map[string]string{"protobuf": strconv.FormatBool(proto)}); err != nil {
			return nil, err
		}
		for _, impl := range []string{implListwatch, implClientGo} {
			if _, err := child.call("/bench/gc", nil); err != nil {
				return nil, err
			}
			r, err := measureSync(fmt.Sprintf(nameFormat, enc), impl, child.url, proto, n)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r...)
		}
	}
	return rows, nil
}

func benchAPIServerEvents(name, enc string, updates int) ([]Row, error) {
	const pods, seed = 1000, 7
	list, _ := buildPods(pods, seed) // the child's pods: for their names
	child, err := startAPIChild(pods, seed, true)
	if err != nil {
		return nil, err
	}
	defer child.close()
	var rows []Row
	for run, impl := range []string{implListwatch, implClientGo} {
		tag := "r" + strconv.Itoa(run) + "-"
		room := strconv.Itoa(updates + 1000)
		if _, err := child.call("/bench/fresh", map[string]string{"window": room, "buffer": room}); err != nil {
			return nil, err
		}
		prepare := func() error {
			// The informer's watch must be open, registered with the watch
			// cache, before the gate is armed and the updates written.
			deadline := time.Now().Add(time.Minute)
			for {
				s, err := child.call("/bench/watching", nil)
				if err != nil {
					return err
				}
				if s != "0" {
					break
				}
				if time.Now().After(deadline) {
					return errors.New("the informer opened no watch")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if _, err := child.call("/bench/arm", nil); err != nil {
				return err
			}
			_, err := child.call("/bench/update", map[string]string{"n": strconv.Itoa(updates), "tag": tag, "protobuf": strconv.FormatBool(enc == "protobuf")})
			return err
		}
		open := func() error {
			_, err := child.call("/bench/open", nil)
			return err
		}
		elapsed, mallocs, err := measureEvents(impl, child.url, enc == "protobuf", finalRevs(list, updates, tag), prepare, open)
		if err != nil {
			return nil, err
		}
		rows = append(rows,
			Row{name, impl, "watch events into informer (1 handler)", float64(updates) / elapsed.Seconds(), "events/s"},
			Row{name, impl, "client allocs per event", float64(mallocs) / float64(updates), "allocs"})
	}
	return rows, nil
}

// apiChild is the API server child process, seen from the bench.
type apiChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
	hc    *http.Client
}

// startAPIChild starts the child with pods pods of buildPods(pods, seed),
// kept in the child for /bench/update when keep is set, and returns once
// it serves.
func startAPIChild(pods int, seed uint64, keep bool) (*apiChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %t", apiserverChildEnv, pods, seed, keep))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &apiChild{cmd: cmd, stdin: stdin, hc: &http.Client{Transport: &http.Transport{}}}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		c.close()
		return nil, fmt.Errorf("API server child: %w", err)
	}
	c.url = strings.TrimSpace(line)
	return c, nil
}

// call posts to one of the child's control endpoints and returns its
// answer.
func (c *apiChild) call(path string, params map[string]string) (string, error) {
	q := make([]string, 0, len(params))
	for k, v := range params {
		q = append(q, k+"="+v)
	}
	resp, err := c.hc.Post(c.url+path+"?"+strings.Join(q, "&"), "text/plain", nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("API server child: %s: %s", path, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// close ends the child: it exits when its stdin closes, and is killed if
// it has not within a few seconds.
func (c *apiChild) close() {
	c.hc.CloseIdleConnections()
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// runAPIServerChild is the child's main: it serves until its stdin
// closes.
func runAPIServerChild(spec string) int {
	var n int
	var seed uint64
	var keep bool
	if _, err := fmt.Sscanf(spec, "%d %d %t", &n, &seed, &keep); err != nil {
		fmt.Fprintf(os.Stderr, "bench API server: bad %s %q: %v\n", apiserverChildEnv, spec, err)
		return 2
	}
	s, err := newChildServer(n, seed, keep)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench API server: %v\n", err)
		return 1
	}
	fmt.Println(s.url)
	_, _ = io.Copy(io.Discard, os.Stdin)
	s.close()
	return 0
}

// childServer is listwatch's API server over a memory store seeded with
// pods, behind a gate that can hold the writes to watch responses, and the
// control endpoints under /bench/.
type childServer struct {
	ctx   context.Context
	store *memory.Store
	url   string
	hs    *http.Server
	// pods, their storage keys and revisions, for /bench/update.
	pods []corev1.Pod
	keys []string
	revs []int64

	mu       sync.Mutex // serializes the control endpoints
	api      *apiserver.Server
	stopAPI  func() // ends api's Run and waits for it
	handler  atomic.Pointer[http.Handler]
	gate     watchGate
	watching atomic.Int64
}

func podKey(p *corev1.Pod) string { return apiserver.StorageKey("", "pods", p.Namespace, p.Name) }

func newChildServer(n int, seed uint64, keep bool) (*childServer, error) {
	ctx := context.Background()
	s := &childServer{ctx: ctx, store: memory.New()}
	list, _ := buildPods(n, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	namespaces := map[string]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		if !namespaces[p.Namespace] {
			namespaces[p.Namespace] = true
			ns := corev1.Namespace{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
				ObjectMeta: metav1.ObjectMeta{Name: p.Namespace, UID: uid(rng), CreationTimestamp: p.CreationTimestamp},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
			}
			if _, err := s.put(apiserver.StorageKey("", "namespaces", "", p.Namespace), &ns, 0); err != nil {
				return nil, err
			}
		}
		rev, err := s.put(podKey(p), p, 0)
		if err != nil {
			return nil, err
		}
		if keep {
			s.keys = append(s.keys, podKey(p))
			s.revs = append(s.revs, rev)
		}
	}
	if keep {
		s.pods = list.Items
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.url = "http://" + ln.Addr().String()
	s.hs = &http.Server{Handler: s, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = s.hs.Serve(ln) }()
	return s, nil
}

// put stores obj under key as the API server stores objects (JSON without
// a resourceVersion): created when rev is 0, else updated from rev.
func (s *childServer) put(key string, obj metav1.Object, rev int64) (int64, error) {
	obj.SetResourceVersion("")
	b, err := json.Marshal(obj)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		return s.store.Create(s.ctx, key, b)
	}
	return s.store.Update(s.ctx, key, b, rev)
}

func (s *childServer) close() {
	s.gate.open()
	_ = s.hs.Close()
	if s.api != nil {
		s.stopAPI()
	}
	_ = s.store.Close()
}

func (s *childServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/bench/") {
		s.control(w, r)
		return
	}
	h := s.handler.Load()
	if h == nil {
		http.Error(w, "no API server yet", http.StatusServiceUnavailable)
		return
	}
	if v := r.URL.Query().Get("watch"); v == "true" || v == "1" {
		w = &gatedWriter{ResponseWriter: w, ctx: r.Context(), s: s}
	}
	(*h).ServeHTTP(w, r)
}

func (s *childServer) control(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := r.URL.Query()
	var answer string
	var err error
	switch r.URL.Path {
	case "/bench/fresh":
		err = s.fresh(atoiOr(q.Get("window"), 0), atoiOr(q.Get("buffer"), 0))
	case "/bench/watching":
		answer = strconv.FormatInt(s.watching.Load(), 10)
	case "/bench/arm":
		s.gate.arm()
	case "/bench/open":
		s.gate.open()
	case "/bench/gc":
		// Only the collection below.
	case "/bench/warm":
		err = s.warm(q.Get("protobuf") == "true")
	case "/bench/update":
		var rev int64
		rev, err = s.update(atoiOr(q.Get("n"), 0), q.Get("tag"), q.Get("protobuf") == "true")
		answer = strconv.FormatInt(rev, 10)
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if r.URL.Path != "/bench/watching" {
		// A collection of the garbage of what was just done would
		// otherwise run on a core of the measure that follows.
		runtime.GC()
	}
	_, _ = io.WriteString(w, answer)
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

// fresh replaces the API server by a new one, whose watch cache lists the
// storage afresh; the history before is compacted away.
func (s *childServer) fresh(window, buffer int) error {
	s.gate.open()
	if s.api != nil {
		s.stopAPI()
		s.api = nil
	}
	rev, err := s.store.Revision(s.ctx)
	if err != nil {
		return err
	}
	if err := s.store.Compact(s.ctx, rev); err != nil {
		return err
	}
	api, err := apiserver.New(apiserver.Config{Storage: s.store, WatchCache: apiserver.WatchCacheConfig{WindowSize: window, WatcherBuffer: buffer},
		// No service account controller runs in the bench: as envtest,
		// ServiceAccount admission is off.
		DisableAdmissionPlugins: []string{"ServiceAccount"}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(s.ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		if err := api.Run(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "bench: API server: %v\n", err)
		}
	}()
	s.api, s.stopAPI = api, func() { cancel(); <-ran }
	h := api.Handler()
	s.handler.Store(&h)
	s.watching.Store(0)
	return nil
}

// warm lists every pod in one encoding, as a client would, and discards
// the answer: the watch cache memoizes each object's encoding, so a list or
// a watch that sends them again pays for framing and transport only.
func (s *childServer) warm(protobuf bool) error {
	if s.api == nil {
		return errors.New("no API server")
	}
	r := httptest.NewRequest(http.MethodGet, "/api/v1/pods?resourceVersion=0", nil)
	if protobuf {
		r.Header.Set("Accept", protoMediaType)
	}
	w := &discardWriter{header: http.Header{}, code: http.StatusOK}
	s.api.Handler().ServeHTTP(w, r)
	if w.code != http.StatusOK || w.n == 0 {
		return fmt.Errorf("warming list: status %d, %d bytes", w.code, w.n)
	}
	return nil
}

// discardWriter is a ResponseWriter that keeps only the status and the
// length of the body.
type discardWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }

// Flush is what the watch handler's http.ResponseController needs.
func (w *discardWriter) Flush() {}

// update writes n updates of the kept pods in turn, update i setting the
// pod's "rev" label to tag then i, waits until the watch cache has seen
// the last, and then reads them all through a watch in one encoding, as
// an earlier watcher would have: the events' encodings are memoized.
func (s *childServer) update(n int, tag string, protobuf bool) (int64, error) {
	if len(s.pods) == 0 || s.api == nil {
		return 0, errors.New("no pods kept, or no API server")
	}
	before, err := s.store.Revision(s.ctx)
	if err != nil {
		return 0, err
	}
	var last int64
	for i := range n {
		k := i % len(s.pods)
		p := s.pods[k]
		p.Labels = maps.Clone(p.Labels)
		p.Labels["rev"] = tag + strconv.Itoa(i)
		rev, err := s.put(s.keys[k], &p, s.revs[k])
		if err != nil {
			return 0, err
		}
		s.revs[k], last = rev, rev
	}
	// A list at resourceVersion 0 is served by the watch cache, at the
	// revision it has reached.
	path := "/api/v1/namespaces/" + s.pods[0].Namespace + "/pods?resourceVersion=0"
	deadline := time.Now().Add(5 * time.Minute)
	for {
		rec := httptest.NewRecorder()
		s.api.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var l struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil {
			return 0, fmt.Errorf("list: %d: %w", rec.Code, err)
		}
		rv := l.Metadata.ResourceVersion
		if n, _ := strconv.ParseInt(rv, 10, 64); n >= last {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the watch cache is at %s, not %d", rv, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
	defer cancel()
	r := httptest.NewRequest(http.MethodGet, "/api/v1/pods?watch=true&resourceVersion="+strconv.FormatInt(before, 10), nil).WithContext(ctx)
	w := &eventCounter{discardWriter: discardWriter{header: http.Header{}, code: http.StatusOK}, protobuf: protobuf, want: n, done: cancel}
	if protobuf {
		r.Header.Set("Accept", protoMediaType)
	}
	s.api.Handler().ServeHTTP(w, r)
	if w.events < n {
		return 0, fmt.Errorf("warming watch: status %d, %d events of %d", w.code, w.events, n)
	}
	return last, nil
}

// eventCounter is a watch response that counts the events written to it
// (JSON lines, or protobuf frames behind their 4-byte length) and calls
// done once it has want of them.
type eventCounter struct {
	discardWriter
	protobuf bool
	want     int
	done     func()
	events   int
	hdr      [4]byte
	hdrN     int // bytes of hdr read
	need     int // bytes of the frame still to come
}

func (w *eventCounter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		switch {
		case !w.protobuf:
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				b = nil
				continue
			}
			b = b[i+1:]
			w.event()
		case w.need == 0:
			c := copy(w.hdr[w.hdrN:], b)
			w.hdrN += c
			b = b[c:]
			if w.hdrN == len(w.hdr) {
				w.hdrN = 0
				w.need = int(binary.BigEndian.Uint32(w.hdr[:]))
			}
		default:
			c := min(w.need, len(b))
			w.need -= c
			b = b[c:]
			if w.need == 0 {
				w.event()
			}
		}
	}
	return n, nil
}

func (w *eventCounter) event() {
	w.events++
	if w.events == w.want {
		w.done()
	}
}

// watchGate holds writes while armed, until opened.
type watchGate struct {
	mu sync.Mutex
	ch chan struct{} // nil when open
}

func (g *watchGate) arm() {
	g.mu.Lock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
	g.mu.Unlock()
}

func (g *watchGate) open() {
	g.mu.Lock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
	g.mu.Unlock()
}

func (g *watchGate) wait(ctx context.Context) {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

// gatedWriter is a watch response: its header counts the watch as open,
// its writes wait at the gate. Flushes and deadlines reach the real writer
// through Unwrap (http.ResponseController).
type gatedWriter struct {
	http.ResponseWriter
	ctx context.Context
	s   *childServer
}

func (w *gatedWriter) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	w.s.watching.Add(1)
}

func (w *gatedWriter) Write(b []byte) (int, error) {
	w.s.gate.wait(w.ctx)
	return w.ResponseWriter.Write(b)
}

func (w *gatedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
