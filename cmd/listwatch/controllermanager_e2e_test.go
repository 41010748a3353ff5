package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
	"github.com/listwatch/listwatch/controllers/replication"
	"github.com/listwatch/listwatch/internal/kubeconfig"
)

// e2eCluster is the API server of `up` on embedded etcd, over HTTPS on
// 127.0.0.1, without up's own controller-manager, so that each test runs
// the controller-managers it needs.
type e2eCluster struct {
	kubeconfig string
	client     *client.Client
	pods       *client.Resource[*corev1.Pod]
	rcs        *client.Resource[*corev1.ReplicationController]
}

func startE2ECluster(t *testing.T) *e2eCluster {
	t.Helper()
	return startTestCluster(t, backendEtcd, "")
}

// startTestCluster starts the API server on backend, serving the custom
// resources of crFile when it is not empty.
func startTestCluster(t *testing.T, backend, crFile string) *e2eCluster {
	t.Helper()
	return startTestClusterWith(t, backend, crFile, nil)
}

// startTestClusterWith is startTestCluster with wrapRoutes around the
// server's routes (serverConfig.wrapRoutes) when it is not nil.
func startTestClusterWith(t *testing.T, backend, crFile string, wrapRoutes func(http.Handler) http.Handler) *e2eCluster {
	t.Helper()
	dir := t.TempDir()
	token := "e2e-token"
	var tokens filters.TokenFile
	if err := tokens.Add(token, filters.User{Name: upUser, UID: upUser, Groups: []string{"system:masters"}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := startServer(ctx, serverConfig{
		BindAddress:         "127.0.0.1",
		Storage:             storageConfig{Backend: backend, DataDir: filepath.Join(dir, "etcd")},
		Tokens:              &tokens,
		CertDir:             filepath.Join(dir, "pki"),
		CustomResourcesFile: crFile,
		wrapRoutes:          wrapRoutes,
	}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.shutdown(); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
	})
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := srv.waitReady(rctx); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := kubeconfig.Write(kc, kubeconfig.Config{Server: srv.URL, CAData: srv.CAPEM, Token: token}); err != nil {
		t.Fatal(err)
	}
	return clusterAt(t, kc)
}

// clusterAt is the cluster a kubeconfig names.
func clusterAt(t *testing.T, kc string) *e2eCluster {
	t.Helper()
	cc, err := client.LoadConfig(client.LoadOptions{Kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	cc.QPS = -1
	c, err := client.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	return &e2eCluster{
		kubeconfig: kc,
		client:     c,
		pods:       client.For[*corev1.Pod](c, ""),
		rcs:        client.For[*corev1.ReplicationController](c, ""),
	}
}

// apiCounter counts the requests of a controller-manager that went
// through its transport, and can cut it off from the server or fail a
// share of its pod creations.
type apiCounter struct {
	podCreates atomic.Int64 // pod POSTs the server accepted
	writes     atomic.Int64 // non-GET requests other than on Leases
	// failEvery, when positive, answers every failEvery-th pod creation
	// with a 500 without sending it.
	failEvery   int64
	createTries atomic.Int64
	failed      atomic.Int64
	partitioned atomic.Bool

	// Pod creations and the ReplicationManager's pod deletions sent and
	// not yet answered, and the most there were at once since
	// resetPeaks. podlifecycle's deletions, which confirm a graceful one
	// with a grace period of 0, are not among them.
	creating, deleting inFlight
	podDeletes         atomic.Int64 // the ReplicationManager's pod DELETEs the server accepted
}

// inFlight counts requests under way and remembers the most at once.
type inFlight struct{ now, peak atomic.Int64 }

func (f *inFlight) start() {
	n := f.now.Add(1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
}

func (f *inFlight) done()      { f.now.Add(-1) }
func (f *inFlight) max() int64 { return f.peak.Load() }

// resetPeaks starts new maxima from the requests under way now.
func (a *apiCounter) resetPeaks() {
	a.creating.peak.Store(a.creating.now.Load())
	a.deleting.peak.Store(a.deleting.now.Load())
}

var (
	podCollection = regexp.MustCompile(`^/api/v1/namespaces/[^/]+/pods$`)
	podItem       = regexp.MustCompile(`^/api/v1/namespaces/[^/]+/pods/[^/]+$`)
)

// isReplicaDelete tells a pod deletion by the ReplicationManager (default
// grace period) from podlifecycle's confirmation of a graceful one (grace
// period 0, UID precondition) by the DeleteOptions it carries.
func isReplicaDelete(req *http.Request) bool {
	if req.Method != http.MethodDelete || !podItem.MatchString(req.URL.Path) {
		return false
	}
	if req.GetBody == nil {
		return true
	}
	body, err := req.GetBody()
	if err != nil {
		return true
	}
	defer body.Close()
	b, _ := io.ReadAll(body)
	return !strings.Contains(string(b), `"gracePeriodSeconds":0`)
}

func (a *apiCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		if a.partitioned.Load() {
			return nil, errors.New("test: partitioned from the API server")
		}
		isCreate := req.Method == http.MethodPost && podCollection.MatchString(req.URL.Path)
		isDelete := isReplicaDelete(req)
		if isCreate && a.failEvery > 0 && a.createTries.Add(1)%a.failEvery == 0 {
			a.failed.Add(1)
			body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected pod create failure","reason":"InternalError","code":500}`
			return &http.Response{StatusCode: 500, Status: "500 Internal Server Error", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
		}
		switch {
		case isCreate:
			a.creating.start()
			defer a.creating.done()
		case isDelete:
			a.deleting.start()
			defer a.deleting.done()
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		if req.Method != http.MethodGet && !strings.Contains(req.URL.Path, "/leases") {
			a.writes.Add(1)
		}
		if isCreate && resp.StatusCode == http.StatusCreated {
			a.podCreates.Add(1)
		}
		if isDelete && resp.StatusCode < 300 {
			a.podDeletes.Add(1)
		}
		return resp, nil
	})
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// e2eManager is a running controller-manager.
type e2eManager struct {
	m    *controllermanager.Manager
	api  *apiCounter
	stop func()
}

type managerOpts struct {
	identity string
	// controllers to run; every one when empty.
	controllers []string
	// nodes are the simulated nodes; podlifecycle's three when empty.
	nodes []string
	lease string // Lease name; "" disables leader election
	burst int
	api   *apiCounter
}

// Short durations keep the suite fast; the ratios are the defaults'.
const (
	e2eLeaseDuration = 2000 * time.Millisecond
	e2eRenewDeadline = 1500 * time.Millisecond
	e2eRetryPeriod   = 250 * time.Millisecond
)

func (c *e2eCluster) startManager(t *testing.T, o managerOpts) *e2eManager {
	t.Helper()
	cc, err := client.LoadConfig(client.LoadOptions{Kubeconfig: c.kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	if o.api == nil {
		o.api = &apiCounter{}
	}
	cc.QPS = -1
	cc.REST.WrapTransport = o.api.wrap
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("manager", o.identity)
	m, err := controllermanager.New(controllermanager.Config{
		Client:      cc,
		Controllers: o.controllers,
		LeaderElection: controllermanager.LeaderElection{
			Disabled: o.lease == "", Name: o.lease, Identity: o.identity,
			LeaseDuration: e2eLeaseDuration, RenewDeadline: e2eRenewDeadline, RetryPeriod: e2eRetryPeriod,
		},
		BindAddress:  "127.0.0.1:0",
		Replication:  replication.Options{BurstReplicas: o.burst},
		PodLifecycle: podlifecycle.Options{Nodes: o.nodes, StartDelay: time.Nanosecond, TerminationDelay: time.Nanosecond},
		Logger:       log,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	em := &e2eManager{m: m, api: o.api}
	var once sync.Once
	em.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager %s: %v", o.identity, err)
			}
		})
	}
	t.Cleanup(em.stop)
	return em
}

// managerProcess is `listwatch controller-manager` run as a process of its
// own: the test binary, re-executed (see TestMain).
type managerProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // of cmd.Wait, once exited is closed
}

// startManagerProcess starts a controller-manager process with leader
// election on lease (with the e2e durations), burst as burstReplicas, no
// pod lifecycle delay and the flags of extra. Its log is shown when the
// test fails.
func (c *e2eCluster) startManagerProcess(t *testing.T, lease string, burst int, extra ...string) *managerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "controller-manager",
		"--kubeconfig", c.kubeconfig,
		"--leader-elect-resource-name", lease,
		"--leader-elect-lease-duration", e2eLeaseDuration.String(),
		"--leader-elect-renew-deadline", e2eRenewDeadline.String(),
		"--leader-elect-retry-period", e2eRetryPeriod.String(),
		"--burst-replicas", strconv.Itoa(burst),
		"--pod-start-delay", "0s",
		"--kube-api-qps", "-1",
		"--bind-address", "",
		"--log-level", "warn")
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = append(os.Environ(), execMainEnv+"=1")
	var log lockedBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &managerProcess{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		<-p.exited
		if t.Failed() {
			t.Logf("controller-manager process (%v):\n%s", p.err, log.String())
		}
	})
	return p
}

// kill sends SIGKILL: the process ends with no cleanup of any kind.
func (p *managerProcess) kill() { _ = p.cmd.Process.Kill() }

// wait waits up to timeout for the process to end and returns how it
// ended.
func (p *managerProcess) wait(timeout time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("still running after %v", timeout)
	}
}

