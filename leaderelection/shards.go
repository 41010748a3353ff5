package leaderelection

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// ShardLeaseClient is a LeaseClient that also lists Leases by label
// selector, by which the replicas of a Sharder find one another and read
// every shard's Lease in one request.
type ShardLeaseClient interface {
	LeaseClient
	List(ctx context.Context, namespace, labelSelector string) ([]coordinationv1.Lease, error)
}

// GroupLabel is the label on every Lease of a Sharder's group; its value
// is ShardConfig.Name.
const GroupLabel = "leaderelection.listwatch.io/group"

// ShardConfig configures a Sharder. Client, Namespace, Name, Identity,
// Shards and Run are required; the durations default as Config's do.
type ShardConfig struct {
	Client    ShardLeaseClient
	Namespace string
	// Name names the group: shard i is held through the Lease
	// Name-shard-i, and each replica announces itself through its member
	// Lease, Name-member-<hash of its identity>. Every replica of a group
	// must be given the same Shards.
	Name     string
	Identity string
	Shards   int

	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// Run does one shard's work while this replica holds the shard: it is
	// called in a goroutine of its own when the shard is taken, and ctx
	// ends when it must stop — the replica is giving the shard to another,
	// could not renew its Lease within RenewDeadline (ctx's cause is then
	// ErrLeadershipLost: stop at once, another replica may take the shard
	// soon), or is stopping. The
	// shard's Lease is given up only after Run has returned, so no two
	// replicas run one shard at once.
	Run func(ctx context.Context, shard int)
	// OnChange, when set, is called with the shards this replica holds,
	// in order, whenever they change.
	OnChange func(shards []int)
	Logger   *slog.Logger
}

// A Sharder splits a fixed number of shards among the live replicas of a
// group, each shard held through a Lease as LeaderElector holds its one:
// the holder renews it every RetryPeriod and stops the shard's work when
// it cannot renew within RenewDeadline, and another replica takes it over
// only once its record has not changed for LeaseDuration after its last
// renewal, as the LeaderElector's Lease is.
//
// The replicas balance by themselves. Each renews a member Lease; the live
// members (those whose member Lease changed within LeaseDuration), in the
// order of their identities, each hold Shards/members shards, the first
// Shards%members of them one more. A replica over its share gives back
// its highest shards (their work stopped first, then their Leases
// released, so the next holder takes them at once); one under its share
// takes free and expired shards. A replica that joins thus takes shards
// from the others within a few RetryPeriods, and the shards of one that
// dies are taken over LeaseDuration after its last renewal (and so within
// LeaseDuration of its death), plus one read and one write — when the
// others read the group's Leases at least every half of LeaseDuration −
// RenewDeadline; when their rounds are slower, by as much later (see
// LeaderElector for how a renewal is placed in time).
type Sharder struct {
	cfg    ShardConfig
	log    *slog.Logger
	member *lease
	shards []*lease
	// members are the member Leases seen, by name.
	members map[string]*lease

	mu   sync.Mutex
	held map[int]*heldShard
	// lost are the shards whose work was stopped by their deadline, until
	// that work has ended: a shard taken again waits for it.
	lost map[int]*heldShard
	once runOnce
}

// heldShard is a shard this replica holds and runs.
type heldShard struct {
	stop context.CancelCauseFunc
	// lost ends the work when no renewal succeeds by RenewDeadline after
	// the last one; renewed pushes that deadline back.
	lost *time.Timer
	done chan struct{}
}

// NewSharder validates cfg and returns a Sharder.
func NewSharder(cfg ShardConfig) (*Sharder, error) {
	base, err := New(Config{
		Client: cfg.Client, Namespace: cfg.Namespace, Name: cfg.Name, Identity: cfg.Identity,
		LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
		Logger: cfg.Logger,
	})
	switch {
	case err != nil:
		return nil, err
	case cfg.Shards < 1:
		return nil, fmt.Errorf("leaderelection: Shards must be at least 1, not %d", cfg.Shards)
	case cfg.Run == nil:
		return nil, errors.New("leaderelection: Run is required")
	}
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = base.cfg.LeaseDuration, base.cfg.RenewDeadline, base.cfg.RetryPeriod
	log := cmp.Or(cfg.Logger, slog.Default()).With("group", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	s := &Sharder{cfg: cfg, log: log, members: map[string]*lease{}, held: map[int]*heldShard{}, lost: map[int]*heldShard{}}
	labels := map[string]string{GroupLabel: cfg.Name}
	s.member = s.lease(memberLeaseName(cfg.Name, cfg.Identity), labels)
	for i := range cfg.Shards {
		s.shards = append(s.shards, s.lease(shardLeaseName(cfg.Name, i), labels))
	}
	return s, nil
}

func (s *Sharder) lease(name string, labels map[string]string) *lease {
	return &lease{
		client: s.cfg.Client, namespace: s.cfg.Namespace, name: name, identity: s.cfg.Identity,
		duration: s.cfg.LeaseDuration, maxEarly: maxEarly(s.cfg.LeaseDuration, s.cfg.RenewDeadline),
		labels: labels, log: s.log,
	}
}

func shardLeaseName(group string, shard int) string {
	return group + "-shard-" + strconv.Itoa(shard)
}

// memberLeaseName names a replica's member Lease by a hash of its
// identity, which need not be a valid object name.
func memberLeaseName(group, identity string) string {
	h := fnv.New64a()
	h.Write([]byte(identity))
	return fmt.Sprintf("%s-member-%016x", group, h.Sum64())
}

// Owned returns the shards this replica holds, in order.
func (s *Sharder) Owned() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownedLocked()
}

