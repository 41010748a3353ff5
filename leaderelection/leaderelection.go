// Package leaderelection elects one leader among the replicas of a
// controller-manager through a coordination.k8s.io/v1 Lease.
//
// The holder of the Lease renews it every RetryPeriod; the others watch its
// renewTime change and may take it over only once it has not changed for
// LeaseDuration, measured on their own clock from when they place the
// change: at the holder's renewTime when that falls between their last
// read without the change and the first with it, else at the nearer end
// of that window, which reaches back at most half of LeaseDuration −
// RenewDeadline. Clock skew between replicas can thus move a takeover
// earlier by at most that much; the rate of their clocks must agree
// within the other half. A leader that cannot renew within RenewDeadline
// stops leading before any other replica may take over, because
// RenewDeadline < LeaseDuration. A waiting replica wakes when the Lease
// it waits for may be taken, so a dead leader is replaced LeaseDuration
// after its last renewal, plus one request.
package leaderelection

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/listwatch/listwatch/internal/ctxtime"
)

// JitterFactor scales RetryPeriod for the waits between attempts of a
// replica that is not leading, so that candidates do not retry in lockstep.
const JitterFactor = 1.2

// ErrLeadershipLost is returned by Run when the leader could not renew its
// Lease within RenewDeadline. It is also the cause (context.Cause) of the
// end of the context given to OnStartedLeading then, and of a Sharder's
// shard whose Lease was not renewed in time.
var ErrLeadershipLost = errors.New("leaderelection: leadership lost")

// LeaseClient reads and writes Leases. The REST client implements it; an
// Update must fail with a Conflict error when the Lease's resourceVersion is
// stale, and Get with NotFound when the Lease does not exist.
type LeaseClient interface {
	Get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error)
}

// Callbacks are told of changes of leadership. Each may be nil.
type Callbacks struct {
	// OnStartedLeading runs in its own goroutine when this replica becomes
	// the leader; ctx ends when it stops leading, with ErrLeadershipLost as
	// its cause when the Lease was lost.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading is called when this replica stops leading, after the
	// context given to OnStartedLeading has ended.
	OnStoppedLeading func()
	// OnNewLeader is called when the observed leader changes, with its
	// identity ("" when the Lease was released).
	OnNewLeader func(identity string)
}

// Config configures a LeaderElector. Namespace, Name, Identity and Client are
// required; the durations default to kube-controller-manager's 15s, 10s and
// 2s.
type Config struct {
	Client    LeaseClient
	Namespace string
	Name      string
	// Identity names this replica in the Lease's holderIdentity; it must be
	// unique among the replicas (hostname plus a random suffix is usual).
	Identity string

	// LeaseDuration is how long non-leaders wait after the last observed
	// renewal before taking the Lease over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying a renewal before
	// it gives up leading; it must be less than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between attempts to acquire or renew; it
	// times JitterFactor must be less than RenewDeadline.
	RetryPeriod time.Duration
	// KeepOnCancel, when set, leaves the Lease held when Run's context ends,
	// so other replicas wait LeaseDuration. By default the Lease is released
	// on shutdown and another replica can take over at once.
	KeepOnCancel bool

	Callbacks Callbacks
	Logger    *slog.Logger
}

// Defaults used for zero durations in Config.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// LeaderElector runs one replica's side of the election.
type LeaderElector struct {
	cfg Config
	log *slog.Logger

	lease *lease

	once    runOnce
	mu      sync.Mutex
	leading bool
}

// runOnce refuses a second Run.
type runOnce struct{ ran atomic.Bool }

func (o *runOnce) start() error {
	if !o.ran.CompareAndSwap(false, true) {
		return errors.New("leaderelection: Run called twice")
	}
	return nil
}

