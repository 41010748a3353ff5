package podlifecycle

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var podsGR = schema.GroupResource{Resource: "pods"}

// podAPI applies the controller's writes to a cachetest source, standing in
// for the API server in these unit tests of the controller alone.
type podAPI struct {
	src    *cachetest.Source[*corev1.Pod]
	nodes  *cachetest.Source[*corev1.Node]
	leases *cachetest.Source[*coordinationv1.Lease]
	mu     sync.Mutex // serialises read-modify-write
	// calls logs the writes in order: "bind p", "status p", "delete p".
	calls []string
	// deleteLag, when set, is how long a deleted pod takes to leave the
	// source (and so the informer), as a watch event can lag the
	// response; deleting it again meanwhile is NotFound.
	deleteLag time.Duration
	deleted   map[types.UID]bool
}

func (a *podAPI) get(ns, name string, uid types.UID) (*corev1.Pod, error) {
	p, ok := a.src.Get(ns, name)
	if !ok || (uid != "" && p.UID != uid) {
		return nil, apierrors.NewNotFound(podsGR, name)
	}
	return p.DeepCopy(), nil
}

func (a *podAPI) Bind(_ context.Context, ns, name string, uid types.UID, node string) error {
	// A binding takes the time of a round trip.
	time.Sleep(time.Millisecond)
	a.mu.Lock()
	defer a.mu.Unlock()
	p, err := a.get(ns, name, uid)
	if err != nil {
		return err
	}
	if p.Spec.NodeName != "" {
		return apierrors.NewConflict(podsGR, name, fmt.Errorf("pod is already assigned to node %q", p.Spec.NodeName))
	}
	p.Spec.NodeName = node
	_, err = a.src.Update(p)
	a.calls = append(a.calls, "bind "+name)
	return err
}

func (a *podAPI) UpdateStatus(_ context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur, err := a.get(pod.Namespace, pod.Name, "")
	if err != nil {
		return nil, err
	}
	// No resourceVersion: an unconditional write, which pods allow.
	if pod.ResourceVersion != "" && cur.ResourceVersion != pod.ResourceVersion {
		return nil, apierrors.NewConflict(podsGR, pod.Name, fmt.Errorf("stale resourceVersion"))
	}
	cur.Status = pod.Status
	a.calls = append(a.calls, "status "+pod.Name)
	return a.src.Update(cur)
}

func (a *podAPI) Delete(_ context.Context, ns, name string, opts metav1.DeleteOptions) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var uid types.UID
	if opts.Preconditions != nil && opts.Preconditions.UID != nil {
		uid = *opts.Preconditions.UID
	}
	p, err := a.get(ns, name, uid)
	if err != nil {
		return err
	}
	a.calls = append(a.calls, "delete "+name)
	if a.deleted[p.UID] {
		return apierrors.NewNotFound(podsGR, name)
	}
	if a.deleteLag > 0 {
		if a.deleted == nil {
			a.deleted = map[types.UID]bool{}
		}
		a.deleted[p.UID] = true
		time.AfterFunc(a.deleteLag, func() { _, _ = a.src.Delete(ns, name) })
		return nil
	}
	_, err = a.src.Delete(ns, name)
	return err
}

func (a *podAPI) Nodes() Objects[*corev1.Node]           { return nodesAPI{a} }
func (a *podAPI) Leases() Objects[*coordinationv1.Lease] { return leasesAPI{a} }

// nodesAPI writes nodes as the API server does: a node registered gets
// the not-ready taint (TaintNodesByCondition admission), a write of its
// spec keeps its status and one of its status keeps its spec.
type nodesAPI struct{ a *podAPI }

func (n nodesAPI) Get(_ context.Context, name string) (*corev1.Node, error) {
	node, ok := n.a.nodes.Get("", name)
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	return node.DeepCopy(), nil
}