// waitFor polls cond every 50ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *e2eCluster) createNamespace(t *testing.T, name string) {
	t.Helper()
	ns := client.For[*corev1.Namespace](c.client, "")
	if _, err := ns.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func newRC(name string, replicas int32) *corev1.ReplicationController {
	labels := map[string]string{"app": name}
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: &replicas,
			Selector: labels,
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
}

func (c *e2eCluster) createRC(t *testing.T, ns, name string, replicas int32) *corev1.ReplicationController {
	t.Helper()
	rc, err := c.rcs.Namespace(ns).Create(context.Background(), newRC(name, replicas), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func (c *e2eCluster) listPods(t *testing.T, ns string) []*corev1.Pod {
	t.Helper()
	l, err := c.pods.Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func ownedBy(p *corev1.Pod, uid types.UID) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.UID == uid
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitConverged waits until the RC has exactly want Running and Ready pods
// (none terminating), and its status says so.
func (c *e2eCluster) waitConverged(t *testing.T, ns, name string, want int, timeout time.Duration) []*corev1.Pod {
	t.Helper()
	var owned []*corev1.Pod
	waitFor(t, timeout, fmt.Sprintf("%s/%s to have %d ready pods", ns, name, want), func() (bool, string) {
		rc, err := c.rcs.Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		owned = owned[:0]
		ready := 0
		for _, p := range c.listPods(t, ns) {
			if !ownedBy(p, rc.UID) {
				continue
			}
			owned = append(owned, p)
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(p) {
				ready++
			}
		}
		st := rc.Status
		state := fmt.Sprintf("pods %d, ready %d, status replicas %d ready %d observedGeneration %d/%d",
			len(owned), ready, st.Replicas, st.ReadyReplicas, st.ObservedGeneration, rc.Generation)
		return len(owned) == want && ready == want && st.Replicas == int32(want) && st.ReadyReplicas == int32(want) &&
			st.ObservedGeneration == rc.Generation, state
	})
	return owned
}

func (c *e2eCluster) scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if _, err := c.rcs.Namespace(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podSampler watches the pods of a namespace from before anything is
// created in it: it counts every pod that ever appeared (the server's
// record of the creations, whoever made them, killed processes included)
// and records the most pods there were at once, active (not terminating)
// and present (terminating included).
type podSampler struct {
	mu         sync.Mutex
	active     map[types.UID]bool
	present    map[types.UID]bool
	seen       map[types.UID]bool
	maxActive  int
	maxPresent int
	ended      error // why the watch ended before stop, if it did
	// onSeen, when set, is called (outside mu) with the number of pods
	// seen so far each time a new one appears.
	onSeen func(n int)
	cancel context.CancelFunc
	done   chan struct{}
}

func (c *e2eCluster) samplePods(t *testing.T, ns string) *podSampler {
	t.Helper()
	return c.samplePodsWith(t, ns, nil)
}

func (c *e2eCluster) samplePodsWith(t *testing.T, ns string, onSeen func(n int)) *podSampler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.pods.Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &podSampler{active: map[types.UID]bool{}, present: map[types.UID]bool{}, seen: map[types.UID]bool{},
		onSeen: onSeen, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer w.Stop()
		for {
			ev, err := w.Next()
			if err != nil {
				if ctx.Err() == nil {
					s.mu.Lock()
					s.ended = err
					s.mu.Unlock()
				}
				return
			}
			p := ev.Object
			s.mu.Lock()
			isNew := !s.seen[p.UID]
			s.seen[p.UID] = true
			n := len(s.seen)
			switch {
			case ev.Type == cache.EventDeleted:
				delete(s.active, p.UID)
				delete(s.present, p.UID)
			case p.DeletionTimestamp != nil:
				delete(s.active, p.UID)
				s.present[p.UID] = true
			case ev.Type == cache.EventAdded || ev.Type == cache.EventModified:
				s.active[p.UID] = true
				s.present[p.UID] = true
			}
			s.maxActive = max(s.maxActive, len(s.active))
			s.maxPresent = max(s.maxPresent, len(s.present))
			s.mu.Unlock()
			if isNew && s.onSeen != nil {
				s.onSeen(n)
			}
		}
	}()
	return s
}

// reset starts new maxima from the current counts.
func (s *podSampler) reset() {
	s.mu.Lock()
	s.maxActive, s.maxPresent = len(s.active), len(s.present)
	s.mu.Unlock()
}

// peak returns the most active pods since the last reset.
func (s *podSampler) peak() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxActive
}

// peakPresent returns the most pods, terminating ones included, since
// the last reset.
func (s *podSampler) peakPresent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxPresent
}

// created returns how many distinct pods the namespace ever had.
func (s *podSampler) created() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// check fails t when the watch ended early, which would make every
// figure of the sampler a lower bound only.
func (s *podSampler) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		t.Errorf("the pod watch ended early: %v", s.ended)
	}
}

