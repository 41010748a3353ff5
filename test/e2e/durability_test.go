package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/storage/etcd"
)

// writeTimeout bounds one write where a write should not fail; generous,
// for a loaded machine under the race detector.
const writeTimeout = 10 * time.Second

// ledger records what a server acknowledged: the state of each object as
// the last acknowledged write left it, and the objects whose last write's
// outcome is unknown (the server died under it).
type ledger struct {
	mu sync.Mutex
	// rv is the resourceVersion of each live object; deleted, the objects
	// whose delete was acknowledged.
	rv        map[string]string
	deleted   map[string]bool
	uncertain map[string]bool
	// order is every acknowledged write in the order of its resourceVersion
	// once sorted: name and resourceVersion.
	order []ack
	ops   int
	// progress is signalled after each acknowledgement.
	progress chan struct{}
}

type ack struct {
	name string
	rv   int64
}

// parseRV reads a resourceVersion, which is etcd's revision here; a
// malformed one reads as 0, which no check accepts.
func parseRV(rv string) int64 {
	n, _ := strconv.ParseInt(rv, 10, 64)
	return n
}

func newLedger() *ledger {
	return &ledger{rv: map[string]string{}, deleted: map[string]bool{}, uncertain: map[string]bool{}, progress: make(chan struct{}, 1)}
}

func (l *ledger) acked(name, rv string, deleted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if deleted {
		delete(l.rv, name)
		l.deleted[name] = true
	} else {
		l.rv[name] = rv
	}
	if !deleted {
		n, _ := strconv.ParseInt(rv, 10, 64)
		l.order = append(l.order, ack{name, n})
	}
	l.ops++
	select {
	case l.progress <- struct{}{}:
	default:
	}
}

func (l *ledger) unknown(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.uncertain[name] = true
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops
}

// waitFor blocks until n writes are acknowledged.
func (l *ledger) waitFor(t *testing.T, n int) {
	t.Helper()
	for l.count() < n {
		select {
		case <-l.progress:
		case <-time.After(waitTimeout):
			t.Fatalf("%d writes acknowledged within %v, want %d", l.count(), waitTimeout, n)
		}
	}
}

// sorted returns the acknowledged writes in resourceVersion order.
func (l *ledger) sorted() []ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.order)
	slices.SortFunc(out, func(a, b ack) int { return int(a.rv - b.rv) })
	return out
}

// writeLoop creates pods named prefix-0, prefix-1, … through pods until ctx
// ends or max writes were made (max <= 0: no cap); with churn it also
// updates every second pod and deletes every fifth, each with its
// resourceVersion as precondition. A write that fails leaves the object's
// state unknown; with stopOnError the loop then ends, otherwise it goes on.
func writeLoop(ctx context.Context, pods *client.Resource[*corev1.Pod], l *ledger, prefix string, max int, churn, stopOnError bool, timeout time.Duration) {
	for j := 0; ctx.Err() == nil && (max <= 0 || j < max); j++ {
		name := fmt.Sprintf("%s-%05d", prefix, j)
		// ctx ends the loop between writes, never a write in flight, whose
		// outcome would then be unknown.
		opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		ok := func() bool {
			defer cancel()
			p, err := pods.Create(opCtx, newPod(name), metav1.CreateOptions{})
			if err != nil {
				l.unknown(name)
				return false
			}
			l.acked(name, p.ResourceVersion, false)
			if !churn {
				return true
			}
			if j%2 == 0 {
				p = p.DeepCopy()
				p.Labels["updated"] = "true"
				if p, err = pods.Update(opCtx, p, metav1.UpdateOptions{}); err != nil {
					l.unknown(name)
					return false
				}
				l.acked(name, p.ResourceVersion, false)
			}
			if j%5 == 0 {
				rv := p.ResourceVersion
				// The pods are bound to a node: without a zero grace period
				// the delete would wait for the node's agent.
				var now int64
				opts := metav1.DeleteOptions{GracePeriodSeconds: &now, Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}
				if err := pods.Delete(opCtx, name, opts); err != nil {
					l.unknown(name)
					return false
				}
				// Delete does not return the revision of the delete: the
				// ledger's order holds puts only.
				l.acked(name, rv, true)
			}
			return true
		}()
		if !ok && stopOnError {
			return
		}
	}
}

