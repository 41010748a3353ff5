package main

// REST client workloads: listwatch's client and client-go, each with its
// defaults, over HTTP on 127.0.0.1 against one server that replays
// pre-recorded list and watch responses (so the server's own cost does not
// mask the clients'), and their watch decoders alone on the same recorded
// bytes.
//
// client-go's informers default to streaming lists (WatchListClient), so
// the server also replays the initial events of a watch with
// sendInitialEvents=true; listwatch's default Reflector lists. Both ask for
// JSON in the json rows; in the protobuf rows client-go is configured with
// ContentType protobuf, and listwatch asks for protobuf by default.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	cginformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
	cgcache "k8s.io/client-go/tools/cache"

	lwcache "github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	lwinformers "github.com/listwatch/listwatch/informers"
)

func init() {
	for _, enc := range []string{"json", "protobuf"} {
		register("client-decode-"+enc, func(cfg config) ([]Row, error) {
			return benchClientDecode("client-decode-"+enc, enc, cfg.size(100_000))
		})
		register("client-sync-"+enc+"-100k", func(cfg config) ([]Row, error) {
			return benchClientSync("client-sync-"+enc+"-100k", enc, cfg.size(100_000))
		})
		register("client-events-"+enc, func(cfg config) ([]Row, error) {
			return benchClientEvents("client-events-"+enc, enc, cfg.size(100_000))
		})
	}
}

const protoMediaType = "application/vnd.kubernetes.protobuf"

// recording holds a server's pre-recorded responses in one encoding.
type recording struct {
	proto   bool
	list    []byte // the whole list, one page
	initial []byte // the initial events of a streaming list, with the end bookmark
	events  []byte // the watch events after the list
}

func envelope(obj interface{ Marshal() ([]byte, error) }, kind string) []byte {
	raw, err := obj.Marshal()
	if err != nil {
		panic(err)
	}
	u := k8sruntime.Unknown{TypeMeta: k8sruntime.TypeMeta{APIVersion: "v1", Kind: kind}, Raw: raw}
	b, err := u.Marshal()
	if err != nil {
		panic(err)
	}
	return append([]byte("k8s\x00"), b...)
}

// encodeEvent appends one watch event as the API server writes it.
func encodeEvent(out []byte, proto bool, typ string, pod *corev1.Pod) []byte {
	p := *pod
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	if proto {
		we := metav1.WatchEvent{Type: typ, Object: k8sruntime.RawExtension{Raw: envelope(&p, "Pod")}}
		b, err := we.Marshal()
		if err != nil {
			panic(err)
		}
		out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
		return append(out, b...)
	}
	b, err := json.Marshal(struct {
		Type   string      `json:"type"`
		Object *corev1.Pod `json:"object"`
	}{typ, &p})
	if err != nil {
		panic(err)
	}
	return append(append(out, b...), '\n')
}

// record encodes list as a list response and as a streaming list, and
// updates of its pods (resourceVersions after the list's) as a watch.
func record(list *corev1.PodList, updates int, proto bool) *recording {
	r := &recording{proto: proto}
	if proto {
		r.list = envelope(list, "PodList")
	} else {
		r.list, _ = json.Marshal(list)
	}
	for i := range list.Items {
		r.initial = encodeEvent(r.initial, proto, "ADDED", &list.Items[i])
	}
	end := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: list.ResourceVersion,
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	r.initial = encodeEvent(r.initial, proto, "BOOKMARK", end)
	rv := 1_000_000
	for i := range updates {
		p := list.Items[i%len(list.Items)].DeepCopy()
		rv++
		p.ResourceVersion = fmt.Sprint(rv)
		p.Labels["rev"] = fmt.Sprint(i)
		r.events = encodeEvent(r.events, proto, "MODIFIED", p)
	}
	return r
}

// replayServer serves a recording on 127.0.0.1: pods lists, streaming
// lists, and watches that send the recorded events once the gate opens,
// then stay open.
type replayServer struct {
	rec  *recording
	gate chan struct{}
	srv  *http.Server
	ln   net.Listener
	wg   sync.WaitGroup
}

func startReplay(rec *recording) (*replayServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &replayServer{rec: rec, gate: make(chan struct{}), ln: ln}
	s.srv = &http.Server{Handler: s}
	s.wg.Go(func() { _ = s.srv.Serve(ln) })
	return s, nil
}

func (s *replayServer) url() string { return "http://" + s.ln.Addr().String() }

func (s *replayServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	_ = s.srv.Close()
	s.wg.Wait()
}