func (s *podSampler) stop() {
	s.cancel()
	<-s.done
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestControllerManagerE2E drives the whole loop on a real API server over
// embedded etcd: the RC scenarios with one controller-manager, then
// restarts, leader election and injected failures with others.
func TestControllerManagerE2E(t *testing.T) {
	c := startE2ECluster(t)
	ctx := context.Background()
	const burst = 10

	t.Run("one manager", func(t *testing.T) {
		m := c.startManager(t, managerOpts{identity: "main", lease: "e2e-main", burst: burst})
		defer m.stop()
		waitFor(t, 10*time.Second, "the manager to be ready", func() (bool, string) {
			return m.m.Ready(), fmt.Sprintf("leader %v", m.m.IsLeader())
		})
		if code, body := get(t, "http://"+m.m.Addr()+"/readyz"); code != 200 {
			t.Errorf("/readyz: %d %s", code, body)
		}
		if code, body := get(t, "http://"+m.m.Addr()+"/healthz"); code != 200 {
			t.Errorf("/healthz: %d %s", code, body)
		}

		t.Run("rc of 5 becomes ready and replaces deleted pods", func(t *testing.T) {
			ns := "e2e-ready"
			c.createNamespace(t, ns)
			c.createRC(t, ns, "web", 5)
			pods := c.waitConverged(t, ns, "web", 5, 20*time.Second)
			deleted := map[string]bool{}
			for _, p := range pods[:2] {
				deleted[p.Name] = true
				if err := c.pods.Namespace(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			after := c.waitConverged(t, ns, "web", 5, 20*time.Second)
			for _, p := range after {
				if deleted[p.Name] {
					t.Errorf("deleted pod %s is still there", p.Name)
				}
			}
			// The recorder wrote the creations as Events on the RC.
			events := client.For[*corev1.Event](c.client, ns)
			waitFor(t, 10*time.Second, "SuccessfulCreate events", func() (bool, string) {
				l, err := events.List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err.Error()
				}
				for _, e := range l.Items {
					if e.Reason == "SuccessfulCreate" && e.InvolvedObject.Kind == "ReplicationController" && e.InvolvedObject.Name == "web" {
						return true, ""
					}
				}
				return false, fmt.Sprintf("%d events", len(l.Items))
			})
		})

		t.Run("scale 5 to 50 to 0 stays within desired plus burst", func(t *testing.T) {
			// What is in flight is measured at both ends: the manager's
			// pod creations and deletions sent and not yet answered, at
			// its transport, and the pods the server holds, through a
			// watch. With burstReplicas 10, a sync creates or deletes 10
			// pods at most, so 10 requests at most are under way; without
			// the cap, the 45 creations would go in slow-start batches up
			// to 16 wide and the 50 deletions all at once.
			ns := "e2e-scale"
			c.createNamespace(t, ns)
			s := c.samplePods(t, ns)
			defer s.stop()
			c.createRC(t, ns, "web", 5)
			c.waitConverged(t, ns, "web", 5, 20*time.Second)
			if p := s.peakPresent(); p > 5 {
				t.Errorf("peak %d pods while scaling to 5", p)
			}
			current := 5
			for _, step := range []int{50, 0} {
				s.reset()
				m.api.resetPeaks()
				creates, deletes := m.api.podCreates.Load(), m.api.podDeletes.Load()
				c.scale(t, ns, "web", int32(step))
				c.waitConverged(t, ns, "web", step, 30*time.Second)
				creates, deletes = m.api.podCreates.Load()-creates, m.api.podDeletes.Load()-deletes
				inCreates, inDeletes := m.api.creating.max(), m.api.deleting.max()
				t.Logf("%d→%d: %d creates (at most %d at once), %d deletes (at most %d at once), peak %d active and %d present pods",
					current, step, creates, inCreates, deletes, inDeletes, s.peak(), s.peakPresent())
				if inCreates > burst || inDeletes > burst {
					t.Errorf("%d→%d: %d creates and %d deletes under way at once, burst %d", current, step, inCreates, inDeletes, burst)
				}
				if step > current {
					// Growing: never beyond the desired count, not even
					// counting pods on their way out, and exactly the
					// missing pods created.
					if p := s.peakPresent(); p > step {
						t.Errorf("%d→%d overshot: %d pods at once", current, step, p)
					}
					if creates != int64(step-current) || deletes != 0 || inDeletes != 0 {
						t.Errorf("%d→%d: %d creates, %d deletes; want %d and 0", current, step, creates, deletes, step-current)
					}
				} else {
					// Shrinking: nothing created, so never more than
					// there were, and exactly the surplus deleted.
					if p := s.peakPresent(); p > current {
						t.Errorf("%d→%d: %d pods at once", current, step, p)
					}
					if creates != 0 || inCreates != 0 || deletes != int64(current-step) {
						t.Errorf("%d→%d: %d creates, %d deletes; want 0 and %d", current, step, creates, deletes, current-step)
					}
				}
				current = step
			}
			s.check(t)
		})

		t.Run("deleting the rc collects its pods; orphaning keeps them", func(t *testing.T) {
			ns := "e2e-gc"
			c.createNamespace(t, ns)
			for _, tt := range []struct {
				name     string
				policy   metav1.DeletionPropagation
				wantPods int
			}{
				{"background", metav1.DeletePropagationBackground, 0},
				{"foreground", metav1.DeletePropagationForeground, 0},
				{"orphan", metav1.DeletePropagationOrphan, 3},
			} {
				t.Run(tt.name, func(t *testing.T) {
					rc := c.createRC(t, ns, tt.name, 3)
					c.waitConverged(t, ns, tt.name, 3, 20*time.Second)
					policy := tt.policy
					if err := c.rcs.Namespace(ns).Delete(ctx, tt.name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
						t.Fatal(err)
					}
					waitFor(t, 20*time.Second, "the rc to be gone and its pods handled", func() (bool, string) {
						if _, err := c.rcs.Namespace(ns).Get(ctx, tt.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
							return false, fmt.Sprintf("rc still there (%v)", err)
						}
						n, refs := 0, 0
						for _, p := range c.listPods(t, ns) {
							if p.Labels["app"] != tt.name {
								continue
							}
							n++
							if ownedBy(p, rc.UID) {
								refs++
							}
						}
						return n == tt.wantPods && refs == 0, fmt.Sprintf("%d pods, %d still owned", n, refs)
					})
				})
			}
		})

		t.Run("a pod whose labels stop matching is released and replaced", func(t *testing.T) {
			ns := "e2e-release"
			c.createNamespace(t, ns)
			rc := c.createRC(t, ns, "web", 3)
			pods := c.waitConverged(t, ns, "web", 3, 20*time.Second)
			victim := pods[0].Name
			patch := []byte(`{"metadata":{"labels":{"app":"debugging"}}}`)
			if _, err := c.pods.Namespace(ns).Patch(ctx, victim, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the relabelled pod to be released", func() (bool, string) {
				p, err := c.pods.Namespace(ns).Get(ctx, victim, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return !ownedBy(p, rc.UID) && p.DeletionTimestamp == nil, fmt.Sprintf("owners %v", p.OwnerReferences)
			})
			after := c.waitConverged(t, ns, "web", 3, 20*time.Second)
			for _, p := range after {
				if p.Name == victim {
					t.Errorf("relabelled pod %s still counted", victim)
				}
			}
		})

		// Pods were bound through pods/binding when the server has it,
		// else by the spec.nodeName update the adapter falls back to.
		_, metrics := get(t, "http://"+m.m.Addr()+"/metrics")
		switch {
		case strings.Contains(metrics, `rest_client_requests_total{code="201",resource="pods/binding",verb="POST"}`):
			t.Log("pods were bound through pods/binding")
		case strings.Contains(metrics, `rest_client_requests_total{code="200",resource="pods",verb="PUT"}`):
			t.Log("the server lacks pods/binding: pods were bound by updating spec.nodeName")
		default:
			t.Error("no successful binding in the metrics")
		}
		if code, body := get(t, "http://"+m.m.Addr()+"/metrics"); code != 200 ||
			!strings.Contains(body, `leader_election_master_status{name="e2e-main"} 1`) ||
			!strings.Contains(body, `rest_client_requests_total{code="201",resource="pods",verb="POST"}`) {
			t.Errorf("/metrics: %d, lacks the leader or request series:\n%.2000s", code, body)
		}
	})

	t.Run("controller-manager killed mid-scale and restarted converges with no duplicate pods", func(t *testing.T) {
		// The first manager is `listwatch controller-manager` in a process
		// of its own, SIGKILLed as soon as the server holds killAt of the
		// pods: no drain, no Lease release, requests cut wherever they
		// were. The pods are counted at the server, by a watch from
		// before the RC, so the dead process's creations count too.
		const (
			ns       = "e2e-restart"
			lease    = "e2e-restart"
			replicas = 40
			killAt   = 5
		)
		c.createNamespace(t, ns)
		first := c.startManagerProcess(t, lease, burst)
		leases := client.For[*coordinationv1.Lease](c.client, controllermanager.DefaultLeaseNamespace)
		var holder string
		waitFor(t, 20*time.Second, "the first manager to take the lease", func() (bool, string) {
			l, err := leases.Get(ctx, lease, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if h := l.Spec.HolderIdentity; h != nil {
				holder = *h
			}
			return holder != "", "no holder"
		})
		var killedAt atomic.Int64 // unix nanoseconds
		s := c.samplePodsWith(t, ns, func(n int) {
			if n == killAt {
				first.kill()
				killedAt.Store(time.Now().UnixNano())
			}
		})
		defer s.stop()
		c.createRC(t, ns, "web", replicas)
		if err := first.wait(30 * time.Second); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("the first manager ended with %v, want killed", err)
		}
		killed := time.Unix(0, killedAt.Load())
		// Nobody released the Lease: the next manager has to wait for it
		// to expire.
		if l, err := leases.Get(ctx, lease, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		} else if h := l.Spec.HolderIdentity; h == nil || *h != holder {
			t.Errorf("lease holder after the kill: %v, want %q still", h, holder)
		}

		second := c.startManager(t, managerOpts{identity: "second", lease: lease, burst: burst})
		defer second.stop()
		waitFor(t, 2*e2eLeaseDuration+5*time.Second, "the second manager to take over", func() (bool, string) {
			return second.m.IsLeader(), ""
		})
		took := time.Since(killed)
		// What the first manager left, requests it had under way
		// included: they were answered long before the Lease expired.
		left := len(c.listPods(t, ns))
		t.Logf("the first manager was killed with %d pods on the server; %d when the second took over, %v after the kill (lease duration %v)",
			killAt, left, took, e2eLeaseDuration)
		if left >= replicas {
			t.Fatalf("the first manager left %d pods: not killed mid-scale", left)
		}

		pods := c.waitConverged(t, ns, "web", replicas, 30*time.Second)
		names := map[string]bool{}
		for _, p := range pods {
			names[p.Name] = true
		}
		if len(names) != replicas {
			t.Errorf("%d distinct pods, want %d", len(names), replicas)
		}
		if n := len(c.listPods(t, ns)); n != replicas {
			t.Errorf("%d pods in the namespace, want %d", n, replicas)
		}
		// Every pod the server ever held in the namespace is one of the
		// replicas: no creation was repeated across the kill, and none
		// was made beyond the desired count.
		if n := s.created(); n != replicas {
			t.Errorf("%d pods created across the kill, want %d", n, replicas)
		}
		if n := second.api.podCreates.Load(); n != int64(replicas-left) {
			t.Errorf("the second manager created %d pods, want the %d missing", n, replicas-left)
		}
		if p := s.peakPresent(); p > replicas {
			t.Errorf("%d pods at once, want at most %d", p, replicas)
		}
		s.check(t)
	})

	t.Run("leader election: only the leader writes, the other takes over", func(t *testing.T) {
		ns := "e2e-leader"
		c.createNamespace(t, ns)
		a := c.startManager(t, managerOpts{identity: "a", lease: "e2e-le", burst: burst})
		waitFor(t, 10*time.Second, "a to lead", func() (bool, string) { return a.m.Ready(), "" })
		b := c.startManager(t, managerOpts{identity: "b", lease: "e2e-le", burst: burst})
		defer b.stop()
		c.createRC(t, ns, "web", 5)
		c.waitConverged(t, ns, "web", 5, 20*time.Second)
		if b.m.IsLeader() {
			t.Fatal("b leads while a holds the lease")
		}
		if n := b.api.writes.Load(); n != 0 {
			t.Errorf("the follower wrote %d times", n)
		}
		if a.api.writes.Load() == 0 {
			t.Error("the leader wrote nothing")
		}
		if code, _ := get(t, "http://"+b.m.Addr()+"/readyz"); code != http.StatusServiceUnavailable {
			t.Errorf("follower /readyz: %d, want 503", code)
		}
		// Kill a: it can no longer reach the server, so it cannot renew
		// or release the Lease.
		killed := time.Now()
		a.api.partitioned.Store(true)
		waitFor(t, 2*e2eLeaseDuration+time.Second, "b to take over", func() (bool, string) { return b.m.IsLeader(), "" })
		took := time.Since(killed)
		// b takes over LeaseDuration after the last renewal, which came
		// before the cut, waking for it (see leaderelection's doc); a
		// second of slack covers request latency on a loaded machine.
		if limit := e2eLeaseDuration + time.Second; took > limit {
			t.Errorf("takeover took %v, limit %v", took, limit)
		}
		t.Logf("takeover %v after the leader was cut off (lease duration %v)", took, e2eLeaseDuration)
		c.scale(t, ns, "web", 8)
		c.waitConverged(t, ns, "web", 8, 20*time.Second)
		if b.api.writes.Load() == 0 {
			t.Error("the new leader wrote nothing")
		}
		a.stop()
	})

	t.Run("converges under 20% pod-create failures with ReplicaFailure meanwhile", func(t *testing.T) {
		ns := "e2e-failures"
		c.createNamespace(t, ns)
		api := &apiCounter{failEvery: 5}
		m := c.startManager(t, managerOpts{identity: "flaky", lease: "e2e-flaky", burst: burst, api: api})
		defer m.stop()
		var sawFailure atomic.Bool
		wctx, cancel := context.WithCancel(ctx)
		w, err := c.rcs.Namespace(ns).Watch(wctx, metav1.ListOptions{})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			defer w.Stop()
			for {
				ev, err := w.Next()
				if err != nil {
					return
				}
				for _, cond := range ev.Object.Status.Conditions {
					if cond.Type == corev1.ReplicationControllerReplicaFailure && cond.Status == corev1.ConditionTrue {
						sawFailure.Store(true)
					}
				}
			}
		}()
		c.createRC(t, ns, "web", 30)
		c.waitConverged(t, ns, "web", 30, 40*time.Second)
		cancel()
		<-watched
		if api.failed.Load() == 0 {
			t.Fatal("no create failed: nothing injected")
		}
		if !sawFailure.Load() {
			t.Error("the RC never showed the ReplicaFailure condition")
		}
		if n := api.podCreates.Load(); n != 30 {
			t.Errorf("%d pods created, want 30 (failed attempts: %d)", n, api.failed.Load())
		}
		t.Logf("%d of %d create attempts failed", api.failed.Load(), api.createTries.Load())
		waitFor(t, 10*time.Second, "the ReplicaFailure condition to clear", func() (bool, string) {
			rc, err := c.rcs.Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, cond := range rc.Status.Conditions {
				if cond.Type == corev1.ReplicationControllerReplicaFailure {
					return false, cond.Message
				}
			}
			return true, ""
		})
	})
}