// checkStored lists the pods through pods and checks them against the
// ledger: every acknowledged object is there at its acknowledged
// resourceVersion, every acknowledged delete is gone, and nothing else
// exists but objects whose last write's outcome is unknown. It returns the
// highest resourceVersion stored.
func checkStored(t *testing.T, pods *client.Resource[*corev1.Pod], l *ledger) int64 {
	t.Helper()
	list, err := pods.ListAll(t.Context(), metav1.ListOptions{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	stored := map[string]*corev1.Pod{}
	var maxRV int64
	for _, p := range list.Items {
		stored[p.Name] = p
		maxRV = max(maxRV, parseRV(p.ResourceVersion))
	}
	for name, rv := range l.rv {
		p, ok := stored[name]
		switch {
		case l.uncertain[name]:
			// Acknowledged, then a write of unknown outcome: either state.
			if ok && parseRV(p.ResourceVersion) < parseRV(rv) {
				t.Errorf("%s: stored at %s, older than the acknowledged %s", name, p.ResourceVersion, rv)
			}
		case !ok:
			t.Errorf("%s: acknowledged at resourceVersion %s, lost", name, rv)
		case p.ResourceVersion != rv:
			t.Errorf("%s: acknowledged at resourceVersion %s, stored at %s", name, rv, p.ResourceVersion)
		}
	}
	for name := range l.deleted {
		if _, ok := stored[name]; ok && !l.uncertain[name] {
			t.Errorf("%s: delete acknowledged, still stored", name)
		}
	}
	for name, p := range stored {
		if _, ok := l.rv[name]; !ok && !l.uncertain[name] {
			t.Errorf("%s: stored at %s, never acknowledged", name, p.ResourceVersion)
		}
	}
	return maxRV
}

// TestProcessRestartKeepsAcknowledgedWrites runs `listwatch apiserver` on
// an embedded etcd, writes through its HTTP API (creates, updates and
// deletes), ends the process — SIGTERM after the writes, or SIGKILL while
// they are in flight — and starts it again on the same data directory:
// every acknowledged write is there at the resourceVersion it was
// acknowledged with, and new writes get newer resourceVersions.
func TestProcessRestartKeepsAcknowledgedWrites(t *testing.T) {
	tests := []struct {
		name string
		sig  syscall.Signal
		// inFlight kills the process while the writers are writing.
		inFlight bool
	}{
		{name: "SIGTERM after writes", sig: syscall.SIGTERM},
		{name: "SIGKILL during writes", sig: syscall.SIGKILL, inFlight: true},
	}
	const writers, perWriter = 4, 40
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // mostly waiting: on fsync, on the processes
			d := newProcDirs(t)
			dataDir := filepath.Join(t.TempDir(), "etcd")
			p := startProc(t, d, "--data-dir", dataDir)
			pods := podsOf(newClient(t, p.URL, p.REST))
			l := newLedger()

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var wg sync.WaitGroup
			for i := range writers {
				max := perWriter
				if tt.inFlight {
					max = 0 // until the process dies under them
				}
				wg.Go(func() { writeLoop(ctx, pods, l, fmt.Sprintf("w%d", i), max, true, true, writeTimeout) })
			}
			if tt.inFlight {
				l.waitFor(t, writers*perWriter)
				p.stop(tt.sig)
				cancel()
				wg.Wait()
			} else {
				wg.Wait()
				p.stop(tt.sig)
			}
			t.Logf("%d writes acknowledged, %d objects of unknown outcome", l.count(), len(l.uncertain))

			p2 := startProc(t, d, "--data-dir", dataDir)
			pods2 := podsOf(newClient(t, p2.URL, p2.REST))
			maxRV := checkStored(t, pods2, l)
			for _, a := range l.sorted() {
				maxRV = max(maxRV, a.rv)
			}
			// Revisions do not restart: a new write is newer than anything
			// acknowledged before.
			np, err := pods2.Create(t.Context(), newPod("after-restart"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rv := parseRV(np.ResourceVersion); rv <= maxRV {
				t.Errorf("write after restart at resourceVersion %d, want > %d", rv, maxRV)
			}
			p2.stop(syscall.SIGTERM)
		})
	}
}

// watchLog records what a watcher received.
type watchLog struct {
	mu     sync.Mutex
	events []ack
	last   int64
	moved  chan struct{}
}

func newWatchLog() *watchLog { return &watchLog{moved: make(chan struct{}, 1)} }

func (w *watchLog) add(ev cache.Event[*corev1.Pod]) bool {
	rv := parseRV(ev.Object.ResourceVersion)
	w.mu.Lock()
	w.events = append(w.events, ack{ev.Object.Name, rv})
	w.last = rv
	w.mu.Unlock()
	select {
	case w.moved <- struct{}{}:
	default:
	}
	return true
}

func (w *watchLog) snapshot() ([]ack, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events), w.last
}