func (n nodesAPI) Create(_ context.Context, node *corev1.Node) (*corev1.Node, error) {
	node = node.DeepCopy()
	node.UID = types.UID("uid-" + node.Name)
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	return n.a.nodes.Create(node)
}

func (n nodesAPI) Update(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	return n.write(ctx, node, func(cur, node *corev1.Node) { cur.Spec = node.Spec })
}

func (n nodesAPI) UpdateStatus(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	return n.write(ctx, node, func(cur, node *corev1.Node) { cur.Status = node.Status })
}

// write applies the part of node that set copies to the stored node.
func (n nodesAPI) write(ctx context.Context, node *corev1.Node, set func(cur, node *corev1.Node)) (*corev1.Node, error) {
	cur, err := n.Get(ctx, node.Name)
	if err != nil {
		return nil, err
	}
	set(cur, node)
	return n.a.nodes.Update(cur)
}

// leasesAPI stores the nodes' Leases as they are written.
type leasesAPI struct{ a *podAPI }

func (l leasesAPI) Get(_ context.Context, name string) (*coordinationv1.Lease, error) {
	lease, ok := l.a.leases.Get(corev1.NamespaceNodeLease, name)
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "leases"}, name)
	}
	return lease.DeepCopy(), nil
}

func (l leasesAPI) Create(_ context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return l.a.leases.Create(lease)
}

func (l leasesAPI) Update(_ context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return l.a.leases.Update(lease)
}

func (l leasesAPI) UpdateStatus(context.Context, *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "leases"}, "status")
}

// gracefulDelete marks a pod as the API server does for a bound pod.
func (a *podAPI) gracefulDelete(t *testing.T, ns, name string, grace int64) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	p, err := a.get(ns, name, "")
	if err != nil {
		t.Fatal(err)
	}
	ts := metav1.NewTime(time.Now().Add(time.Duration(grace) * time.Second))
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &ts, &grace
	if _, err := a.src.Update(p); err != nil {
		t.Fatal(err)
	}
}

