package client

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/storage/memory"
)

// BenchmarkShardedInformer: 4,000 pods on listwatch's server (in-process,
// memory storage); each iteration a factory's pod informer syncs (a
// streaming list in protobuf, as by default) and stops. "whole" holds
// every pod, "shard-1-of-4" one shard of four by uid: the server sends,
// and the informer decodes and keeps, about a quarter. Reported: the
// pods held, the heap the synced informer keeps (over the process's before
// the first),
// and the CPU time of the process (user+system, the server's share
// included: it serves each pod's protobuf memoized in its watch cache) per
// sync.
func BenchmarkShardedInformer(b *testing.B) {
	const n = 4000
	st := memory.New()
	b.Cleanup(func() { _ = st.Close() })
	srv, err := apiserver.New(apiserver.Config{Storage: st, DisableAdmissionPlugins: []string{"ServiceAccount"}})
	if err != nil {
		b.Fatal(err)
	}
	stop := runtest.Start(b, srv)
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		stop()
	})
	c, err := New(&Config{REST: &rest.Config{Host: hs.URL}, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	_, _ = NewResource[*corev1.Namespace](c, nsGVR, "").Create(b.Context(), ns, metav1.CreateOptions{})
	pods := NewResource[*corev1.Pod](c, podsGVR, "default")
	for i := range n {
		p := makePod(i, 0)
		p.ResourceVersion, p.UID, p.ManagedFields = "", "", nil
		if _, err := pods.Create(b.Context(), p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name  string
		shard *informers.Shard
	}{
		{"whole", nil},
		{"shard-1-of-4", &informers.Shard{Count: 4, Index: []int{0}}},
	} {
		// The client's decoding alone: the streaming list the server
		// answers, recorded once, decoded per iteration.
		b.Run("decode-"+bc.name, func(b *testing.B) {
			stream := recordWatchList(b, hs.URL, bc.shard)
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			events := 0
			for b.Loop() {
				d, err := NewProtobufDecoder[*corev1.Pod](bytes.NewReader(stream), corev1.SchemeGroupVersion, 0)
				if err != nil {
					b.Fatal(err)
				}
				events = 0
				for {
					if _, err := d.Next(); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
					events++
				}
			}
			b.ReportMetric(float64(events), "events")
		})
		b.Run(bc.name, func(b *testing.B) {
			var held int
			var heaps []uint64
			var cpus []time.Duration
			var base runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&base)
			for b.Loop() {
				u0 := cpuTime()
				f := informers.NewSharedInformerFactory(c, informers.Options{Shard: bc.shard})
				inf := informers.For[*corev1.Pod](f)
				f.Start(b.Context())
				f.WaitForCacheSync(b.Context())
				cpus = append(cpus, cpuTime()-u0)
				held = len(inf.GetStore().List())
				// The heap the synced informer keeps, over what the
				// process held before the first.
				var with runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&with)
				heaps = append(heaps, with.HeapAlloc-min(with.HeapAlloc, base.HeapAlloc))
				f.Shutdown()
			}
			b.ReportMetric(float64(held), "pods")
			// Medians: the machine's other load and the collector's
			// timing make single iterations stray.
			b.ReportMetric(float64(median(heaps)), "heap-B")
			b.ReportMetric(float64(median(cpus).Microseconds())/1000, "cpu-ms/op")
		})
	}
}

// recordWatchList returns the body of the streaming list of the pods of
// shard (nil: all) the server at url answers in protobuf: its frames up to
// and including the bookmark that ends the initial events.
func recordWatchList(b *testing.B, url string, shard *informers.Shard) []byte {
	q := "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
	if shard != nil {
		sel, err := shard.Selector()
		if err != nil {
			b.Fatal(err)
		}
		q += "&shardSelector=" + neturl.QueryEscape(sel.String())
	}
	req, err := http.NewRequestWithContext(b.Context(), http.MethodGet, url+"/api/v1/namespaces/default/pods"+q, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.kubernetes.protobuf;stream=watch")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("streaming list: %d", resp.StatusCode)
	}
	var out []byte
	for {
		var n [4]byte
		if _, err := io.ReadFull(resp.Body, n[:]); err != nil {
			b.Fatal(err)
		}
		frame := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(resp.Body, frame); err != nil {
			b.Fatal(err)
		}
		out = append(append(out, n[:]...), frame...)
		var ev metav1.WatchEvent
		if err := ev.Unmarshal(frame); err != nil {
			b.Fatal(err)
		}
		if ev.Type == string(watch.Bookmark) {
			return out
		}
	}
}

// median is the median of v, which it sorts.
func median[V cmp.Ordered](v []V) V {
	slices.Sort(v)
	return v[len(v)/2]
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