// waitFor blocks until the watcher has received resourceVersion rv, or n
// events when rv is 0.
func (w *watchLog) waitFor(t *testing.T, rv int64, n int) {
	t.Helper()
	for {
		evs, last := w.snapshot()
		if (rv > 0 && last >= rv) || (rv == 0 && len(evs) >= n) {
			return
		}
		select {
		case <-w.moved:
		case <-time.After(waitTimeout):
			t.Fatalf("watcher at resourceVersion %d with %d events after %v, want %d / %d", last, len(evs), waitTimeout, rv, n)
		}
	}
}

// checkWatched checks that the watcher received, in strictly increasing
// resourceVersion order, every acknowledged write, and nothing else but
// writes of unknown outcome.
func checkWatched(t *testing.T, got []ack, l *ledger) {
	t.Helper()
	for i := 1; i < len(got); i++ {
		if got[i].rv <= got[i-1].rv {
			t.Fatalf("watch event %d at resourceVersion %d after %d: out of order", i, got[i].rv, got[i-1].rv)
		}
	}
	seen := map[ack]bool{}
	for _, a := range got {
		seen[a] = true
	}
	acked := l.sorted()
	want := map[ack]bool{}
	for _, a := range acked {
		want[a] = true
		if !seen[a] {
			t.Errorf("acknowledged write of %s at %d not watched", a.name, a.rv)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range got {
		if !want[a] && !l.uncertain[a.name] {
			t.Errorf("watched a write of %s at %d that was never made", a.name, a.rv)
		}
	}
}

// TestEtcdMemberLoss serves the API from a 3-member etcd cluster on
// loopback ports, given all three endpoints, while a writer creates pods
// and a watcher watches them; one member is stopped mid-way: the leader,
// as a crash, or a follower, shut down. No acknowledged write is lost, the
// watch keeps flowing (re-watching from its last resourceVersion if its
// stream ends), and the watcher sees every acknowledged write in
// resourceVersion order.
func TestEtcdMemberLoss(t *testing.T) {
	tests := []struct {
		name   string
		leader bool
		stop   func(*etcd.Embedded) error
	}{
		{"leader crashes", true, (*etcd.Embedded).Kill},
		{"follower stops", false, (*etcd.Embedded).Close},
	}
	for _, tt := range tests {
		stopLeader := tt.leader
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // mostly waiting: on elections, on timeouts
			members := startEtcd(t, 3)
			srv := startInProcess(t, openStore(t, endpoints(members)), apiserver.WatchCacheConfig{}, nil)
			pods := podsOf(newClient(t, srv.URL, nil))
			start, err := pods.List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}

			l := newLedger()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			writeCtx, stopWriting := context.WithCancel(ctx)
			var writer, watcher sync.WaitGroup
			// A write in flight to the killed member hangs until its timeout;
			// a short one keeps the test short, and a write that times out
			// is only of unknown outcome.
			writer.Go(func() { writeLoop(writeCtx, pods, l, "p", 0, false, false, time.Second) })
			wl := newWatchLog()
			var rewatches int
			var watchErr error
			watcher.Go(func() {
				rewatches, watchErr = watchAll(ctx, start.ResourceVersion, func(int) *client.Resource[*corev1.Pod] { return pods }, wl.add)
			})

			const before, after = 20, 20
			l.waitFor(t, before)
			// An election may be under way on a loaded machine: wait for
			// a leader (or a follower) to pick.
			victim := -1
			for deadline := time.Now().Add(30 * time.Second); victim < 0 && time.Now().Before(deadline); {
				for i, m := range members {
					if m.IsLeader() == stopLeader {
						victim = i
						break
					}
				}
				if victim < 0 {
					time.Sleep(10 * time.Millisecond)
				}
			}
			if victim < 0 {
				t.Fatalf("no member has leader=%v: the cluster has no leader", stopLeader)
			}
			// The case is only what it says if the member stopped is the
			// leader (or not) when it stops.
			if got := members[victim].IsLeader(); got != stopLeader {
				t.Fatalf("member %d: leader=%v as it is stopped, want %v", victim, got, stopLeader)
			}
			acked := l.sorted()
			atKill := acked[len(acked)-1].rv
			t.Logf("stopping member %d (leader %v) at resourceVersion %d", victim, members[victim].IsLeader(), atKill)
			if err := tt.stop(members[victim]); err != nil {
				t.Fatal(err)
			}
			l.waitFor(t, l.count()+after)
			stopWriting()
			writer.Wait()
			acked = l.sorted()
			final := acked[len(acked)-1].rv
			wl.waitFor(t, final, 0)
			cancel()
			watcher.Wait()
			if watchErr != nil {
				t.Fatal(watchErr)
			}

			checkStored(t, pods, l)
			got, _ := wl.snapshot()
			checkWatched(t, got, l)
			flowing := 0
			for _, a := range got {
				if a.rv > atKill {
					flowing++
				}
			}
			if flowing < after {
				t.Errorf("%d events watched after the member stopped, want at least %d", flowing, after)
			}
			t.Logf("%d writes acknowledged (%d of unknown outcome), %d events watched (%d after the stop), %d re-watches",
				l.count(), len(l.uncertain), len(got), flowing, rewatches)
		})
	}
}

