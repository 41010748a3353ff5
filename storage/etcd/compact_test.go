package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	kubeetcd "k8s.io/apiserver/pkg/storage/etcd3"

	"github.com/listwatch/listwatch/storage"
)

// outsideClient is a plain etcd client on e, someone other than the
// stores under test: etcdctl, or a kube-apiserver.
func outsideClient(t *testing.T, e *Embedded) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, TLS: e.ClientConfig().TLS, DialTimeout: DefaultDialTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// etcdCompacted returns the revision etcd is compacted at, 0 if never: the
// least revision a read at which succeeds (a read at revision r fails iff r
// is below the compaction), found by bisection.
func etcdCompacted(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	readable := func(rev int64) bool {
		_, err := cli.Get(t.Context(), "probe", clientv3.WithRev(rev), clientv3.WithCountOnly())
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			t.Fatal(err)
		}
		return err == nil
	}
	if readable(1) {
		return 0
	}
	resp, err := cli.Get(t.Context(), "probe", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := int64(1), resp.Header.Revision // !readable(lo), readable(hi)
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; readable(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// compactRevKey returns the version and value of CompactRevKey.
func compactRevKey(t *testing.T, cli *clientv3.Client) (version, value int64) {
	t.Helper()
	resp, err := cli.Get(t.Context(), CompactRevKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0, 0
	}
	value, err = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Kvs[0].Version, value
}

// waitCompacted waits until s knows of a compaction at want exactly.
func waitCompacted(t *testing.T, s *Store, want int64) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		got, changed := s.CompactedRevision()
		if got == want {
			return
		}
		if got > want {
			t.Fatalf("CompactedRevision = %d, want %d", got, want)
		}
		select {
		case <-changed:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("CompactedRevision still %d after %v, want %d", got, waitTimeout, want)
		}
	}
}

// waitProbed waits until the compaction tracker of s has made its first
// probe, after which, polling aside, only news makes it probe again.
func waitProbed(t *testing.T, s *Store) {
	t.Helper()
	for deadline := time.Now().Add(waitTimeout); s.compaction.probes.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the compaction tracker never probed")
		}
	}
}

// turnTaker is a party of the compaction protocol: one of listwatch's
// compactors, or kube-apiserver's.
type turnTaker struct {
	name string
	// target is what the party compacts to if it wins its next turn.
	target func() int64
	step   func(ctx context.Context) error
}

