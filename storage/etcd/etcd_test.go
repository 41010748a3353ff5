package etcd

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// TestMain fails the run if goroutines outlive the tests. The HTTP
// connections between the members of a stopped cluster end only on their
// read timeouts, a few seconds later, so it looks again for a while before
// it reports them, rather than ignoring anything.
//
// One etcd goroutine is ignored: a member stopped with Kill (HardStop, a
// simulated crash) can be asked for its version by a peer in the moment
// between its raft stopping and its peer listener closing, and etcd's peer
// version handler then blocks for good on the closed storage backend. So is
// klog's flush daemon, which klog (linked in with kube-apiserver's
// compactor, which the compaction tests run against ours) starts at init.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		ignore := []goleak.Option{
			goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp.newPeerHandler.versionHandler.func1"),
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		}
		err := goleak.Find(ignore...)
		for deadline := time.Now().Add(leakGrace); err != nil && time.Now().Before(deadline); {
			err = goleak.Find(ignore...) // itself retries for about a second
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakGrace is how long TestMain waits for goroutines to end.
const leakGrace = 20 * time.Second

// startServer starts an embedded member on a fresh directory, stopped when
// the test ends.
func startServer(t testing.TB) *Embedded {
	t.Helper()
	e, err := StartEmbedded(t.Context(), EmbeddedConfig{Dir: t.TempDir(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// newStore returns a store on e under a prefix of its own, closed when the
// test ends.
func newStore(t testing.TB, e *Embedded, mod func(*Config)) *Store {
	t.Helper()
	cfg := e.ClientConfig()
	cfg.Prefix = fmt.Sprintf("/t%d", prefixes.Add(1))
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var prefixes atomic.Int64

// waitTimeout bounds waits for progress so a broken cluster fails the test
// instead of hanging it; it is not a performance assertion.
const waitTimeout = 30 * time.Second

func TestConformance(t *testing.T) {
	e := startServer(t)
	storagetest.Run(t, func(t *testing.T) storage.Interface { return newStore(t, e, nil) })
}

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestWatchPausesForStalledConsumer checks that a watch whose consumer
// stops reading stops reading etcd, and that it resumes without a gap or a
// repeat once the consumer reads again.
func TestWatchPausesForStalledConsumer(t *testing.T) {
	e := startServer(t)
	var logs syncBuffer
	s := newStore(t, e, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	s.stallGrace = time.Millisecond
	ctx := t.Context()
	start, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "/p/", start)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const n = 3 * watchBuffer
	revs := make([]int64, n)
	for i := range n {
		if revs[i], err = s.Create(ctx, fmt.Sprintf("/p/%04d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		ev, ok := <-w.Events()
		if !ok {
			t.Fatalf("watch ended after %d events: %v", i, w.Err())
		}
		if ev.KV.Revision != revs[i] {
			t.Fatalf("event %d at revision %d, want %d", i, ev.KV.Revision, revs[i])
		}
	}
	if !strings.Contains(logs.String(), "paused") {
		t.Errorf("the watch never paused; logs:\n%s", logs.String())
	}
}

func BenchmarkEtcd(b *testing.B) {
	e := startServer(b)
	storagetest.Bench(b, func(b *testing.B) storage.Interface { return newStore(b, e, nil) })
}
