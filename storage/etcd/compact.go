package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// CompactRevKey is the key, at the root of etcd's keyspace and outside any
// Config.Prefix, through which the API servers sharing an etcd (listwatch's
// and kube-apiserver's alike) take turns at compacting it. Its value is the
// revision of the latest compaction, in decimal; its version counts the
// turns taken.
const CompactRevKey = "compact_rev_key"

// DefaultCompactionPollInterval is how often a store checks etcd for
// compactions that did not go through CompactRevKey (etcdctl compact, a
// plain client's Compact) when Config.CompactionPollInterval is 0.
const DefaultCompactionPollInterval = 5 * time.Second

// Pauses of the compaction tracker.
const (
	// trackRetry is the pause before the tracker watches CompactRevKey
	// again after its watch failed.
	trackRetry = time.Second
	// probeTimeout bounds the wait for etcd to refuse a watch from a
	// compacted revision, which tells the compaction revision.
	probeTimeout = 10 * time.Second
)

// compaction is what a store knows of etcd's compactions.
type compaction struct {
	mu  sync.Mutex
	rev int64
	// changed is closed and replaced whenever rev grows.
	changed chan struct{}
	// probe asks the tracker to look for a compaction it has not seen
	// (etcd answered ErrCompacted to someone); it holds at most one request.
	probe chan struct{}
	// made counts the compactions this store's compactor made, probes the
	// probes the tracker finished (tests).
	made, probes atomic.Int64
}

func (c *compaction) init() {
	c.changed = make(chan struct{})
	c.probe = make(chan struct{}, 1)
}

// CompactedRevision implements storage.Interface: the newest compaction the
// store knows of, made by itself or, once noticed, by anyone sharing the
// etcd (see the package documentation).
func (s *Store) CompactedRevision() (int64, <-chan struct{}) {
	s.compaction.mu.Lock()
	defer s.compaction.mu.Unlock()
	return s.compaction.rev, s.compaction.changed
}

// noteCompacted records that etcd is, or is about to be, compacted at rev.
func (s *Store) noteCompacted(rev int64) {
	c := &s.compaction
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev <= c.rev {
		return
	}
	s.log.Debug("etcd compaction noticed", "revision", rev, "previous", c.rev)
	c.rev = rev
	close(c.changed)
	c.changed = make(chan struct{})
}

// noteCompactRevKey records the revision a value of CompactRevKey names.
func (s *Store) noteCompactRevKey(value []byte) {
	rev, err := strconv.ParseInt(string(value), 10, 64)
	if err != nil {
		s.log.Warn("etcd: unparsable "+CompactRevKey, "value", string(value), "err", err)
		return
	}
	s.noteCompacted(rev)
}

// requestProbe asks the tracker to find out how far etcd is compacted.
func (s *Store) requestProbe() {
	select {
	case s.compaction.probe <- struct{}{}:
	default: // one is already pending
	}
}

// compactor takes this store's turns in kube-apiserver's compaction
// protocol, so that of all the API servers on one etcd only one compacts
// per interval. At every interval each compactor runs one transaction: if
// CompactRevKey's version is still the one the compactor saw at its
// previous turn, write the key (which increments its version) with the
// revision etcd had at that previous turn; otherwise read the key. The
// compactor whose write succeeds compacts to that revision, so that every
// version stays readable for at least one interval; the others learn the
// new version and try again at their next interval. If the winner stops,
// another takes over within two intervals. The first turn only claims.
type compactor struct {
	s *Store
	// version is CompactRevKey's version as of the previous turn (0: the
	// key did not exist).
	version int64
	// rev is etcd's revision at the previous turn (0: none yet): what the
	// next won turn compacts to.
	rev int64
}