func (s *replayServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	proto := s.rec.proto && strings.HasPrefix(r.Header.Get("Accept"), protoMediaType)
	if s.rec.proto != proto {
		http.Error(w, "this recording is in the other encoding", http.StatusNotAcceptable)
		return
	}
	ct := "application/json"
	if proto {
		ct = protoMediaType
	}
	q := r.URL.Query()
	if q.Get("watch") != "true" {
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(s.rec.list)
		return
	}
	if proto {
		ct += ";stream=watch"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	if q.Get("sendInitialEvents") == "true" {
		_, _ = w.Write(s.rec.initial)
	}
	w.(http.Flusher).Flush()
	select {
	case <-s.gate:
		_, _ = w.Write(s.rec.events)
		w.(http.Flusher).Flush()
	case <-r.Context().Done():
		return
	}
	<-r.Context().Done()
}

// clientUnderTest is an informer of pods through a library's REST client.
type clientUnderTest struct {
	synced func(ctx context.Context) bool
	stop   func()
	keep   any // what must stay reachable while its heap is measured
}

// pollSynced waits for hasSynced, looking every interval, and reports
// whether it came before ctx ended. The workloads time syncs with it, not
// with the libraries' own waits, which look every 100 ms and would round
// the times up to a tenth of a second.
func pollSynced(ctx context.Context, every time.Duration, hasSynced func() bool) bool {
	for !hasSynced() {
		if ctx.Err() != nil {
			return false
		}
		time.Sleep(every)
	}
	return true
}

func startListwatchClient(url string, proto bool, onUpdate func(*corev1.Pod)) (*clientUnderTest, error) {
	c, err := client.New(&client.Config{REST: &rest.Config{Host: url}, PreferJSON: !proto})
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := lwinformers.NewSharedInformerFactory(c, lwinformers.Options{Reflector: lwcache.ReflectorOptions{Logger: quiet}})
	pods := lwinformers.For[*corev1.Pod](f)
	if onUpdate != nil {
		if _, err := pods.AddEventHandler(lwcache.ResourceEventHandlerFuncs[*corev1.Pod]{
			UpdateFunc: func(_, p *corev1.Pod) { onUpdate(p) },
		}); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx)
	return &clientUnderTest{
		synced: func(wctx context.Context) bool { return pollSynced(wctx, time.Millisecond, pods.HasSynced) },
		stop:   func() { cancel(); f.Shutdown() },
		keep:   pods,
	}, nil
}

func startClientGoClient(url string, proto bool, onUpdate func(*corev1.Pod)) (*clientUnderTest, error) {
	// client-go's typed clients default to protobuf for built-in types
	// when ContentType is not set: the json rows set it.
	cfg := &rest.Config{Host: url, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	if proto {
		cfg.ContentType = protoMediaType
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := cginformers.NewSharedInformerFactory(cs, 0)
	inf := f.Core().V1().Pods().Informer()
	if onUpdate != nil {
		if _, err := inf.AddEventHandler(cgcache.ResourceEventHandlerFuncs{UpdateFunc: func(_, p any) { onUpdate(p.(*corev1.Pod)) }}); err != nil {
			return nil, err
		}
	}
	stopCh := make(chan struct{})
	f.Start(stopCh)
	return &clientUnderTest{
		synced: func(wctx context.Context) bool { return pollSynced(wctx, time.Millisecond, inf.HasSynced) },
		stop:   func() { close(stopCh); f.Shutdown() },
		keep:   inf,
	}, nil
}

func startClient(impl, url string, proto bool, onUpdate func(*corev1.Pod)) (*clientUnderTest, error) {
	if impl == implListwatch {
		return startListwatchClient(url, proto, onUpdate)
	}
	return startClientGoClient(url, proto, onUpdate)
}

// heapBytes is the live heap as the runtime counts it, without a GC.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func gcHeap() uint64 {
	runtime.GC()
	runtime.GC()
	return heapBytes()
}

func benchClientSync(name, enc string, n int) ([]Row, error) {
	list, _ := buildPods(n, 42)
	rec := record(list, 0, enc == "protobuf")
	list = nil
	var rows []Row
	for _, impl := range []string{implListwatch, implClientGo} {
		srv, err := startReplay(rec)
		if err != nil {
			return nil, err
		}
		r, err := measureSync(name, impl, srv.url(), rec.proto, n)
		srv.close()
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// measureSync times an informer of impl from its start until it has
// synced the n pods url serves, and reports the heap it holds then per pod
// and its peak heap on the way.
func measureSync(name, impl, url string, proto bool, n int) ([]Row, error) {
	base := gcHeap()
	var peak atomic.Uint64
	done := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if h := heapBytes(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	endProfile := profileWindow(impl)
	defer endProfile()
	start := time.Now()
	cut, err := startClient(impl, url, proto, nil)
	if err != nil {
		close(done)
		sampler.Wait()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	ok := cut.synced(ctx)
	cancel()
	elapsed := time.Since(start)
	endProfile()
	close(done)
	sampler.Wait()
	after := gcHeap()
	runtime.KeepAlive(cut.keep)
	cut.stop()
	if !ok {
		return nil, fmt.Errorf("%s did not sync", impl)
	}
	perPod := float64(after-min(base, after)) / float64(n)
	peakRatio := float64(peak.Load()-min(base, peak.Load())) / float64(max(after-min(base, after), 1))
	return []Row{
		{name, impl, "sync time", elapsed.Seconds(), "s"},
		{name, impl, "heap per cached pod", perPod, "B"},
		{name, impl, "peak heap / heap after", peakRatio, "x"},
	}, nil
}

// finalRevs is, for updates of list's pods in turn (update i of pod
// i%len(list)), the "rev" label of each pod's last update, tag then i.
func finalRevs(list *corev1.PodList, updates int, tag string) map[string]string {
	final := map[string]string{}
	for i := range updates {
		final[list.Items[i%len(list.Items)].Name] = tag + strconv.Itoa(i)
	}
	return final
}

func benchClientEvents(name, enc string, updates int) ([]Row, error) {
	list, _ := buildPods(1000, 7)
	rec := record(list, updates, enc == "protobuf")
	final := finalRevs(list, updates, "")
	var rows []Row
	for _, impl := range []string{implListwatch, implClientGo} {
		srv, err := startReplay(rec)
		if err != nil {
			return nil, err
		}
		elapsed, mallocs, err := measureEvents(impl, srv.url(), rec.proto, final, nil, func() error {
			close(srv.gate)
			return nil
		})
		srv.close()
		if err != nil {
			return nil, err
		}
		rows = append(rows,
			Row{name, impl, "watch events into informer (1 handler)", float64(updates) / elapsed.Seconds(), "events/s"},
			Row{name, impl, "allocs per event", float64(mallocs) / float64(updates), "allocs"})
	}
	return rows, nil
}

// measureEvents starts an informer of impl with one update handler on url,
// waits for it to sync, calls prepare (when not nil), then times from
// open, which starts the updates flowing, until the handler has seen
// every pod's final update: the pod's "rev" label as final says. Informers
// may merge the updates of one object that queue up (so do listwatch's
// listeners), so the last update of each pod is what ends the run. It
// returns the time and the mallocs of the process meanwhile.
func measureEvents(impl, url string, proto bool, final map[string]string, prepare, open func() error) (time.Duration, uint64, error) {
	var seen atomic.Int64
	all := make(chan struct{})
	cut, err := startClient(impl, url, proto, func(p *corev1.Pod) {
		// Handlers run one at a time per informer: final is only read.
		if final[p.Name] == p.Labels["rev"] && seen.Add(1) == int64(len(final)) {
			close(all)
		}
	})
	if err != nil {
		return 0, 0, err
	}
	defer cut.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if !cut.synced(ctx) {
		return 0, 0, fmt.Errorf("%s did not sync", impl)
	}
	if prepare != nil {
		if err := prepare(); err != nil {
			return 0, 0, err
		}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	endProfile := profileWindow(impl)
	defer endProfile()
	start := time.Now()
	if err := open(); err != nil {
		return 0, 0, err
	}
	select {
	case <-all:
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("%s: saw the last update of %d pods of %d", impl, seen.Load(), len(final))
	}
	elapsed := time.Since(start)
	endProfile()
	runtime.ReadMemStats(&ms)
	return elapsed, ms.Mallocs - mallocs, nil
}

func benchClientDecode(name, enc string, n int) ([]Row, error) {
	list, _ := buildPods(min(n, 10_000), 11)
	rec := record(list, n, enc == "protobuf")
	data := rec.events
	decoders := map[string]func(r io.Reader) (int, error){
		implListwatch: func(r io.Reader) (int, error) {
			var d *client.Decoder[*corev1.Pod]
			var err error
			if rec.proto {
				d, err = client.NewProtobufDecoder[*corev1.Pod](r, corev1.SchemeGroupVersion, 0)
			} else {
				d, err = client.NewJSONDecoder[*corev1.Pod](r, corev1.SchemeGroupVersion, 0)
			}
			if err != nil {
				return 0, err
			}
			for events := 0; ; events++ {
				if _, err := d.Next(); err != nil {
					if err == io.EOF {
						return events, nil
					}
					return events, err
				}
			}
		},
		implClientGo: func(r io.Reader) (int, error) {
			mt := "application/json"
			if rec.proto {
				mt = protoMediaType
			}
			info, _ := k8sruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mt)
			fr := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(r))
			d := restclientwatch.NewDecoder(streaming.NewDecoder(fr, info.StreamSerializer.Serializer), scheme.Codecs.UniversalDeserializer())
			for events := 0; ; events++ {
				if _, _, err := d.Decode(); err != nil {
					if err == io.EOF {
						return events, nil
					}
					return events, err
				}
			}
		},
	}
	var rows []Row
	for _, impl := range []string{implListwatch, implClientGo} {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mallocs := ms.Mallocs
		start := time.Now()
		events, err := decoders[impl](bytes.NewReader(data))
		elapsed := time.Since(start)
		runtime.ReadMemStats(&ms)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", impl, err)
		}
		if events != n {
			return nil, fmt.Errorf("%s decoded %d events of %d", impl, events, n)
		}
		rows = append(rows,
			Row{name, impl, "decode", float64(n) / elapsed.Seconds(), "events/s"},
			Row{name, impl, "allocs per event", float64(ms.Mallocs-mallocs) / float64(n), "allocs"},
			Row{name, impl, "wire bytes per event", float64(len(data)) / float64(n), "B"})
	}
	return rows, nil
}
