package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	lwclient "github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/memory"
)

// benchServer serves the API over a memory backend on 127.0.0.1 and stops
// it when the benchmark ends. The list and watch paths under benchmark are
// served by the watch cache, whatever the backend.
func benchServer(b testing.TB) (*Server, storage.Interface, string) {
	b.Helper()
	st := memory.New()
	srv, err := New(Config{Storage: st})
	if err != nil {
		b.Fatal(err)
	}
	stop := runtest.Start(b, srv)
	// The start-up objects (bootstrap RBAC) are written in the
	// background; measuring begins after them.
	if err := srv.WaitReady(context.Background()); err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		stop()
		_ = st.Close()
	})
	// The server's start-up makes default (201 before it did, 409 now).
	benchDo(b, srv, http.MethodPost, "/api/v1/namespaces", `{"metadata":{"name":"default"}}`, 0)
	return srv, st, hs.URL
}

// benchDo calls the API routes in-process, skipping the network: setup
// writes are not what is measured. code 0 accepts any answer.
func benchDo(b testing.TB, srv *Server, method, path, body string, code int) []byte {
	b.Helper()
	return benchSend(b, srv, method, path, "application/json", body, code)
}

// benchPod is a pod of typical size (about 1 KiB of JSON): labels, an
// owner, a container with resources and a port, a node, a status.
func benchPod(i int) string {
	return fmt.Sprintf(`{"metadata":{"name":"pod-%06d","labels":{"app":"bench","shard":"%d","gen":"000000000"},
"ownerReferences":[{"apiVersion":"v1","kind":"ReplicationController","name":"rc-%d","uid":"6f1c1f7e-0000-4000-8000-%012d","controller":true}]},
"spec":{"nodeName":"node-%d","containers":[{"name":"main","image":"registry.k8s.io/pause:3.10",
"ports":[{"containerPort":8080,"protocol":"TCP"}],
"resources":{"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"200m","memory":"128Mi"}}}]},
"status":{"phase":"Running","podIP":"10.0.%d.%d"}}`, i, i%10, i/100, i/100, i%50, (i/250)%250, i%250)
}

// benchListPods is the size of the list benchmark, as in the issue.
const benchListPods = 100_000

// BenchmarkListPodsRV0 lists 100,000 pods with resourceVersion=0 over HTTP
// on 127.0.0.1, served from the watch cache, in JSON and in protobuf; the
// client reads the whole body. B/op and allocs/op include the server's, which
// runs in the same process.
func BenchmarkListPodsRV0(b *testing.B) {
	srv, _, url := benchServer(b)
	// Pods need their service account (ServiceAccount admission).
	benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"default"}}`, 0)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < benchListPods; i += workers {
				benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/pods", benchPod(i), http.StatusCreated)
			}
		})
	}
	wg.Wait()

	for _, enc := range []struct{ name, accept string }{
		{"json", "application/json"},
		{"protobuf", "application/vnd.kubernetes.protobuf"},
	} {
		b.Run(enc.name, func(b *testing.B) {
			hc := &http.Client{Transport: &http.Transport{}}
			defer hc.CloseIdleConnections()
			list := func() []byte {
				req, err := http.NewRequest(http.MethodGet, url+"/api/v1/pods?resourceVersion=0", nil)
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Accept", enc.accept)
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("list: %d %v", resp.StatusCode, err)
				}
				return body
			}
			// One list outside the timing checks the answer and sizes it.
			first := list()
			if enc.name == "json" {
				var l struct{ Items []json.RawMessage }
				if err := json.Unmarshal(first, &l); err != nil || len(l.Items) != benchListPods {
					b.Fatalf("list: %d items (%v), want %d", len(l.Items), err, benchListPods)
				}
			}
			b.SetBytes(int64(len(first)))
			b.ReportAllocs()
			for b.Loop() {
				list()
			}
		})
	}
}

// BenchmarkWatchFanout measures watch fan-out: watchers each hold a watch
// of the pods over HTTP on 127.0.0.1 through listwatch's client (protobuf,
// as informers read), and every iteration is one pod update, written
// straight to the storage so that the figure is the fan-out's and not the
// write path's, which each watcher receives and decodes: watch cache
// dispatch, the per-watcher HTTP stream, the client's decoding. The writer
// never gets more than half a watcher buffer ahead of the slowest watcher,
// so that none is cut off and the figure is the sustained rate.
// deliveries/s counts events received by watchers per second.
func BenchmarkWatchFanout(b *testing.B) {
	for _, watchers := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			benchWatchFanout(b, watchers)
		})
	}
}

func benchWatchFanout(b *testing.B, watchers int) {
	srv, st, url := benchServer(b)
	const pods = 100
	type stored struct {
		key   string
		value []byte
		rev   int64
	}
	objs := make([]stored, pods)
	res := srv.reg.Lookup(schema.GroupVersion{Version: "v1"}, "pods")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range pods {
		benchDo(b, srv, http.MethodPost, "/api/v1/namespaces/default/pods", benchPod(i), http.StatusCreated)
		kv, err := st.Get(ctx, registry.KeyFor(res, "default", fmt.Sprintf("pod-%06d", i)))
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.Contains(kv.Value, []byte(genLabel(0))) {
			b.Fatalf("stored pod without the %s label: %s", genLabel(0), kv.Value)
		}
		objs[i] = stored{kv.Key, kv.Value, kv.Revision}
	}
	c, err := lwclient.New(&lwclient.Config{REST: &rest.Config{Host: url}, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	podClient := lwclient.NewResource[*corev1.Pod](c, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "default")

	received := make([]atomic.Int64, watchers)
	failed := make(chan error, watchers)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	from := strconv.FormatInt(objs[pods-1].rev, 10)
	for i := range watchers {
		w, err := podClient.Watch(ctx, metav1.ListOptions{ResourceVersion: from})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer w.Stop()
			for {
				ev, err := w.Next()
				if err != nil {
					if ctx.Err() == nil {
						failed <- fmt.Errorf("watcher %d: %w", i, err)
					}
					return
				}
				if ev.Object == nil || ev.Type != "MODIFIED" {
					failed <- fmt.Errorf("watcher %d: %s event", i, ev.Type)
					return
				}
				received[i].Add(1)
			}
		})
	}

	// The slowest watcher may lag by at most lead events: half of the
	// watch cache's per-watcher buffer (watchcache.DefaultWatcherBuffer).
	const lead = 128
	slowest := func() int64 {
		m := received[0].Load()
		for i := range received {
			m = min(m, received[i].Load())
		}
		return m
	}
	waitFor := func(n int64) {
		for slowest() < n {
			select {
			case err := <-failed:
				b.Fatal(err)
			case <-time.After(50 * time.Microsecond):
			}
		}
	}
	b.ResetTimer()
	start := time.Now()
	for n := range b.N {
		if int64(n)-lead > 0 {
			waitFor(int64(n) - lead)
		}
		o := &objs[n%pods]
		// A label value of fixed width: the update is a byte replacement.
		o.value = bytes.Replace(o.value, []byte(genLabel(n/pods)), []byte(genLabel(n/pods+1)), 1)
		rev, err := st.Update(ctx, o.key, o.value, o.rev)
		if err != nil {
			b.Fatal(err)
		}
		o.rev = rev
	}
	waitFor(int64(b.N))
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(watchers)*float64(b.N)/elapsed.Seconds(), "deliveries/s")
}

// genLabel is the label the fan-out benchmark rewrites, as stored.
func genLabel(gen int) string { return fmt.Sprintf(`"gen":"%09d"`, gen) }
