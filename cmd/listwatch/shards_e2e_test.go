package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	kubesharding "k8s.io/apiserver/pkg/sharding"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/informers"
)

// TestShardedControllerManagers runs three controller-manager processes
// with --shards 6 (the ReplicationManager, split by namespace) against
// one API server, creates ReplicationControllers over many namespaces,
// SIGKILLs one replica half-way, and checks that:
//   - every RC converges, with exactly its one pod;
//   - the killed replica's shards are taken over a lease duration after
//     their last renewal, so within the lease duration of the kill but
//     for the taker's requests (how long after each is logged);
//   - no object was written by a replica that did not hold its shard at
//     that moment.
//
// The last is how the test proves that no two replicas wrote one object
// in one interval: the server's routes are wrapped to record every write
// (method, path, when it arrived, the User-Agent, which names the
// replica) and every shard Lease written (its holder and acquireTime,
// from the request body, kept when the server accepted it). From the
// Leases each shard's tenures follow — a holder from its acquireTime to
// the next one's — and every write of a replica to a namespace must fall
// within one of that replica's tenures of the namespace's shard (decided
// by kube's own shard selector parser, on the informers' selector).
// Holders change on join, on the kill and never otherwise, so two replicas
// writing one namespace's objects at once would show as a write outside
// its writer's tenure.
//
// The size is 300 RCs over 30 namespaces, with short lease durations (5 s,
// 4 s, 0.5 s); LISTWATCH_E2E_SHARDS=full runs 3,000 over 60, with
// kube-controller-manager's (15 s, 10 s, 2 s).
func TestShardedControllerManagers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three controller-manager processes")
	}
	rcs, namespaces := 300, 30
	// Longer than the other e2e tests' durations: a replica renews its
	// member Lease and each of its shards every round, and under the
	// race detector on a busy machine 1.5 s is not always enough.
	leaseDuration, renewDeadline, retryPeriod := 5*time.Second, 4*time.Second, 500*time.Millisecond
	full := os.Getenv("LISTWATCH_E2E_SHARDS") == "full"
	if full {
		// kube-controller-manager's durations: at this size on a shared
		// machine a round of renewals can take longer than the short
		// ones allow.
		rcs, namespaces = 3000, 60
		leaseDuration, renewDeadline, retryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	const shards = 6
	rec := &writeRecorder{}
	c := startTestClusterWith(t, backendEtcd, "", rec.wrap)
	// Pods are run, and namespaces given their default service account,
	// by controllers in this process, so that every write of the three
	// processes is the ReplicationManager's.
	// A node holds 110 pods.
	nodes := make([]string, rcs/100+1)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%d", i+1)
	}
	c.startManager(t, managerOpts{identity: inProcessIdentity, nodes: nodes,
		controllers: []string{controllermanager.PodLifecycle, controllermanager.ServiceAccount}})
	nsNames := make([]string, namespaces)
	for i := range nsNames {
		// Names that differ at their start: kube's FNV-1a hash hardly
		// moves its high bits for a change in the last bytes, so
		// "shard-e2e-00" to "-59" would all fall in one shard.
		nsNames[i] = fmt.Sprintf("%02d-shard-e2e", i)
		c.createNamespace(t, nsNames[i])
	}

	lease := "sharded-e2e"
	procs := make([]*managerProcess, 3)
	for i := range procs {
		procs[i] = c.startManagerProcess(t, lease, 500, "--shards", fmt.Sprint(shards), "--controllers", controllermanager.Replication,
			"--leader-elect-lease-duration", leaseDuration.String(), "--leader-elect-renew-deadline", renewDeadline.String(),
			"--leader-elect-retry-period", retryPeriod.String())
	}
	leases := client.For[*coordinationv1.Lease](c.client, "kube-system")
	holders := func() map[string][]int {
		l, err := leases.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h := map[string][]int{}
		for _, item := range l.Items {
			for s := range shards {
				if item.Name == fmt.Sprintf("%s-shard-%d", lease, s) && item.Spec.HolderIdentity != nil && *item.Spec.HolderIdentity != "" {
					h[*item.Spec.HolderIdentity] = append(h[*item.Spec.HolderIdentity], s)
				}
			}
		}
		return h
	}
	balanced := func(want int) func() (bool, string) {
		return func() (bool, string) {
			h := holders()
			if len(h) != want {
				return false, fmt.Sprint(h)
			}
			for _, s := range h {
				if len(s) != shards/want {
					return false, fmt.Sprint(h)
				}
			}
			return true, ""
		}
	}
	start := time.Now()
	waitFor(t, time.Minute, "three replicas holding two shards each", balanced(3))
	t.Logf("3 replicas balanced %v after start", time.Since(start).Round(time.Millisecond))
	before := holders()

	// Create the RCs from 16 writers; kill a replica half-way.
	created := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				ns := nsNames[i%namespaces]
				if _, err := c.rcs.Namespace(ns).Create(t.Context(), newRC(fmt.Sprintf("rc-%04d", i), 1), metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	var killed time.Time
	for i := range rcs {
		if i == rcs/2 {
			procs[1].kill()
			killed = time.Now()
		}
		next <- i
	}
	close(next)
	wg.Wait()
	waitFor(t, time.Minute, "two replicas holding three shards each", balanced(2))
	// The killed replica is the holder of before that holds nothing now.
	after := holders()
	var victim string
	for id := range before {
		if _, ok := after[id]; !ok {
			victim = id
		}
	}

	waitFor(t, 5*time.Minute, "every RC converged", func() (bool, string) {
		l, err := c.rcs.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, rc := range l.Items {
			if rc.Status.Replicas == 1 && rc.Status.ReadyReplicas == 1 {
				ready++
			}
		}
		return ready == rcs, fmt.Sprintf("%d of %d RCs ready", ready, rcs)
	})
	converged := time.Since(created)
	pods, err := c.pods.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pods.Items); n != rcs {
		t.Errorf("%d pods for %d RCs of one replica each", n, rcs)
	}

	// The takeover of the killed replica's shards.
	selectors := make([]sharding.Selector, shards)
	for s := range selectors {
		ours, err := informers.Shard{Key: informers.ShardByNamespace, Count: shards, Index: []int{s}}.Selector()
		if err != nil {
			t.Fatal(err)
		}
		if selectors[s], err = kubesharding.Parse(ours.String()); err != nil {
			t.Fatalf("kube's parser refuses shard %d's selector: %v", s, err)
		}
	}
	tenures := rec.tenures(lease, shards)
	var takeover time.Duration
	for _, s := range before[victim] {
		ts := tenures[s]
		i := slices.IndexFunc(ts, func(te tenure) bool { return te.holder != victim && te.from.After(killed) })
		if i < 0 {
			t.Fatalf("shard %d of the killed replica %s was never taken over: %v", s, victim, ts)
		}
		takeover = max(takeover, ts[i].from.Sub(killed))
		renewed := rec.lastRenewal(lease, s, victim)
		afterRenewal := ts[i].from.Sub(renewed)
		t.Logf("shard %d: renewed by the killed replica %v before the kill, taken by %s %v after the kill, %v after that renewal",
			s, killed.Sub(renewed).Round(time.Millisecond), ts[i].holder, ts[i].from.Sub(killed).Round(time.Millisecond), afterRenewal.Round(time.Millisecond))
		// A shard is taken the moment its Lease allows: a lease duration
		// after its last renewal — never before — plus the taker's read
		// of the group's Leases and its write. As the last renewal came
		// before the kill, that is within the lease duration of the kill
		// but for those two requests. It comes later when the takers'
		// rounds are slower than half of the lease duration less the
		// renew deadline, as far as a replica trusts another's renewTime
		// (leaderelection's doc): so under the race detector on a busy
		// machine, whose rounds stretch to seconds, with the CI size's
		// short durations (that half is 0.5 s). Only the full run, with
		// kube's durations, holds the takeover to a retry period past the
		// lease duration; the short one only to a takeover that comes
		// (CI has measured 10.6 s after the last renewal for a 5 s lease,
		// the replicas' rounds stretched to 3 s).
		slack := 3 * leaseDuration
		if full {
			slack = retryPeriod
		}
		if afterRenewal < leaseDuration || afterRenewal > leaseDuration+slack {
			t.Errorf("shard %d taken over %v after its last renewal; want between the lease duration %v and %v more", s, afterRenewal, leaseDuration, slack)
		}
	}

	// Every write within its writer's tenure of the shard.
	checked, byWriter, reported := 0, map[string]int{}, map[int]bool{}
	for _, w := range rec.writesOf() {
		s := slices.IndexFunc(selectors, func(sel sharding.Selector) bool {
			ok, err := sel.Matches(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: w.namespace}})
			return err == nil && ok
		})
		if s < 0 {
			t.Fatalf("namespace %s is in no shard", w.namespace)
		}
		if h := holderAt(tenures[s], w.at); h != w.identity {
			t.Errorf("%s %s by %s at %v: shard %d was held by %q then", w.method, w.path, w.identity, w.at.Format(time.StampMicro), s, h)
			if !reported[s] {
				reported[s] = true
				for _, te := range tenures[s] {
					t.Logf("shard %d tenure: %q from %v", s, te.holder, te.from.Format(time.StampMicro))
				}
			}
		}
		checked++
		byWriter[w.identity]++
	}
	if checked < rcs {
		t.Errorf("only %d writes of the replicas recorded for %d RCs", checked, rcs)
	}
	// The work was split: both survivors wrote (the killed one may not
	// have before the kill, on a slow machine).
	for id := range after {
		if byWriter[id] == 0 {
			t.Errorf("replica %s wrote nothing: %v", id, byWriter)
		}
	}
	t.Logf("%d RCs over %d namespaces converged %v after the first create; replica %s killed half-way, its shards taken over %v after the kill; %d writes checked against the shard Leases, by replica: %v",
		rcs, namespaces, converged.Round(time.Millisecond), victim, takeover.Round(time.Millisecond), checked, byWriter)
}

