package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/listwatch/listwatch/internal/proptest"
)

const testShards = 6

// shardLog records every interval in which a replica ran a shard's work.
type shardLog struct {
	mu    sync.Mutex
	spans map[int][]interval
	// lost counts the shards whose work ended for want of a renewal
	// (the cause ErrLeadershipLost).
	lost int
}

func (l *shardLog) run(id string) func(ctx context.Context, shard int) {
	return func(ctx context.Context, shard int) {
		start := time.Now()
		<-ctx.Done()
		l.mu.Lock()
		defer l.mu.Unlock()
		l.spans[shard] = append(l.spans[shard], interval{id, start, time.Now()})
		if errors.Is(context.Cause(ctx), ErrLeadershipLost) {
			l.lost++
		}
	}
}

// lastEnd is when id last stopped running a shard.
func (l *shardLog) lastEnd(id string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, spans := range l.spans {
		for _, sp := range spans {
			if sp.id == id && sp.end.After(last) {
				last = sp.end
			}
		}
	}
	return last
}

// overlaps reports every two intervals in which two replicas ran one
// shard at once.
func (l *shardLog) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for shard, spans := range l.spans {
		for i, a := range spans {
			for _, b := range spans[i+1:] {
				if a.start.Before(b.end) && b.start.Before(a.end) {
					out = append(out, fmt.Sprintf("shard %d: %s ran it %v–%v and %s %v–%v", shard, a.id, a.start, a.end, b.id, b.start, b.end))
				}
			}
		}
	}
	return out
}

type shardReplica struct {
	id     string
	client *partitionable
	s      *Sharder
	cancel context.CancelFunc
	done   chan error
}

func startShardReplica(t *testing.T, store *leaseStore, log *shardLog, id string) *shardReplica {
	t.Helper()
	r := &shardReplica{id: id, client: store.client(), done: make(chan error, 1)}
	s, err := NewSharder(ShardConfig{
		Client: r.client, Namespace: "kube-system", Name: "cm", Identity: id,
		Shards: testShards, Run: log.run(id), Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	ctx, cancel := context.WithCancel(t.Context())
	r.cancel = cancel
	go func() { r.done <- s.Run(ctx) }()
	return r
}

func (r *shardReplica) stop() {
	r.cancel()
	<-r.done
}

// owners checks that the replicas hold every shard exactly once between
// them and returns how many each holds.
func owners(t *testing.T, rs ...*shardReplica) []int {
	t.Helper()
	var all []int
	counts := make([]int, len(rs))
	for i, r := range rs {
		owned := r.s.Owned()
		counts[i] = len(owned)
		all = append(all, owned...)
	}
	slices.Sort(all)
	if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(all, want) {
		t.Fatalf("shards held %v (per replica %v), want each of %v once", all, counts, want)
	}
	return counts
}

// waitFor sleeps in steps of 100ms until cond holds and returns how long
// that took, failing after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

func heldBy(rs []*shardReplica, want ...int) func() bool {
	return func() bool {
		for i, r := range rs {
			if len(r.s.Owned()) != want[i] {
				return false
			}
		}
		return true
	}
}

func TestNewSharderValidation(t *testing.T) {
	store := newLeaseStore()
	run := func(context.Context, int) {}
	tests := []struct {
		name string
		cfg  ShardConfig
	}{
		{"no client", ShardConfig{Namespace: "ns", Name: "g", Identity: "a", Shards: 1, Run: run}},
		{"no name", ShardConfig{Client: store.client(), Namespace: "ns", Identity: "a", Shards: 1, Run: run}},
		{"no shards", ShardConfig{Client: store.client(), Namespace: "ns", Name: "g", Identity: "a", Run: run}},
		{"no run", ShardConfig{Client: store.client(), Namespace: "ns", Name: "g", Identity: "a", Shards: 2}},
		{"deadline past duration", ShardConfig{Client: store.client(), Namespace: "ns", Name: "g", Identity: "a", Shards: 2, Run: run,
			LeaseDuration: time.Second, RenewDeadline: 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewSharder(tt.cfg); err == nil {
				t.Fatal("NewSharder accepted an invalid config")
			}
		})
	}
}

func TestShareOf(t *testing.T) {
	tests := []struct {
		shards int
		live   []string
		want   map[string]int
	}{
		{6, []string{"a"}, map[string]int{"a": 6}},
		{6, []string{"b", "a", "c"}, map[string]int{"a": 2, "b": 2, "c": 2}},
		{6, []string{"d", "c", "b", "a"}, map[string]int{"a": 2, "b": 2, "c": 1, "d": 1}},
		{2, []string{"a", "b", "c"}, map[string]int{"a": 1, "b": 1, "c": 0}},
		{5, []string{"a", "a", "b"}, map[string]int{"a": 3, "b": 2}},
	}
	for _, tt := range tests {
		total := 0
		for me, want := range tt.want {
			got := shareOf(tt.shards, tt.live, me)
			if got != want {
				t.Errorf("shareOf(%d, %v, %s) = %d, want %d", tt.shards, tt.live, me, got, want)
			}
			total += got
		}
		if total != tt.shards {
			t.Errorf("shares of %v add to %d, want %d", tt.live, total, tt.shards)
		}
	}
}

// TestSharderLifecycle walks three replicas through joining, a partition,
// its healing and a graceful leave, checking the shares and how long each
// handover took, and that no shard ever ran on two replicas at once.
func TestSharderLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, log := newLeaseStore(), &shardLog{spans: map[int][]interval{}}
		a := startShardReplica(t, store, log, "a")
		synctest.Wait()
		owners(t, a)

		b := startShardReplica(t, store, log, "b")
		joined := waitFor(t, 3*DefaultRetryPeriod, "b takes half", heldBy([]*shardReplica{a, b}, 3, 3))
		owners(t, a, b)
		c := startShardReplica(t, store, log, "c")
		waitFor(t, 3*DefaultRetryPeriod, "c takes a third", heldBy([]*shardReplica{a, b, c}, 2, 2, 2))
		owners(t, a, b, c)

		// A partition: c stops its work by its renew deadline, and a and
		// b take its shards once its Leases expired.
		c.client.cut.Store(true)
		cut := time.Now()
		takeover := waitFor(t, 2*DefaultLeaseDuration, "a and b take c's shards", heldBy([]*shardReplica{a, b}, 3, 3))
		log.mu.Lock()
		lost := log.lost
		log.mu.Unlock()
		if lost != 2 {
			t.Errorf("%d shards' work ended with ErrLeadershipLost as the cause, want c's 2", lost)
		}
		if n := len(c.s.Owned()); n != 0 {
			t.Errorf("c still holds %d shards", n)
		}
		if end := log.lastEnd("c"); end.Sub(cut) > DefaultRenewDeadline {
			t.Errorf("c ran shards until %v after it was cut off; want at most RenewDeadline %v", end.Sub(cut), DefaultRenewDeadline)
		}
		// Taken LeaseDuration after c's last renewal, which came at most
		// a RetryPeriod before the cut (waitFor polls every 100 ms).
		if limit := DefaultLeaseDuration + 100*time.Millisecond; takeover > limit {
			t.Errorf("c's shards were taken over %v after the partition; want within %v", takeover, limit)
		}
		owners(t, a, b)

		c.client.cut.Store(false)
		waitFor(t, 3*DefaultRetryPeriod, "c back to a third", heldBy([]*shardReplica{a, b, c}, 2, 2, 2))
		owners(t, a, b, c)

		// A graceful leave releases at once.
		b.stop()
		left := waitFor(t, 3*DefaultRetryPeriod, "a and c take b's shards", heldBy([]*shardReplica{a, c}, 3, 3))
		owners(t, a, c)
		a.stop()
		c.stop()
		for _, o := range log.overlaps() {
			t.Error(o)
		}
		t.Logf("join rebalanced in %v, partition taken over in %v, leave in %v", joined, takeover, left)
	})
}