func (s *Sharder) ownedLocked() []int {
	owned := make([]int, 0, len(s.held))
	for i := range s.held {
		owned = append(owned, i)
	}
	slices.Sort(owned)
	return owned
}

// Run takes, keeps and gives back shards every RetryPeriod until ctx
// ends, then stops the work of every shard held, releases their Leases and
// its member Lease, and returns nil. A Sharder runs once.
func (s *Sharder) Run(ctx context.Context) error {
	if err := s.once.start(); err != nil {
		return err
	}
	s.log.Info("joining the group", "shards", s.cfg.Shards)
	for {
		t := time.NewTimer(s.wait(s.step(ctx), time.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			for _, i := range s.Owned() {
				s.giveBack(i)
			}
			s.mu.Lock()
			lost := s.lost
			s.lost = map[int]*heldShard{}
			s.mu.Unlock()
			for _, h := range lost {
				<-h.done
			}
			s.member.release(s.cfg.RetryPeriod)
			return nil
		case <-t.C:
		}
	}
}

// step is one round: read the group's Leases, then at once announce this
// replica, renew the shards held (dropping those whose work ended) and
// take shards towards this replica's share, then give back what is over
// it. The takes do not wait for the renewals: a round woken by a dead
// replica's expiring Lease takes its shards one read and one write after
// the moment it may. It returns the time its decisions were taken at.
func (s *Sharder) step(ctx context.Context) time.Time {
	now := time.Now()
	records, err := s.cfg.Client.List(ctx, s.cfg.Namespace, GroupLabel+"="+s.cfg.Name)
	received := time.Now()
	if err != nil {
		// The shards held keep their work until their deadline: a failed
		// read is not a lost Lease.
		s.log.Debug("listing the group's leases failed", "err", err)
		var wg sync.WaitGroup
		wg.Go(func() { s.member.tryAcquireOrRenew(ctx) })
		s.renewHeld(ctx, s.Owned(), nil)
		wg.Wait()
		return now
	}
	current := make(map[string]*coordinationv1.Lease, len(records))
	for i := range records {
		current[records[i].Name] = &records[i]
	}
	live := []string{s.cfg.Identity}
	for name, rec := range current {
		if !isMemberOf(name, s.cfg.Name) || name == s.member.name {
			continue
		}
		m := s.members[name]
		if m == nil {
			m = s.lease(name, nil)
			s.members[name] = m
		}
		m.observe(rec, now, received)
		if h := holderOf(rec); h != "" && now.Before(m.expiry()) {
			live = append(live, h)
		}
	}
	for _, l := range s.shards {
		if rec := current[l.name]; rec != nil {
			l.observe(rec, now, received)
		}
	}
	share := shareOf(s.cfg.Shards, live, s.cfg.Identity)
	owned := s.Owned()

	var wg sync.WaitGroup
	wg.Go(func() {
		if rec := current[s.member.name]; rec != nil {
			s.member.observe(rec, now, received)
			s.member.takeOrRenew(ctx, rec, time.Now())
		} else {
			s.member.tryAcquireOrRenew(ctx)
		}
	})
	held := slices.Clone(owned)
	wg.Go(func() { s.renewHeld(ctx, held, current) })
	for i, l := range s.shards {
		if len(owned) >= share {
			break
		}
		if slices.Contains(owned, i) {
			continue
		}
		rec := current[l.name]
		if rec != nil && holderOf(rec) != "" && holderOf(rec) != s.cfg.Identity && now.Before(l.expiry()) {
			continue
		}
		start := time.Now()
		if l.takeOrRenew(ctx, rec, start) {
			s.start(ctx, i, start)
			owned = append(owned, i)
		}
	}
	wg.Wait()

	for len(owned) > share {
		last := owned[len(owned)-1]
		s.giveBack(last)
		owned = owned[:len(owned)-1]
	}
	return now
}

// wait is how long after now, the end of a round whose decisions were
// taken at began, until the next round: RetryPeriod, or less when a
// Lease another replica holds may be taken over sooner — a member's, whose
// end raises this replica's share, or a shard's, which it may then take —
// so that a dead replica's shards are taken over the moment their Leases
// allow, LeaseDuration after their last renewal. Such early rounds come
// only when a replica stopped renewing: live replicas' Leases never get
// that close to expiring.
func (s *Sharder) wait(began, now time.Time) time.Duration {
	d := s.cfg.RetryPeriod
	for _, m := range s.members {
		d = m.wake(began, now, d)
	}
	for _, l := range s.shards {
		d = l.wake(began, now, d)
	}
	return d
}

// renewHeld renews the Leases of the shards owned that are still held, all
// at once, from their records in current (read again where current has
// none), each success
// pushing the shard's deadline back. At once: a replica holding many
// shards of a slow server must not let the last one's deadline pass while
// it renews the first.
func (s *Sharder) renewHeld(ctx context.Context, owned []int, current map[string]*coordinationv1.Lease) {
	var wg sync.WaitGroup
	for _, i := range owned {
		s.mu.Lock()
		h := s.held[i]
		s.mu.Unlock()
		if h == nil {
			continue // lost meanwhile
		}
		l, rec := s.shards[i], current[s.shards[i].name]
		wg.Go(func() {
			start := time.Now()
			var ok bool
			if rec != nil {
				ok = l.takeOrRenew(ctx, rec, start)
			} else {
				ok = l.tryAcquireOrRenew(ctx)
			}
			if ok {
				h.lost.Reset(time.Until(start.Add(s.cfg.RenewDeadline)))
			}
		})
	}
	wg.Wait()
}

// start runs shard i's work, its deadline RenewDeadline after taken, the
// start of the attempt that took it.
func (s *Sharder) start(ctx context.Context, i int, taken time.Time) {
	s.mu.Lock()
	prev := s.lost[i]
	delete(s.lost, i)
	s.mu.Unlock()
	if prev != nil {
		<-prev.done
	}
	wctx, stop := context.WithCancelCause(ctx)
	h := &heldShard{stop: stop, done: make(chan struct{})}
	h.lost = time.AfterFunc(time.Until(taken.Add(s.cfg.RenewDeadline)), func() { s.lose(i, h) })
	go func() {
		defer close(h.done)
		s.cfg.Run(wctx, i)
	}()
	s.mu.Lock()
	s.held[i] = h
	owned := s.ownedLocked()
	s.mu.Unlock()
	s.log.Info("took a shard", "shard", i, "holding", owned)
	s.changed(owned)
}

// lose stops the work of shard i, held as h, whose Lease was not renewed
// by its deadline: another replica may take it over soon.
func (s *Sharder) lose(i int, h *heldShard) {
	s.mu.Lock()
	if s.held[i] != h {
		s.mu.Unlock()
		return
	}
	delete(s.held, i)
	s.lost[i] = h
	owned := s.ownedLocked()
	s.mu.Unlock()
	h.stop(ErrLeadershipLost)
	s.log.Warn("could not renew a shard's lease in time; its work stopped", "shard", i, "renewDeadline", s.cfg.RenewDeadline, "holding", owned)
	s.changed(owned)
}

// giveBack stops shard i's work, waits for it, and then releases its
// Lease.
func (s *Sharder) giveBack(i int) {
	if s.forget(i) {
		s.shards[i].release(s.cfg.RetryPeriod)
	}
}

// forget stops shard i's work and waits for it to end; it reports whether
// the shard was held.
func (s *Sharder) forget(i int) bool {
	s.mu.Lock()
	h, ok := s.held[i]
	delete(s.held, i)
	owned := s.ownedLocked()
	s.mu.Unlock()
	if !ok {
		return false
	}
	h.lost.Stop()
	h.stop(nil)
	<-h.done
	s.log.Info("gave up a shard", "shard", i, "holding", owned)
	s.changed(owned)
	return true
}

func (s *Sharder) changed(owned []int) {
	if f := s.cfg.OnChange; f != nil {
		f(owned)
	}
}

// isMemberOf reports whether name is a member Lease of group.
func isMemberOf(name, group string) bool {
	prefix := group + "-member-"
	return len(name) == len(prefix)+16 && name[:len(prefix)] == prefix
}

// shareOf is how many of shards the replica me holds among the live
// replicas: an equal share, one more for the first shards%len(live) of
// them in the order of their identities.
func shareOf(shards int, live []string, me string) int {
	live = slices.Clone(live)
	slices.Sort(live)
	live = slices.Compact(live)
	share := shards / len(live)
	if slices.Index(live, me) < shards%len(live) {
		share++
	}
	return share
}