// New validates cfg and returns a LeaderElector.
func New(cfg Config) (*LeaderElector, error) {
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewDeadline == 0 {
		cfg.RenewDeadline = DefaultRenewDeadline
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = DefaultRetryPeriod
	}
	switch {
	case cfg.Client == nil:
		return nil, errors.New("leaderelection: Client is required")
	case cfg.Name == "" || cfg.Namespace == "":
		return nil, errors.New("leaderelection: Lease Namespace and Name are required")
	case cfg.Identity == "":
		return nil, errors.New("leaderelection: Identity is required")
	case cfg.LeaseDuration < 0 || cfg.RenewDeadline < 0 || cfg.RetryPeriod < 0:
		return nil, errors.New("leaderelection: durations must be positive")
	case cfg.LeaseDuration <= cfg.RenewDeadline:
		return nil, fmt.Errorf("leaderelection: LeaseDuration %v must be greater than RenewDeadline %v", cfg.LeaseDuration, cfg.RenewDeadline)
	case float64(cfg.RenewDeadline) <= JitterFactor*float64(cfg.RetryPeriod):
		return nil, fmt.Errorf("leaderelection: RenewDeadline %v must be greater than RetryPeriod %v × %.1f", cfg.RenewDeadline, cfg.RetryPeriod, JitterFactor)
	}
	log := cmp.Or(cfg.Logger, slog.Default())
	log = log.With("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	le := &LeaderElector{cfg: cfg, log: log}
	le.lease = &lease{
		client: cfg.Client, namespace: cfg.Namespace, name: cfg.Name, identity: cfg.Identity,
		duration: cfg.LeaseDuration, maxEarly: maxEarly(cfg.LeaseDuration, cfg.RenewDeadline), log: log,
		onHolder: func(holder string) {
			log.Info("new leader observed", "leader", holder)
			if f := cfg.Callbacks.OnNewLeader; f != nil {
				f(holder)
			}
		},
	}
	return le, nil
}

// IsLeader reports whether this replica currently leads.
func (le *LeaderElector) IsLeader() bool {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.leading
}

// Leader returns the identity of the holder last observed, "" if none.
func (le *LeaderElector) Leader() string { return le.lease.lastHolder() }

// Run campaigns until this replica leads, then renews the Lease until ctx
// ends or a renewal fails for RenewDeadline. It returns nil when ctx ended
// (after releasing the Lease unless KeepOnCancel), ErrLeadershipLost when
// renewal failed. It returns only after OnStartedLeading has returned. A
// LeaderElector runs once.
func (le *LeaderElector) Run(ctx context.Context) error {
	if err := le.once.start(); err != nil {
		return err
	}
	acquired, ok := le.acquire(ctx)
	if !ok {
		return nil
	}
	leadCtx, stopLeading := context.WithCancelCause(ctx)
	var callbacks sync.WaitGroup
	if f := le.cfg.Callbacks.OnStartedLeading; f != nil {
		callbacks.Go(func() { f(leadCtx) })
	}
	err := le.renew(ctx, acquired)
	le.setLeading(false)
	// A lost Lease is the cause of the end of OnStartedLeading's context,
	// so that what runs under it can stop at once rather than wind down.
	stopLeading(err)
	callbacks.Wait()
	if err == nil && !le.cfg.KeepOnCancel {
		le.lease.release(le.cfg.RetryPeriod)
	}
	if f := le.cfg.Callbacks.OnStoppedLeading; f != nil {
		f()
	}
	return err
}

// acquire retries every RetryPeriod (jittered), or as soon as the holder's
// Lease may be taken over if that is sooner, until the Lease is ours or
// ctx ends; it reports whether it got the Lease and the time of the attempt
// that got it.
func (le *LeaderElector) acquire(ctx context.Context) (time.Time, bool) {
	le.log.Info("campaigning for leadership")
	for {
		start := time.Now()
		if le.lease.tryAcquireOrRenew(ctx) {
			le.setLeading(true)
			le.log.Info("became leader")
			return start, true
		}
		jittered := time.Duration(float64(le.cfg.RetryPeriod) * (1 + (JitterFactor-1)*rand.Float64()))
		if !ctxtime.Sleep(ctx, le.lease.wake(start, time.Now(), jittered)) {
			return time.Time{}, false
		}
	}
}

// renew keeps the Lease every RetryPeriod until ctx ends (nil) or no
// attempt succeeded within RenewDeadline of the last success
// (ErrLeadershipLost). Counting from the last success, not from the first
// failed attempt, keeps the leader's give-up time strictly before any other
// replica's takeover time, which is LeaseDuration after it saw that success.
func (le *LeaderElector) renew(ctx context.Context, last time.Time) error {
	for {
		if !ctxtime.Sleep(ctx, le.cfg.RetryPeriod) {
			return nil
		}
		deadline, cancel := context.WithDeadline(ctx, last.Add(le.cfg.RenewDeadline))
		renewed := false
		for {
			start := time.Now()
			if le.lease.tryAcquireOrRenew(deadline) {
				last, renewed = start, true
				break
			}
			if !ctxtime.Sleep(deadline, le.cfg.RetryPeriod) {
				break
			}
		}
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if !renewed {
			le.log.Warn("could not renew the lease in time; stopping leading", "renewDeadline", le.cfg.RenewDeadline)
			return ErrLeadershipLost
		}
	}
}

// maxEarly is how far before a replica saw a Lease change it may place
// the change: half the margin between LeaseDuration and RenewDeadline,
// the other half left for the rates of the replicas' clocks.
func maxEarly(leaseDuration, renewDeadline time.Duration) time.Duration {
	return (leaseDuration - renewDeadline) / 2
}

func (le *LeaderElector) setLeading(v bool) {
	le.mu.Lock()
	le.leading = v
	le.mu.Unlock()
}
