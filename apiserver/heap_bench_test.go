package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	lwclient "github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/internal/benchpods"
	"github.com/listwatch/listwatch/internal/runtest"
)

// BenchmarkCachedPodHeap measures what the API server holds per pod: it
// starts the server on the embedded etcd member (in this process, as
// `listwatch apiserver` runs it), creates pods as kube-controller-manager
// creates a ReplicaSet's pods (through the API, so they carry kube's
// defaults, the service account's token volume and managedFields),
// patches each pod's status once as a kubelet does, waits for the pods'
// watch cache to hold every write, forces a GC, and reports the live heap
// and heap objects the pods added, per pod: the state, the default event
// window (the last 10,000 events) and etcd's share. watch=protobuf keeps
// a watch of every pod open over HTTP in protobuf meanwhile, as
// kube-controller-manager's informer does, so that what the server keeps
// for its watchers (the protobuf encodings) is counted too. Each run
// measures once (-benchtime=1x); with LISTWATCH_HEAP_PROFILE=dir it writes
// the heap profile taken at the measurement to
// dir/heap-<pods>-<watch>.pb.gz (`go tool pprof -top
// -sample_index=inuse_space`).
func BenchmarkCachedPodHeap(b *testing.B) {
	for _, pods := range []int{10_000, 100_000} {
		for _, watched := range []bool{false, true} {
			name := fmt.Sprintf("pods=%d/watch=none", pods)
			if watched {
				name = fmt.Sprintf("pods=%d/watch=protobuf", pods)
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					benchCachedPodHeap(b, pods, watched)
				}
			})
		}
	}
}

func benchCachedPodHeap(b *testing.B, pods int, watched bool) {
	b.StopTimer()
	st := backends[1].New(b) // etcd
	srv, err := New(Config{Storage: st})
	if err != nil {
		b.Fatal(err)
	}
	stop := runtest.Start(b, srv)
	defer stop()
	ctx := context.Background()
	if err := srv.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	const namespaces = 20
	for ns := range namespaces {
		heapSend(b, srv, http.MethodPost, "/api/v1/namespaces", "", fmt.Sprintf(`{"metadata":{"name":"team-%02d"}}`, ns), http.StatusCreated)
		heapSend(b, srv, http.MethodPost, fmt.Sprintf("/api/v1/namespaces/team-%02d/serviceaccounts", ns), "", `{"metadata":{"name":"default"}}`, 0)
	}
	var received atomic.Int64
	if watched {
		hs := httptest.NewServer(srv.Handler())
		defer hs.Close()
		c, err := lwclient.New(&lwclient.Config{REST: &rest.Config{Host: hs.URL}, QPS: -1})
		if err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		w, err := lwclient.NewResource[*corev1.Pod](c, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "").Watch(wctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Go(func() {
			defer w.Stop()
			for {
				if _, err := w.Next(); err != nil {
					return
				}
				received.Add(1)
			}
		})
	}
	base := liveHeap()

	// As kube-controller-manager's ReplicaSet controller and the kubelets
	// write: concurrent creates, then each pod's status once.
	workers := 4 * runtime.GOMAXPROCS(0)
	each := func(write func(i int)) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := w; i < pods; i += workers {
					write(i)
				}
			})
		}
		wg.Wait()
	}
	b.StartTimer()
	each(func(i int) {
		heapSend(b, srv, http.MethodPost, fmt.Sprintf("/api/v1/namespaces/team-%02d/pods", i%namespaces), "kube-controller-manager/v1.37.2", benchpods.Pod(i), http.StatusCreated)
	})
	each(func(i int) {
		heapSend(b, srv, http.MethodPatch, fmt.Sprintf("/api/v1/namespaces/team-%02d/pods/%s/status", i%namespaces, benchpods.Name(i)), "kubelet/v1.37.2", benchpods.StatusPatch(i), http.StatusOK)
	})
	b.StopTimer()

	res := srv.reg.Lookup(schema.GroupVersion{Version: "v1"}, "pods")
	rev, err := st.Revision(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); srv.cacheFor(res).ResourceVersion() < rev; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the pods' watch cache is at %d, storage at %d", srv.cacheFor(res).ResourceVersion(), rev)
		}
	}
	if s := srv.cacheFor(res).Stats(); s.Objects != pods {
		b.Fatalf("the watch cache holds %d pods, want %d", s.Objects, pods)
	}
	for deadline := time.Now().Add(time.Minute); watched && received.Load() < int64(2*pods); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the watch received %d events, want %d", received.Load(), 2*pods)
		}
	}
	after := liveHeap()
	if dir := os.Getenv("LISTWATCH_HEAP_PROFILE"); dir != "" {
		mode := "none"
		if watched {
			mode = "protobuf"
		}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%d-%s.pb.gz", pods, mode)))
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(after.HeapAlloc-base.HeapAlloc)/float64(pods), "heap-B/pod")
	b.ReportMetric(float64(after.HeapObjects-base.HeapObjects)/float64(pods), "heap-objs/pod")
	b.ReportMetric(float64(after.HeapAlloc)/(1<<20), "heap-MiB")
}

// liveHeap is the heap's statistics after a forced collection.
func liveHeap() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// heapSend calls the API routes in-process as userAgent (the field
// manager's name) and checks the answer's code (0: any).
func heapSend(b testing.TB, srv *Server, method, path, userAgent, body string, code int) {
	b.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	if method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	if userAgent != "" {
		req.Header.Set("User-Agent", userAgent)
	}
	benchServe(b, srv, req, code)
}
