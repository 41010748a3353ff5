package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/internal/proptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var leasesGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// leaseStore is an in-memory Lease API with resourceVersion preconditions,
// standing in for the API server in these unit tests of the election alone.
type leaseStore struct {
	mu     sync.Mutex
	rv     int
	leases map[string]*coordinationv1.Lease
	// skews, set before any replica starts, are how far each holder's
	// clock is off: the times it writes into its Leases are shifted by
	// as much.
	skews map[string]time.Duration
}

// stamp shifts the times in l, written by its holder, by that holder's
// skew.
func (s *leaseStore) stamp(l *coordinationv1.Lease) {
	skew := s.skews[holderOf(l)]
	if skew == 0 {
		return
	}
	for _, t := range []*metav1.MicroTime{l.Spec.RenewTime, l.Spec.AcquireTime} {
		if t != nil {
			t.Time = t.Add(skew)
		}
	}
}

func newLeaseStore() *leaseStore { return &leaseStore{leases: map[string]*coordinationv1.Lease{}} }

// client returns a LeaseClient for one replica; cutting it makes every call
// fail as a network partition would.
func (s *leaseStore) client() *partitionable { return &partitionable{store: s} }

type partitionable struct {
	store *leaseStore
	cut   atomic.Bool
}

var errPartitioned = errors.New("connection refused")

func (c *partitionable) Get(_ context.Context, ns, name string) (*coordinationv1.Lease, error) {
	if c.cut.Load() {
		return nil, errPartitioned
	}
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(leasesGR, name)
	}
	return l.DeepCopy(), nil
}

func (c *partitionable) Create(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if c.cut.Load() {
		return nil, errPartitioned
	}
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	key := l.Namespace + "/" + l.Name
	if _, ok := s.leases[key]; ok {
		return nil, apierrors.NewAlreadyExists(leasesGR, l.Name)
	}
	s.rv++
	l = l.DeepCopy()
	l.ResourceVersion = strconv.Itoa(s.rv)
	s.stamp(l)
	s.leases[key] = l
	return l.DeepCopy(), nil
}

func (c *partitionable) Update(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if c.cut.Load() {
		return nil, errPartitioned
	}
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	key := l.Namespace + "/" + l.Name
	cur, ok := s.leases[key]
	if !ok {
		return nil, apierrors.NewNotFound(leasesGR, l.Name)
	}
	if cur.ResourceVersion != l.ResourceVersion {
		return nil, apierrors.NewConflict(leasesGR, l.Name, errors.New("the object has been modified"))
	}
	s.rv++
	l = l.DeepCopy()
	l.ResourceVersion = strconv.Itoa(s.rv)
	s.stamp(l)
	s.leases[key] = l
	return l.DeepCopy(), nil
}

// List returns the Leases of namespace whose labels include the one
// key=value of labelSelector, in name order.
func (c *partitionable) List(_ context.Context, ns, labelSelector string) ([]coordinationv1.Lease, error) {
	if c.cut.Load() {
		return nil, errPartitioned
	}
	key, value, _ := strings.Cut(labelSelector, "=")
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []coordinationv1.Lease
	for _, l := range s.leases {
		if l.Namespace == ns && l.Labels[key] == value {
			out = append(out, *l.DeepCopy())
		}
	}
	slices.SortFunc(out, func(a, b coordinationv1.Lease) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *leaseStore) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases["kube-system/lw"]
	if !ok || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func testConfig(c LeaseClient, id string) Config {
	return Config{Client: c, Namespace: "kube-system", Name: "lw", Identity: id, Logger: quiet}
}

func TestNew_Validation(t *testing.T) {
	c := newLeaseStore().client()
	tests := []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"defaults", func(*Config) {}, true},
		{"no client", func(c *Config) { c.Client = nil }, false},
		{"no name", func(c *Config) { c.Name = "" }, false},
		{"no namespace", func(c *Config) { c.Namespace = "" }, false},
		{"no identity", func(c *Config) { c.Identity = "" }, false},
		{"lease not above renew deadline", func(c *Config) { c.LeaseDuration, c.RenewDeadline = 10*time.Second, 10*time.Second }, false},
		{"renew deadline not above jittered retry", func(c *Config) { c.RenewDeadline, c.RetryPeriod = 2*time.Second, 2*time.Second }, false},
		{"negative", func(c *Config) { c.RetryPeriod = -time.Second }, false},
		{"custom valid", func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 60*time.Second, 40*time.Second, 5*time.Second
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(c, "a")
			tt.mutate(&cfg)
			_, err := New(cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("New: err = %v, want ok = %v", err, tt.ok)
			}
		})
	}
}