// TestSharderProperty runs three replicas, their clocks skewed at random,
// through random partitions, heals and restarts in virtual time. No shard ever runs on two replicas
// at once, and once the network is whole again every shard is held once,
// two per replica.
func TestSharderProperty(t *testing.T) {
	proptest.ForEachSeed(t, 100, func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 11))
		store, log := newLeaseStore(), &shardLog{spans: map[int][]interval{}}
		store.skews = randomSkews(rng, 3)
		rs := make([]*shardReplica, 3)
		for i := range rs {
			rs[i] = startShardReplica(t, store, log, fmt.Sprintf("r%d", i))
		}
		for range 20 {
			time.Sleep(time.Duration(rng.Int64N(int64(20 * time.Second))))
			i := rng.IntN(len(rs))
			r := rs[i]
			switch rng.IntN(3) {
			case 0:
				r.client.cut.Store(!r.client.cut.Load())
			case 1:
				r.stop()
				rs[i] = startShardReplica(t, store, log, r.id)
			case 2:
				r.client.cut.Store(true)
				time.Sleep(time.Duration(rng.Int64N(int64(12 * time.Second))))
				r.client.cut.Store(false)
			}
		}
		for _, r := range rs {
			r.client.cut.Store(false)
		}
		time.Sleep(DefaultLeaseDuration + 4*DefaultRetryPeriod)
		if counts := owners(t, rs...); !slices.Equal(counts, []int{2, 2, 2}) {
			t.Errorf("seed %d: shares %v after healing, want 2 each", seed, counts)
		}
		for _, r := range rs {
			r.stop()
		}
		for _, o := range log.overlaps() {
			t.Errorf("seed %d: %s", seed, o)
		}
	})
}