// TestTwoAPIServersOneEtcd runs two `listwatch apiserver` processes over
// the same etcd: a write through either is seen by a watch on the other at
// the same resourceVersion; and a client watching through A, killed
// mid-stream, fails over to B by re-watching from its last resourceVersion
// and misses nothing.
func TestTwoAPIServersOneEtcd(t *testing.T) {
	t.Parallel()
	members := startEtcd(t, 1)
	d := newProcDirs(t)
	eps := endpoints(members)[0]
	a := startProc(t, d, "--etcd-servers", eps)
	b := startProc(t, d, "--etcd-servers", eps)
	podsA := podsOf(newClient(t, a.URL, a.REST))
	podsB := podsOf(newClient(t, b.URL, b.REST))

	t.Run("write on one, watch on the other", func(t *testing.T) {
		tests := []struct {
			name         string
			write, watch *client.Resource[*corev1.Pod]
			podName      string
		}{
			{"A to B", podsA, podsB, "via-a"},
			{"B to A", podsB, podsA, "via-b"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				list, err := tt.watch.List(t.Context(), metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				w, err := tt.watch.Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				created, err := tt.write.Create(t.Context(), newPod(tt.podName), metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ev, err := w.Next()
				if err != nil {
					t.Fatal(err)
				}
				if ev.Type != cache.EventAdded || ev.Object.Name != tt.podName || ev.Object.ResourceVersion != created.ResourceVersion || ev.Object.UID != created.UID {
					t.Errorf("watch on the other server: %s %s rv %s uid %s, want ADDED %s rv %s uid %s",
						ev.Type, ev.Object.Name, ev.Object.ResourceVersion, ev.Object.UID, tt.podName, created.ResourceVersion, created.UID)
				}
				got, err := tt.watch.Get(t.Context(), tt.podName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got.ResourceVersion != created.ResourceVersion {
					t.Errorf("get on the other server: resourceVersion %s, want %s", got.ResourceVersion, created.ResourceVersion)
				}
			})
		}
	})

	t.Run("watch fails over from A to B", func(t *testing.T) {
		start, err := podsB.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := newLedger()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		writeCtx, stopWriting := context.WithCancel(ctx)
		var writer, watcher sync.WaitGroup
		writer.Go(func() { writeLoop(writeCtx, podsB, l, "f", 0, false, true, writeTimeout) })
		wl := newWatchLog()
		var rewatches int
		var watchErr error
		watcher.Go(func() {
			// The first watch goes to A; every re-watch to B.
			rewatches, watchErr = watchAll(ctx, start.ResourceVersion, func(attempt int) *client.Resource[*corev1.Pod] {
				if attempt == 0 {
					return podsA
				}
				return podsB
			}, wl.add)
		})
		const before, after = 30, 30
		wl.waitFor(t, 0, before)
		_, atKill := wl.snapshot()
		a.stop(syscall.SIGKILL)
		l.waitFor(t, l.count()+after)
		stopWriting()
		writer.Wait()
		acked := l.sorted()
		if len(l.uncertain) > 0 {
			t.Fatalf("writes through B failed: %v", l.uncertain)
		}
		final := acked[len(acked)-1].rv
		wl.waitFor(t, final, 0)
		cancel()
		watcher.Wait()
		if watchErr != nil {
			t.Fatal(watchErr)
		}
		got, _ := wl.snapshot()
		// Only this writer writes pods: the watcher must have seen exactly
		// the acknowledged writes, in order.
		if !slices.Equal(got, acked) {
			t.Errorf("watched %d events, want the %d acknowledged writes in order", len(got), len(acked))
			checkWatched(t, got, l)
		}
		if rewatches == 0 {
			t.Error("the watcher never re-watched: A's stream did not end with A")
		}
		t.Logf("A killed after the watcher reached resourceVersion %d; %d writes through B, %d events watched, %d re-watches",
			atKill, len(acked), len(got), rewatches)
	})
}