// candidate runs one replica and records its leadership.
type candidate struct {
	id      string
	client  *partitionable
	le      *LeaderElector
	started atomic.Int32
	stopped atomic.Int32
	done    chan error
	cancel  context.CancelFunc
}

func startCandidate(t *testing.T, ctx context.Context, store *leaseStore, id string, mutate func(*Config), onLead func(id string, ctx context.Context)) *candidate {
	t.Helper()
	c := &candidate{id: id, client: store.client(), done: make(chan error, 1)}
	cfg := testConfig(c.client, id)
	cfg.Callbacks = Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			c.started.Add(1)
			if onLead != nil {
				onLead(id, ctx)
			}
		},
		OnStoppedLeading: func() { c.stopped.Add(1) },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	le, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.le = le
	ctx, c.cancel = context.WithCancel(ctx)
	go func() { c.done <- le.Run(ctx) }()
	return c
}

func TestLeaderElection(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, store *leaseStore)
	}{
		{"single candidate leads at once and releases on cancel", func(t *testing.T, store *leaseStore) {
			a := startCandidate(t, t.Context(), store, "a", nil, nil)
			synctest.Wait()
			if !a.le.IsLeader() || store.holder() != "a" || a.started.Load() != 1 {
				t.Fatalf("leader=%v holder=%q started=%d", a.le.IsLeader(), store.holder(), a.started.Load())
			}
			time.Sleep(time.Minute) // renewals keep it
			if !a.le.IsLeader() {
				t.Fatal("lost leadership without any failure")
			}
			a.cancel()
			if err := <-a.done; err != nil {
				t.Fatalf("Run = %v", err)
			}
			if store.holder() != "" || a.stopped.Load() != 1 {
				t.Fatalf("after cancel holder=%q stopped=%d; want released and OnStoppedLeading once", store.holder(), a.stopped.Load())
			}
		}},
		{"second candidate waits while the first renews", func(t *testing.T, store *leaseStore) {
			a := startCandidate(t, t.Context(), store, "a", nil, nil)
			synctest.Wait()
			b := startCandidate(t, t.Context(), store, "b", nil, nil)
			time.Sleep(5 * time.Minute)
			if !a.le.IsLeader() || b.le.IsLeader() || b.le.Leader() != "a" {
				t.Fatalf("a leader=%v, b leader=%v, b sees %q", a.le.IsLeader(), b.le.IsLeader(), b.le.Leader())
			}
			a.cancel()
			<-a.done
			// Released: b takes over within one jittered retry period,
			// long before a lease duration.
			time.Sleep(time.Duration(JitterFactor*float64(DefaultRetryPeriod)) + time.Millisecond)
			if !b.le.IsLeader() {
				t.Fatal("b did not take over a released lease within a retry period")
			}
			b.cancel()
			<-b.done
		}},
		{"KeepOnCancel makes the next leader wait the lease duration", func(t *testing.T, store *leaseStore) {
			a := startCandidate(t, t.Context(), store, "a", func(c *Config) { c.KeepOnCancel = true }, nil)
			synctest.Wait()
			b := startCandidate(t, t.Context(), store, "b", nil, nil)
			synctest.Wait()
			a.cancel()
			<-a.done
			cancelled := time.Now()
			for !b.le.IsLeader() {
				time.Sleep(100 * time.Millisecond)
			}
			if waited := time.Since(cancelled); waited < DefaultLeaseDuration-DefaultRetryPeriod {
				t.Fatalf("b led %v after a stopped; want about a lease duration (%v)", waited, DefaultLeaseDuration)
			}
			b.cancel()
			<-b.done
		}},
		{"partitioned leader steps down before the other takes over", func(t *testing.T, store *leaseStore) {
			a := startCandidate(t, t.Context(), store, "a", nil, nil)
			synctest.Wait()
			b := startCandidate(t, t.Context(), store, "b", nil, nil)
			synctest.Wait()
			a.client.cut.Store(true)
			err := <-a.done
			if !errors.Is(err, ErrLeadershipLost) {
				t.Fatalf("partitioned leader's Run = %v, want ErrLeadershipLost", err)
			}
			if b.le.IsLeader() {
				t.Fatal("b led while a still believed it led")
			}
			for !b.le.IsLeader() {
				time.Sleep(100 * time.Millisecond)
			}
			if store.holder() != "b" {
				t.Fatalf("holder %q, want b", store.holder())
			}
			b.cancel()
			<-b.done
		}},
		{"OnStartedLeading context ends when leadership ends, the loss its cause", func(t *testing.T, store *leaseStore) {
			ended := make(chan struct{})
			a := startCandidate(t, t.Context(), store, "a", nil, func(_ string, ctx context.Context) {
				<-ctx.Done()
				if cause := context.Cause(ctx); !errors.Is(cause, ErrLeadershipLost) {
					t.Errorf("cause %v, want ErrLeadershipLost", cause)
				}
				close(ended)
			})
			synctest.Wait()
			a.client.cut.Store(true)
			<-a.done
			select {
			case <-ended:
			default:
				t.Fatal("Run returned before OnStartedLeading returned")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { tt.run(t, newLeaseStore()) })
		})
	}
}