// step takes one turn and returns the revision it compacted to, 0 when it
// did not compact (the turn was another's, or it was the first). A failed
// transaction leaves the compactor as it was; a failed compaction does not
// give the turn back.
func (c *compactor) step(ctx context.Context) (int64, error) {
	resp, err := c.s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(CompactRevKey), "=", c.version)).
		Then(clientv3.OpPut(CompactRevKey, strconv.FormatInt(c.rev, 10))).
		Else(clientv3.OpGet(CompactRevKey)).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("claim compaction: %w", err)
	}
	target := c.rev
	c.rev = resp.Header.Revision
	if !resp.Succeeded {
		// Another compactor took this turn: follow its count, and take
		// note of what it compacted to.
		c.version = 0
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			c.version = kvs[0].Version
			c.s.noteCompactRevKey(kvs[0].Value)
		}
		return 0, nil
	}
	c.version++
	if target == 0 {
		return 0, nil
	}
	if _, err := c.s.cli.Compact(ctx, target); err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			// Someone compacted further without taking a turn.
			c.s.requestProbe()
			return 0, nil
		}
		return 0, fmt.Errorf("compact %d: %w", target, err)
	}
	c.s.noteCompacted(target)
	c.s.compaction.made.Add(1)
	c.s.log.Debug("etcd compacted", "revision", target)
	return target, nil
}

// runCompactor takes a turn at every tick until the store closes.
func (s *Store) runCompactor(ticks <-chan time.Time) {
	c := &compactor{s: s}
	for {
		select {
		case <-ticks:
		case <-s.lifetime.Done():
			return
		}
		if _, err := c.step(s.lifetime); err != nil && s.lifetime.Err() == nil {
			s.log.Warn("etcd compaction failed", "err", err)
		}
	}
}

// trackCompactions keeps CompactedRevision current until the store closes.
func (s *Store) trackCompactions(poll time.Duration) {
	for {
		err := s.followCompactions(poll)
		if s.lifetime.Err() != nil {
			return
		}
		s.log.Debug("etcd: following compactions failed; retrying", "err", err)
		select {
		case <-time.After(trackRetry):
		case <-s.lifetime.Done():
			return
		}
	}
}

// followCompactions reads and watches CompactRevKey, which every compactor
// speaking kube's protocol writes before it compacts, and every poll
// interval, or when asked to, probes for compactions made without it.
func (s *Store) followCompactions(poll time.Duration) error {
	ctx, cancel := context.WithCancel(s.lifetime)
	defer cancel()
	resp, err := s.cli.Get(ctx, CompactRevKey)
	if err != nil {
		return fmt.Errorf("get %s: %w", CompactRevKey, err)
	}
	if len(resp.Kvs) > 0 {
		s.noteCompactRevKey(resp.Kvs[0].Value)
	}
	wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), CompactRevKey, clientv3.WithRev(resp.Header.Revision+1))
	defer func() {
		cancel()
		for range wch { // let etcd's client finish the watch
		}
	}()
	probe := func() {
		if err := s.probeCompaction(ctx); err != nil && ctx.Err() == nil {
			s.log.Debug("etcd: probing for compactions failed", "err", err)
		}
		s.compaction.probes.Add(1)
	}
	probe()
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		select {
		case wr, ok := <-wch:
			if !ok {
				return fmt.Errorf("watch of %s ended", CompactRevKey)
			}
			if wr.CompactRevision > 0 {
				s.noteCompacted(wr.CompactRevision)
			}
			if err := wr.Err(); err != nil {
				return fmt.Errorf("watch of %s: %w", CompactRevKey, err)
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					s.noteCompactRevKey(ev.Kv.Value)
				}
			}
		case <-ticker.C:
			probe()
		case <-s.compaction.probe:
			probe()
		}
	}
}

// probeCompaction finds out whether etcd is compacted past the revision the
// store knows of and, if so, to which revision. A count-only read at the
// known revision costs etcd next to nothing and fails only if etcd has
// compacted further; etcd then refuses a watch from that revision, naming
// its compaction revision.
func (s *Store) probeCompaction(ctx context.Context) error {
	known, _ := s.CompactedRevision()
	at := max(known, 1)
	_, err := s.cli.Get(ctx, CompactRevKey, clientv3.WithRev(at), clientv3.WithCountOnly())
	if !errors.Is(err, rpctypes.ErrCompacted) {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	wch := s.cli.Watch(pctx, CompactRevKey, clientv3.WithRev(at))
	defer func() {
		cancel()
		for range wch {
		}
	}()
	for wr := range wch {
		if wr.CompactRevision > 0 {
			s.noteCompacted(wr.CompactRevision)
			return nil
		}
		if err := wr.Err(); err != nil {
			return fmt.Errorf("watch from compacted revision %d: %w", at, err)
		}
	}
	return fmt.Errorf("watch from compacted revision %d: no compaction revision: %w", at, pctx.Err())
}