// inProcessIdentity is the test's own controller-manager, whose writes
// are not the shards'.
const inProcessIdentity = "pods"

// writeRecorder records, from inside the server's routes, the writes of
// the controller-manager processes and the shard Leases they write.
type writeRecorder struct {
	mu     sync.Mutex
	writes []recordedWrite
	leases []leaseWrite
}

type recordedWrite struct {
	method, path, namespace, identity string
	at                                time.Time
}

type leaseWrite struct {
	name, holder string
	acquired     time.Time
	renewed      time.Time
}

// lastRenewal is when holder last renewed shard's Lease.
func (r *writeRecorder) lastRenewal(lease string, shard int, holder string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last time.Time
	for _, l := range r.leases {
		if l.name == fmt.Sprintf("%s-shard-%d", lease, shard) && l.holder == holder && l.renewed.After(last) {
			last = l.renewed
		}
	}
	return last
}

func (r *writeRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, identity, ok := strings.Cut(req.UserAgent(), " controller-manager/")
		if !ok || identity == inProcessIdentity || req.Method == http.MethodGet {
			next.ServeHTTP(w, req)
			return
		}
		at := time.Now()
		var body []byte
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, req)
		if sw.code >= 300 {
			return
		}
		parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case len(parts) >= 6 && parts[len(parts)-2] == "leases" || len(parts) >= 5 && parts[len(parts)-1] == "leases":
			var l coordinationv1.Lease
			if json.Unmarshal(body, &l) == nil && l.Spec.AcquireTime != nil {
				holder := ""
				if l.Spec.HolderIdentity != nil {
					holder = *l.Spec.HolderIdentity
				}
				r.leases = append(r.leases, leaseWrite{l.Name, holder, l.Spec.AcquireTime.Time, l.Spec.RenewTime.Time})
			}
		case len(parts) >= 5 && parts[0] == "api" && parts[2] == "namespaces" && parts[4] != "events":
			r.writes = append(r.writes, recordedWrite{req.Method, req.URL.Path, parts[3], identity, at})
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (r *writeRecorder) writesOf() []recordedWrite {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.writes)
}

// tenure is a holder's time with a shard, from its acquireTime.
type tenure struct {
	holder string
	from   time.Time
}

// tenures returns each shard's tenures in order of acquireTime.
func (r *writeRecorder) tenures(lease string, shards int) [][]tenure {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]tenure, shards)
	for s := range shards {
		name := fmt.Sprintf("%s-shard-%d", lease, s)
		var ts []tenure
		for _, l := range r.leases {
			if l.name == name && !slices.ContainsFunc(ts, func(t tenure) bool { return t.from.Equal(l.acquired) }) {
				ts = append(ts, tenure{l.holder, l.acquired})
			}
		}
		slices.SortFunc(ts, func(a, b tenure) int { return a.from.Compare(b.from) })
		out[s] = ts
	}
	return out
}

// holderAt is who held the shard at t: the holder of the last tenure from
// before t.
func holderAt(ts []tenure, t time.Time) string {
	h := ""
	for _, te := range ts {
		if te.from.After(t) {
			break
		}
		h = te.holder
	}
	return h
}