// TestCompactorsTakeTurns runs two listwatch compactors and kube-apiserver's
// own (k8s.io/apiserver's etcd3.Compact, as its compaction loop calls it)
// on one etcd, a turn each per interval, in a different order every
// interval: exactly one of them compacts per interval — the first to take
// its turn, to the revision it saw at its previous turn — and the others
// neither compact nor fail; every listwatch store knows of each compaction
// once the interval is over.
func TestCompactorsTakeTurns(t *testing.T) {
	e := startServer(t)
	ctx := t.Context()
	a, b := newStore(t, e, nil), newStore(t, e, nil)
	ca, cb := &compactor{s: a}, &compactor{s: b}
	kubeCli := outsideClient(t, e)
	var kubeVersion, kubeRev int64
	parties := []turnTaker{
		{"listwatch A", func() int64 { return ca.rev }, func(ctx context.Context) error { _, err := ca.step(ctx); return err }},
		{"listwatch B", func() int64 { return cb.rev }, func(ctx context.Context) error { _, err := cb.step(ctx); return err }},
		{"kube-apiserver", func() int64 { return kubeRev }, func(ctx context.Context) error {
			var err error
			kubeVersion, kubeRev, _, err = kubeetcd.Compact(ctx, kubeCli, kubeVersion, kubeRev)
			return err
		}},
	}
	wins := map[string]int{}
	const intervals = 7
	for interval := range intervals {
		for i := range 3 {
			if _, err := a.Create(ctx, fmt.Sprintf("/k/%d-%d", interval, i), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		var compactedTo int64
		for i := range parties {
			p := parties[(interval+i)%len(parties)]
			target := p.target()
			version, _ := compactRevKey(t, kubeCli)
			before := etcdCompacted(t, kubeCli)
			if err := p.step(ctx); err != nil {
				t.Fatalf("interval %d: %s: %v", interval, p.name, err)
			}
			versionAfter, value := compactRevKey(t, kubeCli)
			after := etcdCompacted(t, kubeCli)
			switch {
			case i > 0:
				if versionAfter != version || after != before {
					t.Errorf("interval %d: %s, turn %d: %s's version %d → %d, etcd compacted %d → %d; want the turn lost, nothing compacted",
						interval, p.name, i, CompactRevKey, version, versionAfter, before, after)
				}
			case interval == 0:
				if versionAfter != version+1 || after != 0 {
					t.Errorf("interval 0: %s, first: %s's version %d → %d, etcd compacted at %d; want the turn won, nothing compacted",
						p.name, CompactRevKey, version, versionAfter, after)
				}
			default:
				if versionAfter != version+1 || after != target || value != target || target <= before {
					t.Errorf("interval %d: %s, first: %s version %d → %d, value %d; etcd compacted %d → %d; want the turn won and a compaction at %d",
						interval, p.name, CompactRevKey, version, versionAfter, value, before, after, target)
				}
				wins[p.name]++
				compactedTo = after
			}
		}
		if compactedTo == 0 {
			continue
		}
		// The winner knows at once; the losers read the key in their
		// transactions.
		for name, s := range map[string]*Store{"A": a, "B": b} {
			if got, _ := s.CompactedRevision(); got != compactedTo {
				t.Errorf("interval %d: store %s: CompactedRevision %d, want %d", interval, name, got, compactedTo)
			}
		}
	}
	if got, want := a.compaction.made.Load()+b.compaction.made.Load(), int64(wins["listwatch A"]+wins["listwatch B"]); got != want {
		t.Errorf("listwatch compactors compacted %d times, want %d", got, want)
	}
	for _, p := range parties {
		if wins[p.name] < 2 {
			t.Errorf("%s compacted %d times in %d intervals, want at least 2: %v", p.name, wins[p.name], intervals, wins)
		}
	}
}

// TestCompactionInterval runs the compactors of two stores on one etcd on
// their own tickers: they compact, never more than once per turn claimed,
// and both stores learn of the compactions.
func TestCompactionInterval(t *testing.T) {
	e := startServer(t)
	ctx := t.Context()
	interval := func(c *Config) { c.CompactionInterval = 20 * time.Millisecond }
	a, b := newStore(t, e, interval), newStore(t, e, interval)
	cli := outsideClient(t, e)
	deadline := time.Now().Add(waitTimeout)
	for i := 0; ; i++ {
		if _, err := a.Create(ctx, fmt.Sprintf("/k/%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
		ra, _ := a.CompactedRevision()
		rb, _ := b.CompactedRevision()
		if version, _ := compactRevKey(t, cli); version >= 5 && ra > 0 && rb > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: compacted at %d and %d", waitTimeout, ra, rb)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := errors.Join(a.Close(), b.Close()); err != nil {
		t.Fatal(err)
	}
	version, value := compactRevKey(t, cli)
	made := a.compaction.made.Load() + b.compaction.made.Load()
	if made == 0 || made > version-1 {
		t.Errorf("%d compactions for %d turns claimed (the first compacts nothing)", made, version)
	}
	// Close may have come between a won turn and its compaction.
	if got := etcdCompacted(t, cli); got == 0 || got > value {
		t.Errorf("etcd compacted at %d, %s says %d", got, CompactRevKey, value)
	}
}

// TestNoticesCompactions: a store learns of compactions made by others —
// through CompactRevKey (kube-apiserver's compactor, here the function its
// loop calls), with a plain client's Compact (etcdctl compact), and from
// etcd's ErrCompacted — and then lists and watches below them fail.
func TestNoticesCompactions(t *testing.T) {
	e := startServer(t)
	never := func(c *Config) { c.CompactionPollInterval = time.Hour }
	write := func(t *testing.T, s *Store) int64 {
		t.Helper()
		rev, err := s.Create(t.Context(), fmt.Sprintf("/n/%d", time.Now().UnixNano()), []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	expired := func(t *testing.T, s *Store, rev int64) {
		t.Helper()
		if _, err := s.List(t.Context(), "/n/", storage.ListOptions{Revision: rev}); !errors.Is(err, storage.ErrCompacted) {
			t.Errorf("List at %d: %v, want ErrCompacted", rev, err)
		}
		if _, err := s.Watch(t.Context(), "/n/", rev); !errors.Is(err, storage.ErrCompacted) {
			t.Errorf("Watch from %d: %v, want ErrCompacted", rev, err)
		}
	}

	t.Run("compact_rev_key", func(t *testing.T) {
		// No polling: only the watch of the key can tell.
		s := newStore(t, e, never)
		waitProbed(t, s)
		cli := outsideClient(t, e)
		version, _ := compactRevKey(t, cli)
		old := write(t, s)
		version, rev, _, err := kubeetcd.Compact(t.Context(), cli, version, 0) // claims, compacts nothing
		if err != nil {
			t.Fatal(err)
		}
		write(t, s)
		if _, _, compacted, err := kubeetcd.Compact(t.Context(), cli, version, rev); err != nil || compacted != rev {
			t.Fatalf("kube's Compact: compacted %d, %v; want %d", compacted, err, rev)
		}
		waitCompacted(t, s, rev)
		expired(t, s, old)
	})

	t.Run("plain", func(t *testing.T) {
		s := newStore(t, e, func(c *Config) { c.CompactionPollInterval = 10 * time.Millisecond })
		old := write(t, s)
		rev := write(t, s)
		if _, err := outsideClient(t, e).Compact(t.Context(), rev); err != nil {
			t.Fatal(err)
		}
		waitCompacted(t, s, rev)
		expired(t, s, old)
	})

	t.Run("ErrCompacted", func(t *testing.T) {
		s := newStore(t, e, never)
		// Only the ErrCompacted below can tell of the compaction.
		waitProbed(t, s)
		known, _ := s.CompactedRevision()
		old := write(t, s)
		write(t, s)
		rev := write(t, s)
		if _, err := outsideClient(t, e).Compact(t.Context(), rev); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.CompactedRevision(); got != known {
			t.Fatalf("CompactedRevision %d before any news, want %d", got, known)
		}
		if _, err := s.List(t.Context(), "/n/", storage.ListOptions{Revision: old}); !errors.Is(err, storage.ErrCompacted) {
			t.Fatalf("List at %d: %v, want ErrCompacted", old, err)
		}
		// At once, what the error proves; then, from etcd, the revision.
		if got, _ := s.CompactedRevision(); got <= old {
			t.Errorf("CompactedRevision %d after ErrCompacted at %d", got, old)
		}
		waitCompacted(t, s, rev)
	})
}