// TestLeaderElectionProperty runs three replicas, their clocks skewed at
// random, through random partitions, heals and restarts in virtual time
// and checks that leadership intervals never overlap: at no instant do
// two replicas act as leader.
func TestLeaderElectionProperty(t *testing.T) {
	leaders := 0
	seeds := proptest.ForEachSeed(t, 200, func(t *testing.T, seed uint64) {
		leaders += runElection(t, seed)
	})
	if leaders < seeds*2 {
		t.Errorf("only %d leaderships over %d histories: the generator rarely changes leader", leaders, seeds)
	}
}

// randomSkews gives replicas r0…r(n-1) clocks off by up to ±8 s, more
// than a replica trusts another's clock (maxEarly, 2.5 s by default).
func randomSkews(rng *rand.Rand, n int) map[string]time.Duration {
	skews := map[string]time.Duration{}
	for i := range n {
		skews[fmt.Sprintf("r%d", i)] = time.Duration(rng.Int64N(int64(16*time.Second))) - 8*time.Second
	}
	return skews
}

type interval struct {
	id         string
	start, end time.Time
}

func runElection(t *testing.T, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 7))
	store := newLeaseStore()
	store.skews = randomSkews(rng, 3)
	var mu sync.Mutex
	var spans []interval
	onLead := func(id string, ctx context.Context) {
		start := time.Now()
		<-ctx.Done()
		mu.Lock()
		spans = append(spans, interval{id, start, time.Now()})
		mu.Unlock()
	}
	cands := make([]*candidate, 3)
	for i := range cands {
		cands[i] = startCandidate(t, t.Context(), store, fmt.Sprintf("r%d", i), nil, onLead)
	}
	for range 30 {
		time.Sleep(time.Duration(rng.Int64N(int64(20 * time.Second))))
		i := rng.IntN(len(cands))
		c := cands[i]
		switch rng.IntN(3) {
		case 0:
			c.client.cut.Store(!c.client.cut.Load())
		case 1: // restart the replica
			c.cancel()
			<-c.done
			cands[i] = startCandidate(t, t.Context(), store, c.id, nil, onLead)
		case 2: // a slow network: a short partition
			c.client.cut.Store(true)
			time.Sleep(time.Duration(rng.Int64N(int64(12 * time.Second))))
			c.client.cut.Store(false)
		}
	}
	for _, c := range cands {
		c.cancel()
		<-c.done
	}
	mu.Lock()
	defer mu.Unlock()
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.start.Before(b.end) && b.start.Before(a.end) {
				t.Errorf("seed %d: %s led %v–%v and %s led %v–%v", seed, a.id, a.start, a.end, b.id, b.start, b.end)
			}
		}
	}
	return len(spans)
}

func TestChangedAt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const maxEarly = 2500 * time.Millisecond
	tests := []struct {
		name                        string
		renew, prev, received, want time.Time
	}{
		{"renewal within the window is taken as is", at(9), at(8), at(10), at(9)},
		{"renewal before the last read without it: that read", at(5), at(8), at(10), at(8)},
		{"renewal after the read that saw it: that read", at(12), at(8), at(10), at(10)},
		{"first read: trusted back to maxEarly", at(8), time.Time{}, at(10), at(8)},
		{"first read of an old renewal: maxEarly before the read", at(1), time.Time{}, at(10), at(7.5)},
		{"a long window is cut to maxEarly", at(2), at(1), at(10), at(7.5)},
		{"this replica's own write", at(10), at(8), at(10), at(10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := changedAt(tt.renew, tt.prev, tt.received, maxEarly); !got.Equal(tt.want) {
				t.Errorf("changedAt = %v, want %v", got.Sub(t0), tt.want.Sub(t0))
			}
		})
	}
}
