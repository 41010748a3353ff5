package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listwatch/listwatch/storage"
)

// TestRestartKeepsAcknowledgedWrites writes through a member, stops it and
// starts it again on the same directory: every acknowledged write is there
// at the revision it was acknowledged with.
func TestRestartKeepsAcknowledgedWrites(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	const n = 50
	acked := map[string]int64{}
	var last int64
	for round := range 2 {
		e, err := StartEmbedded(ctx, EmbeddedConfig{Dir: dir})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		cfg := e.ClientConfig()
		cfg.Prefix = "/registry"
		s, err := New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.List(ctx, "/", storage.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) != len(acked) {
			t.Errorf("round %d: %d keys after restart, want %d", round, len(res.Items), len(acked))
		}
		for _, kv := range res.Items {
			if acked[kv.Key] != kv.Revision {
				t.Errorf("round %d: %s at revision %d, acknowledged at %d", round, kv.Key, kv.Revision, acked[kv.Key])
			}
		}
		if rev, err := s.Revision(ctx); err != nil || rev < last {
			t.Errorf("round %d: revision %d (%v), want at least %d", round, rev, err, last)
		}
		for i := range n {
			key := fmt.Sprintf("/pods/%d-%d", round, i)
			rev, err := s.Create(ctx, key, []byte("v"))
			if err != nil {
				t.Fatal(err)
			}
			acked[key], last = rev, rev
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// startCluster starts a cluster of n members on loopback ports and returns
// them once all serve.
func startCluster(t *testing.T, n int) []*Embedded {
	t.Helper()
	names := make([]string, n)
	peers := make([]string, n)
	clients := make([]string, n)
	var initial []string
	ports, err := freePorts(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		names[i] = fmt.Sprintf("m%d", i)
		peers[i] = fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		clients[i] = fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		initial = append(initial, names[i]+"="+peers[i])
	}
	members := make([]*Embedded, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			members[i], errs[i] = StartEmbedded(t.Context(), EmbeddedConfig{
				Dir: t.TempDir(), Name: names[i], PeerURL: peers[i], ClientURL: clients[i],
				InitialCluster: strings.Join(initial, ","), UnsafeNoFsync: true,
				// Quicker elections keep the test short; generous enough
				// for a loaded machine under the race detector.
				HeartbeatInterval: 50 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
			})
		})
	}
	wg.Wait()
	for i, m := range members {
		if m != nil {
			t.Cleanup(func() { _ = members[i].Close() })
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return members
}

// TestClusterMemberLoss writes and watches through a 3-member cluster while
// one member, the leader or a follower, crashes: no acknowledged write is
// lost, and a watcher that re-watches from its last revision whenever its
// watch ends sees every write in order with no gap.
func TestClusterMemberLoss(t *testing.T) {
	for _, stopLeader := range []bool{true, false} {
		t.Run(fmt.Sprintf("leader=%v", stopLeader), func(t *testing.T) {
			clusterMemberLoss(t, stopLeader)
		})
	}
}

func clusterMemberLoss(t *testing.T, stopLeader bool) {
	ctx := t.Context()
	members := startCluster(t, 3)
	var endpoints []string
	for _, m := range members {
		endpoints = append(endpoints, m.Endpoints...)
	}
	s, err := New(ctx, Config{Endpoints: endpoints, Prefix: "/registry"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The writer creates keys until stopped, keeping what was acknowledged.
	var (
		mu       sync.Mutex
		acked    = map[string]int64{}
		progress = make(chan struct{}, 1)
	)
	writeCtx, stopWriting := context.WithCancel(ctx)
	var writer sync.WaitGroup
	writer.Go(func() {
		for i := 0; writeCtx.Err() == nil; i++ {
			key := fmt.Sprintf("/pods/%05d", i)
			// A write sent to the member just killed hangs until it times out.
			opCtx, cancel := context.WithTimeout(writeCtx, time.Second)
			rev, err := s.Create(opCtx, key, []byte("v"))
			cancel()
			if err != nil {
				continue // unknown outcome: the watch and list below tell
			}
			mu.Lock()
			acked[key] = rev
			mu.Unlock()
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	})
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitAcks := func(n int) {
		for ackedCount() < n {
			select {
			case <-progress:
			case <-time.After(waitTimeout):
				t.Fatalf("%d writes acknowledged within %v, want %d", ackedCount(), waitTimeout, n)
			}
		}
	}

	// The watcher re-watches from the last revision it saw when its watch
	// ends, as the API server does.
	seen := make(chan int64, 100000)
	watchCtx, stopWatching := context.WithCancel(ctx)
	var watcher sync.WaitGroup
	watcher.Go(func() {
		defer close(seen)
		last := start
		for watchCtx.Err() == nil {
			w, err := s.Watch(watchCtx, "/pods/", last)
			if err != nil {
				select {
				case <-time.After(50 * time.Millisecond):
				case <-watchCtx.Done():
				}
				continue
			}
			for ev := range w.Events() {
				last = ev.KV.Revision
				seen <- last
			}
			w.Stop()
		}
	})

	waitAcks(30)
	victim := 1
	for i, m := range members {
		if m.IsLeader() == stopLeader {
			victim = i
			break
		}
	}
	t.Logf("stopping member %d (leader %v)", victim, members[victim].IsLeader())
	if err := members[victim].Kill(); err != nil {
		t.Fatal(err)
	}
	waitAcks(ackedCount() + 30)
	stopWriting()
	writer.Wait()

	final, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.List(ctx, "/pods/", storage.ListOptions{Revision: final})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int64{}
	for _, kv := range res.Items {
		stored[kv.Key] = kv.Revision
	}
	for key, rev := range acked {
		if stored[key] != rev {
			t.Errorf("acknowledged %s at %d, stored at %d", key, rev, stored[key])
		}
	}
	// Only the writer writes, one revision per key: the watcher must see
	// every revision from start to final.
	want := start + 1
	for rev := range seen {
		if rev != want {
			t.Fatalf("watch saw revision %d, want %d", rev, want)
		}
		if rev == final {
			break
		}
		want++
	}
	stopWatching()
	watcher.Wait()
	t.Logf("%d writes acknowledged, %d stored, revisions %d..%d watched", len(acked), len(stored), start+1, final)
}