func newPod(name, scheduler, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			SchedulerName: scheduler,
			NodeName:      node,
			Containers:    []corev1.Container{{Name: "app", Image: "nginx:1.27"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// harness runs an informer and the controller over a cachetest source.
type harness struct {
	api  *podAPI
	stop func()
}

func start(t *testing.T, opts Options, pods ...*corev1.Pod) *harness {
	t.Helper()
	return startWithNodes(t, opts, nil, pods...)
}

// startWithNodes is start with Node objects registered before the
// simulation starts (as a cluster's own, with their taints and labels).
func startWithNodes(t *testing.T, opts Options, nodes []*corev1.Node, pods ...*corev1.Pod) *harness {
	t.Helper()
	nodeSrc := cachetest.New[*corev1.Node]()
	for _, n := range nodes {
		if _, err := nodeSrc.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	src := cachetest.New[*corev1.Pod]()
	for _, p := range pods {
		if _, err := src.Create(p); err != nil {
			t.Fatal(err)
		}
	}
	api := &podAPI{src: src, nodes: nodeSrc, leases: cachetest.New[*coordinationv1.Lease]()}
	inf := cache.NewSharedIndexInformer[*corev1.Pod](src, cache.SharedInformerOptions{
		Reflector: cache.ReflectorOptions{Logger: quiet},
	})
	nodeInf := cache.NewSharedIndexInformer[*corev1.Node](api.nodes, cache.SharedInformerOptions{
		Reflector: cache.ReflectorOptions{Logger: quiet},
	})
	opts.Controller.Logger = quiet
	c, err := New(inf, nodeInf, api, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { inf.Run(ctx) })
	wg.Go(func() { nodeInf.Run(ctx) })
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &harness{api: api, stop: func() { cancel(); wg.Wait() }}
}

func (h *harness) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, ok := h.api.src.Get("ns", name)
	if !ok {
		t.Fatalf("pod %s is gone", name)
	}
	return p
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func TestPodLifecycle(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a pending pod is bound, then runs and is ready after the start delay", func(t *testing.T) {
			h := start(t, Options{StartDelay: 10 * time.Second}, newPod("p", "", ""))
			defer h.stop()
			time.Sleep(5 * time.Second)
			p := h.pod(t, "p")
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodPending {
				t.Fatalf("after 5s: node %q phase %q; want bound and still Pending", p.Spec.NodeName, p.Status.Phase)
			}
			time.Sleep(6 * time.Second)
			synctest.Wait()
			p = h.pod(t, "p")
			if p.Status.Phase != corev1.PodRunning || !isReady(p) || p.Status.PodIP == "" || p.Status.StartTime == nil {
				t.Fatalf("after 11s: %+v; want Running and Ready", p.Status)
			}
			if len(p.Status.ContainerStatuses) != 1 || !p.Status.ContainerStatuses[0].Ready || p.Status.ContainerStatuses[0].State.Running == nil {
				t.Fatalf("container statuses %+v", p.Status.ContainerStatuses)
			}
		}},
		{"pods of another scheduler stay pending; default-scheduler pods are bound", func(t *testing.T) {
			h := start(t, Options{}, newPod("other", "my-scheduler", ""), newPod("default", DefaultSchedulerName, ""))
			defer h.stop()
			time.Sleep(time.Minute)
			synctest.Wait()
			if p := h.pod(t, "other"); p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
				t.Fatalf("pod of another scheduler: node %q phase %q", p.Spec.NodeName, p.Status.Phase)
			}
			if p := h.pod(t, "default"); p.Status.Phase != corev1.PodRunning {
				t.Fatalf("default-scheduler pod: phase %q", p.Status.Phase)
			}
		}},
		{"pods spread evenly over the nodes", func(t *testing.T) {
			var pods []*corev1.Pod
			for i := range 30 {
				pods = append(pods, newPod(fmt.Sprint("p", i), "", ""))
			}
			h := start(t, Options{}, pods...)
			defer h.stop()
			time.Sleep(time.Minute)
			synctest.Wait()
			perNode := map[string]int{}
			for _, p := range h.api.src.Items() {
				perNode[p.Spec.NodeName]++
			}
			if len(perNode) != 3 || perNode[""] != 0 || perNode["node-1"] != 10 || perNode["node-2"] != 10 || perNode["node-3"] != 10 {
				t.Fatalf("pods per node %v; want 10 on each of 3 nodes", perNode)
			}
		}},
		{"FailFraction fails a stable share of pods", func(t *testing.T) {
			var pods []*corev1.Pod
			for i := range 200 {
				p := newPod(fmt.Sprint("p", i), "", "")
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				pods = append(pods, p)
			}
			h := start(t, Options{FailFraction: 0.5}, pods...)
			defer h.stop()
			time.Sleep(time.Minute)
			synctest.Wait()
			phases := map[corev1.PodPhase]int{}
			for _, p := range h.api.src.Items() {
				phases[p.Status.Phase]++
			}
			if phases[corev1.PodFailed] < 60 || phases[corev1.PodSucceeded] < 60 || phases[corev1.PodFailed]+phases[corev1.PodSucceeded] != 200 {
				t.Fatalf("phases %v; want about half Failed, the rest Succeeded", phases)
			}
			for _, p := range h.api.src.Items() {
				c := &Controller{opts: Options{FailFraction: 0.5}}
				if want := c.fails(p); (p.Status.Phase == corev1.PodFailed) != want {
					t.Fatalf("pod %s: phase %s but fails() = %v: the choice is not stable", p.Name, p.Status.Phase, want)
				}
			}
		}},
		{"FailFraction crash-loops the pods a kubelet restarts", func(t *testing.T) {
			var pods []*corev1.Pod
			for i := range 100 {
				pods = append(pods, newPod(fmt.Sprint("p", i), "", ""))
			}
			h := start(t, Options{FailFraction: 0.5}, pods...)
			defer h.stop()
			time.Sleep(time.Minute)
			synctest.Wait()
			c := &Controller{opts: Options{FailFraction: 0.5}}
			crashing := 0
			for _, p := range h.api.src.Items() {
				ready := isReady(p)
				if p.Status.Phase != corev1.PodRunning || ready == c.fails(p) {
					t.Fatalf("pod %s: phase %s, ready %v, fails() = %v", p.Name, p.Status.Phase, ready, c.fails(p))
				}
				if c.fails(p) {
					crashing++
					if w := p.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" {
						t.Fatalf("pod %s: container state %+v, want waiting in CrashLoopBackOff", p.Name, p.Status.ContainerStatuses[0].State)
					}
				}
			}
			if crashing < 25 || crashing > 75 {
				t.Fatalf("%d of 100 pods crash-loop, want about half", crashing)
			}
		}},
		{"FailImages crash-loops the pods of a matching image only", func(t *testing.T) {
			broken, ok2 := newPod("broken", "", ""), newPod("ok", "", "")
			broken.Spec.Containers = append(broken.Spec.Containers, corev1.Container{Name: "side", Image: "registry.example/broken:2"})
			never := newPod("never", "", "")
			never.Spec.RestartPolicy = corev1.RestartPolicyNever
			never.Spec.Containers[0].Image = "registry.example/broken:1"
			h := start(t, Options{FailImages: []string{"registry.example/broken:*"}}, broken, ok2, never)
			defer h.stop()
			time.Sleep(time.Minute)
			synctest.Wait()
			if p := h.pod(t, "broken"); p.Status.Phase != corev1.PodRunning || isReady(p) || p.Status.ContainerStatuses[0].State.Waiting == nil {
				t.Errorf("pod with a broken image: %+v, want Running, crash-looping, not Ready", p.Status)
			}
			if p := h.pod(t, "never"); p.Status.Phase != corev1.PodFailed {
				t.Errorf("pod with a broken image and restartPolicy Never: phase %s, want Failed", p.Status.Phase)
			}
			if p := h.pod(t, "ok"); p.Status.Phase != corev1.PodRunning || !isReady(p) {
				t.Errorf("pod of another image: %+v, want Running and Ready", p.Status)
			}
		}},
		{"graceful deletion on a simulated node is confirmed after the termination delay", func(t *testing.T) {
			h := start(t, Options{TerminationDelay: 5 * time.Second},
				newPod("mine", "", "node-1"), newPod("foreign", "", "elsewhere"))
			defer h.stop()
			synctest.Wait()
			h.api.gracefulDelete(t, "ns", "mine", 30)
			h.api.gracefulDelete(t, "ns", "foreign", 30)
			time.Sleep(4 * time.Second)
			synctest.Wait()
			if _, ok := h.api.src.Get("ns", "mine"); !ok {
				t.Fatal("pod removed before its termination delay")
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
			if _, ok := h.api.src.Get("ns", "mine"); ok {
				t.Fatal("pod on a simulated node not removed after the termination delay")
			}
			time.Sleep(time.Minute)
			synctest.Wait()
			if _, ok := h.api.src.Get("ns", "foreign"); !ok {
				t.Fatal("pod on a node this controller does not simulate was removed")
			}
		}},
		{"a deletion is confirmed once, though the pod changes again before the informer shows it gone", func(t *testing.T) {
			h := start(t, Options{TerminationDelay: time.Second}, newPod("mine", "", "node-1"))
			defer h.stop()
			h.api.mu.Lock()
			h.api.deleteLag = 5 * time.Second
			h.api.mu.Unlock()
			synctest.Wait()
			h.api.gracefulDelete(t, "ns", "mine", 30)
			time.Sleep(2 * time.Second)
			synctest.Wait()
			// Another update of the pod queues it for termination again.
			p := h.pod(t, "mine").DeepCopy()
			p.Labels = map[string]string{"touched": "yes"}
			if _, err := h.api.src.Update(p); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Minute)
			synctest.Wait()
			h.api.mu.Lock()
			defer h.api.mu.Unlock()
			n := 0
			for _, c := range h.api.calls {
				if c == "delete mine" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("final delete requests %d (%q), want 1", n, h.api.calls)
			}
		}},
		{"a deletion is confirmed without waiting behind the pods queued for binding", func(t *testing.T) {
			pods := []*corev1.Pod{newPod("mine", "", "node-1")}
			for i := range 300 {
				pods = append(pods, newPod(fmt.Sprint("p", i), "", ""))
			}
			// Pods start a minute after they are bound: the workers bind
			// and nothing else.
			opts := Options{StartDelay: time.Minute, TerminationDelay: time.Nanosecond}
			opts.Controller.Workers = 1
			h := start(t, opts, pods...)
			defer h.stop()
			h.api.gracefulDelete(t, "ns", "mine", 30)
			// The workers start once the caches have synced (polled every
			// 100ms); each binding then takes a millisecond, the 300 of
			// them 300ms.
			time.Sleep(110 * time.Millisecond)
			if _, ok := h.api.src.Get("ns", "mine"); ok {
				t.Fatal("deletion not confirmed while the scheduler was still binding")
			}
			unbound := 0
			for _, p := range h.api.src.Items() {
				if p.Spec.NodeName == "" {
					unbound++
				}
			}
			if unbound == 0 {
				t.Fatal("every pod bound already: the test shows nothing")
			}
		}},
		{"a bound pod starts without waiting behind the pods queued for binding", func(t *testing.T) {
			pods := []*corev1.Pod{newPod("mine", "", "node-1")}
			for i := range 300 {
				pods = append(pods, newPod(fmt.Sprint("p", i), "", ""))
			}
			opts := Options{StartDelay: time.Nanosecond}
			opts.Controller.Workers = 1
			h := start(t, opts, pods...)
			defer h.stop()
			// The workers start within the 100ms poll of the caches'
			// sync; the 300 bindings then take 300ms.
			time.Sleep(110 * time.Millisecond)
			if p := h.pod(t, "mine"); p.Status.Phase != corev1.PodRunning {
				t.Fatalf("bound pod %s while the scheduler was still binding; want Running", p.Status.Phase)
			}
			started, unbound := 0, 0
			for _, p := range h.api.src.Items() {
				if p.Spec.NodeName == "" {
					unbound++
				} else if p.Name != "mine" && p.Status.Phase == corev1.PodRunning {
					started++
				}
			}
			if unbound == 0 {
				t.Fatal("every pod bound already: the test shows nothing")
			}
			// The kubelets start each pod as it is bound, not after the
			// last binding.
			if started == 0 {
				t.Fatal("no pod the scheduler bound has started while it was still binding")
			}
		}},
		{"a short grace period wins over the termination delay", func(t *testing.T) {
			h := start(t, Options{TerminationDelay: time.Minute}, newPod("mine", "", "node-2"))
			defer h.stop()
			synctest.Wait()
			h.api.gracefulDelete(t, "ns", "mine", 2)
			time.Sleep(3 * time.Second)
			synctest.Wait()
			if _, ok := h.api.src.Get("ns", "mine"); ok {
				t.Fatal("pod with a 2s grace period still there after 3s")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { synctest.Test(t, tt.run) })
	}
}

func TestNewValidatesOptions(t *testing.T) {
	for _, opts := range []Options{{FailFraction: -0.1}, {FailFraction: 1.5}, {FailImages: []string{"registry.example/[broken"}}} {
		inf := cache.NewSharedIndexInformer[*corev1.Pod](cachetest.New[*corev1.Pod](), cache.SharedInformerOptions{})
		nodes := cache.NewSharedIndexInformer[*corev1.Node](cachetest.New[*corev1.Node](), cache.SharedInformerOptions{})
		if _, err := New(inf, nodes, &podAPI{}, opts); err == nil {
			t.Errorf("%+v accepted", opts)
		}
	}
}
