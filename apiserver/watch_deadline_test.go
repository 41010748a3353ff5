package apiserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/listwatch/listwatch/internal/runtest"
)

// TestWatchWriteDeadline: a watch client that stops reading is dropped
// once a write has been blocked for Config.WatchWriteTimeout (a minute by
// default, as kube-apiserver's), its connection closed; with the default
// the same client is still being served after the events it missed. The
// watcher's buffer is made large enough that the cache never cuts it off,
// so that only the write deadline can end the stream — but for the case
// of a buffer the events overflow: the cache cuts that watcher off
// (apiserver_terminated_watchers_total), and its connection, blocked in a
// write, is closed at the same deadline rather than kept while the
// client lives.
func TestWatchWriteDeadline(t *testing.T) {
	const events, size = 40, 320 << 10 // 13 MB: more than the socket buffers hold
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		buffer   int
		wantDrop bool
	}{
		{"short deadline drops the client", 300 * time.Millisecond, 10 * events, true},
		{"default deadline keeps it", 0, 10 * events, false},
		{"a watcher cut off is closed at the deadline", 300 * time.Millisecond, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := New(Config{
				Storage:                 backends[0].New(t),
				WatchCache:              WatchCacheConfig{WatcherBuffer: tc.buffer},
				DisableAdmissionPlugins: []string{"ServiceAccount"},
				WatchWriteTimeout:       tc.timeout,
			})
			if err != nil {
				t.Fatal(err)
			}
			stop := runtest.Start(t, srv)
			hs := httptest.NewServer(srv.Handler())
			defer func() { hs.CloseClientConnections(); hs.Close(); stop() }()
			c := &client{t: t, base: hs.URL}
			if r := c.do("POST", "/api/v1/namespaces", "", `{"metadata":{"name":"default"}}`); r.code != http.StatusCreated && r.code != http.StatusConflict {
				t.Fatalf("create namespace default: %d %s", r.code, r.body)
			}

			resp, err := http.Get(hs.URL + "/api/v1/namespaces/default/configmaps?watch=true")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			// The watch is established once its first event arrives.
			c.mustDo("POST", "/api/v1/namespaces/default/configmaps", "", `{"metadata":{"name":"first"}}`, http.StatusCreated)
			rd := bufio.NewReaderSize(resp.Body, 1<<20)
			if line, err := rd.ReadBytes('\n'); err != nil || !strings.Contains(string(line), `"first"`) {
				t.Fatalf("first event: %q %v", line, err)
			}
			// The client stops reading while the events pile up.
			data := strings.Repeat("x", size)
			for i := range events {
				c.mustDo("POST", "/api/v1/namespaces/default/configmaps", "",
					fmt.Sprintf(`{"metadata":{"name":"cm-%d"},"data":{"d":%q}}`, i, data), http.StatusCreated)
			}
			time.Sleep(tc.timeout + 700*time.Millisecond)

			// Read what was sent: a dropped client finds the stream
			// ended before the last event; a kept one gets every event
			// and then waits for more.
			got := 0
			readErr := make(chan error, 1)
			go func() {
				for {
					if _, err := rd.ReadBytes('\n'); err != nil {
						readErr <- err
						return
					}
					got++
				}
			}()
			select {
			case err := <-readErr:
				if !tc.wantDrop {
					t.Fatalf("stream ended (%v) after %d of %d events with the default deadline", err, got, events)
				}
				if got >= events || !(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
					t.Fatalf("after a stall longer than the deadline: %d of %d events, then %v; want fewer, then EOF", got, events, err)
				}
				cut := terminatedWatchers(t, srv)
				if wantCut := tc.buffer < events; (cut > 0) != wantCut {
					t.Fatalf("apiserver_terminated_watchers_total = %v, want cut %v", cut, wantCut)
				}
			case <-time.After(3 * time.Second):
				if tc.wantDrop {
					t.Fatalf("client that stalled past the deadline still served: %d events read", got)
				}
				resp.Body.Close()
				<-readErr
				if got != events {
					t.Fatalf("kept client read %d of %d events", got, events)
				}
			}
		})
	}
}

// terminatedWatchers is srv's apiserver_terminated_watchers_total, over
// every resource.
func terminatedWatchers(t *testing.T, srv *Server) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(srv.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() == "apiserver_terminated_watchers_total" {
			for _, m := range f.GetMetric() {
				total += sampleValue(m)
			}
		}
	}
	return total
}

// TestWatchIdleOverHTTP2: the write deadline bounds a write, not the
// quiet between events. Over HTTP/2 a deadline left set after a write
// resets the stream when it passes, idle or not; a watch quiet for five
// times the deadline must still deliver the next event on the same
// stream.
func TestWatchIdleOverHTTP2(t *testing.T) {
	const timeout = 200 * time.Millisecond
	srv, err := New(Config{
		Storage:                 backends[0].New(t),
		DisableAdmissionPlugins: []string{"ServiceAccount"},
		WatchWriteTimeout:       timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runtest.Start(t, srv)
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.EnableHTTP2 = true
	hs.StartTLS()
	defer func() { hs.CloseClientConnections(); hs.Close(); stop() }()
	// The server may have made namespace default already: a conflict is
	// as good as a create.
	post := func(path, body string) {
		t.Helper()
		resp, err := hs.Client().Post(hs.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated && !(path == "/api/v1/namespaces" && resp.StatusCode == http.StatusConflict) {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
	}
	post("/api/v1/namespaces", `{"metadata":{"name":"default"}}`)

	resp, err := hs.Client().Get(hs.URL + "/api/v1/namespaces/default/configmaps?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("watch served over %s, want HTTP/2", resp.Proto)
	}
	rd := bufio.NewReader(resp.Body)
	for i, name := range []string{"first", "after-quiet"} {
		if i > 0 {
			time.Sleep(5 * timeout)
		}
		post("/api/v1/namespaces/default/configmaps", fmt.Sprintf(`{"metadata":{"name":%q}}`, name))
		line, err := rd.ReadBytes('\n')
		if err != nil || !strings.Contains(string(line), fmt.Sprintf("%q", name)) {
			t.Fatalf("event for %s: %q %v", name, line, err)
		}
	}
}
