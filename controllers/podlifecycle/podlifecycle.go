// Package podlifecycle stands in for the scheduler and the kubelets of a
// simulated set of nodes, so that pods created by controllers move through
// their lifecycle without a real cluster, as on kwok's nodes:
//
//   - the nodes register as Node objects (capacity, allocatable, a Ready
//     condition, addresses, nodeInfo) and keep a kubelet's heartbeats: a
//     Lease in kube-node-lease renewed every 10 s, and the Ready
//     condition's lastHeartbeatTime;
//   - pending pods are bound to a node that fits them, as kube-scheduler's
//     filters decide (nodeSelector and required node affinity, taints and
//     tolerations, cordoned nodes, resource requests against allocatable),
//     the least loaded first; a pod no node fits gets the PodScheduled
//     condition False, reason Unschedulable, and a FailedScheduling event;
//   - bound pods start after StartDelay (Running and Ready, with a
//     kubelet's container statuses and Pulled, Created and Started events);
//     a pod whose restartPolicy is not Always ends RunDuration later,
//     Succeeded (containers terminated, exit code 0, reason Completed) or,
//     for a failing pod, Failed with the exit code;
//   - graceful deletions of pods on these nodes are confirmed as a kubelet
//     confirms them (a Killing event, then a delete with a zero grace
//     period).
//
// A pod fails when it runs an image of FailImages, when it is one of the
// FailFraction, or when its ExitCodeAnnotation names a non-zero code.
//
// Like the real scheduler it binds only pods whose spec.schedulerName is
// empty or "default-scheduler", so pods meant for another scheduler stay
// pending.
package podlifecycle

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"path"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/defaults"
)

// DefaultSchedulerName is the scheduler whose pods this controller binds.
const DefaultSchedulerName = corev1.DefaultSchedulerName

// Annotations a pod carries to choose how its containers end on the
// simulated nodes.
const (
	// ExitCodeAnnotation is the exit code of the pod's containers
	// ("0" to succeed): a non-zero code fails the pod as FailImages do,
	// with that code.
	ExitCodeAnnotation = "podlifecycle.listwatch.io/exit-code"
	// RunDurationAnnotation is how long the pod's containers run before
	// they exit (a time.ParseDuration string), in place of
	// Options.RunDuration.
	RunDurationAnnotation = "podlifecycle.listwatch.io/run-duration"
)

// PodClient is what the simulated scheduler and kubelets write pods
// through.
type PodClient interface {
	// Bind assigns the pod namespace/name, which must have the given UID, to
	// node, as a scheduler does through the pods/binding subresource.
	Bind(ctx context.Context, namespace, name string, uid types.UID, node string) error
	// UpdateStatus writes the pod's status subresource.
	UpdateStatus(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error)
	// Delete deletes the pod with the given options.
	Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
}

// Client is all the simulation writes through: NewClient's over a REST
// client.
type Client interface {
	PodClient
	NodeClient
}

// Options configure the simulation; the zero value simulates three nodes
// that start pods after one second, end those not restarted always a
// second later, and never fail them.
type Options struct {
	// Nodes names the simulated nodes (default node-1, node-2, node-3).
	Nodes []string
	// NodeCapacity is each node's capacity and allocatable;
	// DefaultNodeCapacity() when nil.
	NodeCapacity corev1.ResourceList
	// StartDelay is how long a bound pod stays Pending before it runs.
	StartDelay time.Duration
	// RunDuration is how long the containers of a pod whose
	// restartPolicy is not Always run before they exit (1 s when not
	// positive); a pod's RunDurationAnnotation overrides it.
	RunDuration time.Duration
	// FailFraction of pods (0 to 1, chosen by a hash of their UID, so the
	// choice is stable) fail: those with restartPolicy Never end Failed,
	// exit code 1, after RunDuration; the others crash-loop (Running,
	// never Ready), as a kubelet restarts their containers.
	FailFraction float64
	// FailImages are patterns (path.Match syntax, such as
	// "registry.example/broken:*") of images the nodes cannot run: a pod
	// with a container of such an image fails as one of FailFraction's
	// does. A rollout to a bad image is then a matter of the image named,
	// as in a cluster, and leaves the pods of other images alone.
	FailImages []string
	// TerminationDelay bounds how long a pod on these nodes takes to shut
	// down after a graceful deletion; the pod's own grace period applies
	// when shorter. Default 1 s.
	TerminationDelay time.Duration
	// LeaseRenewInterval, LeaseDuration and NodeStatusInterval time the
	// nodes' heartbeats; DefaultLeaseRenewInterval, DefaultLeaseDuration
	// and DefaultNodeStatusInterval when not positive.
	LeaseRenewInterval, LeaseDuration, NodeStatusInterval time.Duration
	// Events, when set, returns the recorder of the events of component
	// (default-scheduler, kubelet) on host ("" for the scheduler, the
	// node's name for its kubelet).
	Events func(component, host string) controller.EventRecorder
	// Controller tunes the workers (DefaultWorkers when not positive),
	// logs and metrics.
	Controller controller.Options
}

// DefaultWorkers is the number of workers, each of the scheduler, the
// kubelets and the terminations, when Options.Controller.Workers is not
// positive.
const DefaultWorkers = 4

func (o *Options) defaults() {
	if len(o.Nodes) == 0 {
		o.Nodes = []string{"node-1", "node-2", "node-3"}
	}
	if o.NodeCapacity == nil {
		o.NodeCapacity = DefaultNodeCapacity()
	}
	defaults.Positive(&o.StartDelay, time.Second)
	defaults.Positive(&o.RunDuration, time.Second)
	defaults.Positive(&o.TerminationDelay, time.Second)
	defaults.Positive(&o.LeaseRenewInterval, DefaultLeaseRenewInterval)
	defaults.Positive(&o.LeaseDuration, DefaultLeaseDuration)
	defaults.Positive(&o.NodeStatusInterval, DefaultNodeStatusInterval)
	defaults.Positive(&o.Controller.Workers, DefaultWorkers)
}

// placement is where a pod was put and what it asks of the node.
type placement struct {
	node string
	use  usage
}

// Controller simulates the scheduler and kubelets. The embedded
// controller is the scheduler: it binds pending pods. Bound pods go to a
// queue and workers of their own (as many), the kubelets', which start
// and end them, and pods being deleted to a third, whose workers confirm
// their deletions: as in a cluster, kubelets start the pods already bound
// and shut down those deleted while the scheduler goes on binding new
// ones, so a pod does not wait for every pod created before it to be
// bound before it starts, and a rollout's graceful deletions do not hold
// up the new pods it waits for.
type Controller struct {
	*controller.Controller[string]
	starts       *controller.Controller[string]
	terminations *controller.Controller[string]
	informer     cache.Informer[*corev1.Pod]
	nodeInformer cache.Informer[*corev1.Node]
	client       Client
	opts         Options
	nodes        map[string]bool

	// registered is set once the nodes' first registration was tried;
	// the scheduler starts when the node informer shows every node
	// registered then.
	registered   atomic.Bool
	registeredMu sync.Mutex
	registeredOK []string

	mu sync.Mutex
	// boundAt records when each pod was first seen bound to one of the
	// nodes, which starts its StartDelay; startedAt when it started,
	// which starts its RunDuration (the API's times have whole seconds).
	boundAt, startedAt map[types.UID]time.Time
	// assumed holds where each pod was bound until the informer shows the
	// binding, as the real scheduler's assume cache does: without it,
	// pods bound in quick succession would all see the same least-loaded
	// node.
	assumed map[types.UID]placement
	// placed and used are the pods seen bound and not finished and what
	// they use of each node, kept by the same handler that drops
	// assumptions, so that a pod is counted exactly once: the informer's
	// node index is updated before the handlers hear of a binding, and
	// counting it with the assumptions would count a binding twice
	// meanwhile.
	placed map[types.UID]placement
	used   map[string]usage
	// unschedulable holds the keys of pods no node fitted: they are tried
	// again when a node changes or a pod leaves one.
	unschedulable map[string]bool
	// failedScheduling holds, for each pod marked unschedulable, the
	// message written: a retry that reads the pod before the informer
	// shows that write (a node's update queues it at once) must not
	// record the FailedScheduling event again.
	failedScheduling map[types.UID]string
	// confirmed holds the pods whose deletion was confirmed until the
	// informer shows them gone: a termination sync queued meanwhile (by
	// another update of the pod) would otherwise delete them again, and
	// get a 404 (about one pod in twenty in a rollout of 1,000).
	confirmed map[types.UID]bool
	// killed holds the pods whose containers' Killing events were
	// recorded.
	killed map[types.UID]bool

	recMu     sync.Mutex
	recorders map[string]controller.EventRecorder
}

// New returns a Controller over the shared pod and node informers, which
// may be running already: its handlers are replayed what is cached,
// bindings included.
func New(pods cache.Informer[*corev1.Pod], nodes cache.Informer[*corev1.Node], client Client, opts Options) (*Controller, error) {
	if pods == nil || nodes == nil || client == nil {
		return nil, errors.New("podlifecycle: New needs the pod and node informers and a client")
	}
	opts.defaults()
	if opts.FailFraction < 0 || opts.FailFraction > 1 {
		return nil, fmt.Errorf("podlifecycle: FailFraction %v not in [0, 1]", opts.FailFraction)
	}
	for _, p := range opts.FailImages {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("podlifecycle: FailImages pattern %q: %w", p, err)
		}
	}
	c := &Controller{
		informer:         pods,
		nodeInformer:     nodes,
		client:           client,
		opts:             opts,
		nodes:            map[string]bool{},
		boundAt:          map[types.UID]time.Time{},
		startedAt:        map[types.UID]time.Time{},
		assumed:          map[types.UID]placement{},
		placed:           map[types.UID]placement{},
		used:             map[string]usage{},
		unschedulable:    map[string]bool{},
		failedScheduling: map[types.UID]string{},
		confirmed:        map[types.UID]bool{},
		killed:           map[types.UID]bool{},
		recorders:        map[string]controller.EventRecorder{},
	}
	for _, n := range opts.Nodes {
		c.nodes[n] = true
	}
	var err error
	c.Controller, err = controller.New("podlifecycle", c.sync, opts.Controller,
		controller.Handle[string](pods, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
			AddFunc:    func(p *corev1.Pod, _ bool) { c.observe(p) },
			UpdateFunc: func(_, p *corev1.Pod) { c.observe(p) },
			DeleteFunc: func(p *corev1.Pod, _ bool) { c.forget(p) },
		}),
		controller.Handle[string](nodes, cache.ResourceEventHandlerFuncs[*corev1.Node]{
			AddFunc:    func(*corev1.Node, bool) { c.retryUnschedulable() },
			UpdateFunc: func(*corev1.Node, *corev1.Node) { c.retryUnschedulable() },
		}),
		controller.WaitFor[string](c.nodesRegistered))
	if err != nil {
		return nil, fmt.Errorf("podlifecycle: %w", err)
	}
	c.starts, err = controller.New("podlifecycle-start", c.syncStart, opts.Controller,
		controller.WaitFor[string](pods.HasSynced))
	if err != nil {
		return nil, fmt.Errorf("podlifecycle: %w", err)
	}
	c.terminations, err = controller.New("podlifecycle-termination", c.syncTermination, opts.Controller,
		controller.WaitFor[string](pods.HasSynced))
	if err != nil {
		return nil, fmt.Errorf("podlifecycle: %w", err)
	}
	return c, nil
}

// Run registers the nodes and keeps their heartbeats, and runs the
// workers that bind pods, those that start and end them and those that
// confirm their deletions until ctx ends, and returns once all have
// stopped.
func (c *Controller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { c.runNodes(ctx) })
	errs := make(chan error, 2)
	go func() { errs <- c.starts.Run(ctx) }()
	go func() { errs <- c.terminations.Run(ctx) }()
	err := c.Controller.Run(ctx)
	err = errors.Join(err, <-errs, <-errs)
	wg.Wait()
	return err
}

// nodesRegistered reports whether the nodes' first registration was
// tried and the node informer shows each node it registered: the
// scheduler waits for it, so that the first pods spread over every node.
func (c *Controller) nodesRegistered() bool {
	if !c.registered.Load() || !c.nodeInformer.HasSynced() {
		return false
	}
	c.registeredMu.Lock()
	defer c.registeredMu.Unlock()
	for _, n := range c.registeredOK {
		if _, ok, _ := c.nodeInformer.GetIndexer().GetByKey(n); !ok {
			return false
		}
	}
	return true
}

// observe counts a pod the informer shows bound on its node in place of
// its assumption, uncounts one that finished, and queues the pod.
func (c *Controller) observe(p *corev1.Pod) {
	freed := false
	c.mu.Lock()
	active := p.Spec.NodeName != "" && !isTerminal(p)
	if p.Spec.NodeName != "" {
		delete(c.assumed, p.UID)
	}
	if pl, ok := c.placed[p.UID]; ok && !active {
		c.used[pl.node] = c.used[pl.node].minus(pl.use)
		delete(c.placed, p.UID)
		freed = true
	} else if !ok && active {
		pl := placement{node: p.Spec.NodeName, use: podUsage(p)}
		c.placed[p.UID] = pl
		c.used[pl.node] = c.used[pl.node].plus(pl.use)
	}
	c.mu.Unlock()
	if freed {
		c.retryUnschedulable()
	}
	c.enqueue(p)
}

// forget drops what is known of a deleted pod.
func (c *Controller) forget(p *corev1.Pod) {
	c.mu.Lock()
	delete(c.boundAt, p.UID)
	delete(c.startedAt, p.UID)
	delete(c.assumed, p.UID)
	delete(c.confirmed, p.UID)
	delete(c.killed, p.UID)
	delete(c.failedScheduling, p.UID)
	pl, freed := c.placed[p.UID]
	if freed {
		c.used[pl.node] = c.used[pl.node].minus(pl.use)
		delete(c.placed, p.UID)
	}
	if key, err := cache.MetaNamespaceKeyFunc(p); err == nil {
		delete(c.unschedulable, key)
	}
	c.mu.Unlock()
	if freed {
		c.retryUnschedulable()
	}
}

// retryUnschedulable queues the pods no node fitted, for a node or a
// node's room has changed.
func (c *Controller) retryUnschedulable() {
	c.mu.Lock()
	keys := make([]string, 0, len(c.unschedulable))
	for k := range c.unschedulable {
		keys = append(keys, k)
	}
	clear(c.unschedulable)
	c.mu.Unlock()
	for _, k := range keys {
		c.Queue().Add(k)
	}
}

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func (c *Controller) enqueue(p *corev1.Pod) {
	key, err := cache.MetaNamespaceKeyFunc(p)
	if err != nil {
		c.Logger().Warn("cannot key pod", "err", err)
		return
	}
	switch {
	case p.DeletionTimestamp != nil:
		c.terminations.Queue().Add(key)
	case p.Spec.NodeName != "":
		c.starts.Queue().Add(key)
	default:
		c.Queue().Add(key)
	}
}

// recorder returns the event recorder of component on host, or nil.
func (c *Controller) recorder(component, host string) controller.EventRecorder {
	if c.opts.Events == nil {
		return nil
	}
	c.recMu.Lock()
	defer c.recMu.Unlock()
	k := component + "/" + host
	r, ok := c.recorders[k]
	if !ok {
		r = c.opts.Events(component, host)
		c.recorders[k] = r
	}
	return r
}

// syncTermination confirms the graceful deletion of the pod at key.
func (c *Controller) syncTermination(ctx context.Context, key string) (controller.Result, error) {
	pod, ok, err := c.informer.GetIndexer().GetByKey(key)
	if err != nil || !ok || pod.DeletionTimestamp == nil {
		return controller.Result{}, err
	}
	return c.terminate(ctx, pod)
}

// sync binds the pod at key if it is pending and unbound.
func (c *Controller) sync(ctx context.Context, key string) (controller.Result, error) {
	if _, _, err := cache.SplitMetaNamespaceKey(key); err != nil {
		return controller.Result{}, controller.Terminal(err)
	}
	pod, ok, err := c.informer.GetIndexer().GetByKey(key)
	if err != nil || !ok || pod.DeletionTimestamp != nil || pod.Spec.NodeName != "" || isTerminal(pod) {
		// Gone, or the business of the kubelets' workers.
		return controller.Result{}, err
	}
	return c.schedule(ctx, key, pod)
}

// syncStart starts the pod at key if it is bound to one of the nodes and
// has not started, and ends it when its containers exit.
func (c *Controller) syncStart(ctx context.Context, key string) (controller.Result, error) {
	pod, ok, err := c.informer.GetIndexer().GetByKey(key)
	if err != nil || !ok || pod.DeletionTimestamp != nil || !c.nodes[pod.Spec.NodeName] {
		return controller.Result{}, err
	}
	switch pod.Status.Phase {
	case corev1.PodPending, "":
		return c.start(ctx, key, pod)
	case corev1.PodRunning:
		return c.finish(ctx, key, pod)
	}
	return controller.Result{}, nil
}

// schedule binds a pending pod to the least loaded node that fits it, or
// records why none does.
func (c *Controller) schedule(ctx context.Context, key string, pod *corev1.Pod) (controller.Result, error) {
	if s := pod.Spec.SchedulerName; s != "" && s != DefaultSchedulerName {
		return controller.Result{}, nil
	}
	node, reasons, candidates := c.assume(pod)
	if node == "" {
		if candidates == 0 {
			// No node registered yet: their registration will queue
			// the pod again.
			c.mu.Lock()
			c.unschedulable[key] = true
			c.mu.Unlock()
			return controller.Result{}, nil
		}
		return controller.Result{}, c.markUnschedulable(ctx, key, pod, unschedulableMessage(candidates, reasons))
	}
	err := c.client.Bind(ctx, pod.Namespace, pod.Name, pod.UID, node)
	if err != nil {
		c.mu.Lock()
		delete(c.assumed, pod.UID)
		c.mu.Unlock()
	}
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone, or bound by someone else meanwhile: the informer will tell.
		return controller.Result{}, nil
	case err != nil:
		return controller.Result{}, fmt.Errorf("binding pod %s to %s: %w", key, node, err)
	}
	c.Logger().Debug("bound pod", "pod", key, "node", node)
	if r := c.recorder(DefaultSchedulerName, ""); r != nil {
		r.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, node)
	}
	return controller.Result{}, nil
}

// assume picks the node with the fewest pods among those that fit pod,
// counting the pods bound but not yet seen bound, and records the pod
// there. With no node it returns why each registered node did not fit,
// and how many were looked at.
func (c *Controller) assume(pod *corev1.Pod) (string, map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pl, ok := c.assumed[pod.UID]; ok {
		return pl.node, nil, 0
	}
	if pl, ok := c.placed[pod.UID]; ok {
		return pl.node, nil, 0
	}
	inFlight := map[string]usage{}
	for _, pl := range c.assumed {
		inFlight[pl.node] = inFlight[pl.node].plus(pl.use)
	}
	want := podUsage(pod)
	reasons := map[string]int{}
	best, bestN, candidates := "", int64(-1), 0
	for _, n := range c.opts.Nodes {
		node, ok, _ := c.nodeInformer.GetIndexer().GetByKey(n)
		if !ok {
			continue
		}
		candidates++
		used := c.used[n].plus(inFlight[n])
		if why := fit(pod, node, used, want); len(why) > 0 {
			for _, r := range why {
				reasons[r]++
			}
			continue
		}
		if bestN < 0 || used.pods < bestN {
			best, bestN = n, used.pods
		}
	}
	if best != "" {
		c.assumed[pod.UID] = placement{node: best, use: want}
	}
	return best, reasons, candidates
}

// markUnschedulable records on pod that no node fits it, as
// kube-scheduler does: the PodScheduled condition False with reason
// Unschedulable, and a FailedScheduling event, once per message.
func (c *Controller) markUnschedulable(ctx context.Context, key string, pod *corev1.Pod, msg string) error {
	c.mu.Lock()
	c.unschedulable[key] = true
	written := c.failedScheduling[pod.UID] == msg
	c.mu.Unlock()
	if written {
		return nil
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable && cond.Message == msg {
			return nil
		}
	}
	next := pod.DeepCopy()
	setCondition(next, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg,
		LastTransitionTime: metav1.Now(),
	})
	if r := c.recorder(DefaultSchedulerName, ""); r != nil {
		r.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "%s", msg)
	}
	_, err := c.client.UpdateStatus(ctx, next)
	if err == nil {
		c.mu.Lock()
		c.failedScheduling[pod.UID] = msg
		c.mu.Unlock()
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("marking pod %s unschedulable: %w", key, err)
	}
	return nil
}

// setCondition puts cond in p's conditions, in place of one of its type.
func setCondition(p *corev1.Pod, cond corev1.PodCondition) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == cond.Type {
			p.Status.Conditions[i] = cond
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, cond)
}

// start makes a bound pod Running (Ready, or crash-looping for a failing
// pod a kubelet restarts) once StartDelay has passed since it was first
// seen bound, and queues its end if it has one.
func (c *Controller) start(ctx context.Context, key string, pod *corev1.Pod) (controller.Result, error) {
	now := time.Now()
	c.mu.Lock()
	at, ok := c.boundAt[pod.UID]
	if !ok {
		at = now
		c.boundAt[pod.UID] = at
	}
	c.mu.Unlock()
	if wait := at.Add(c.opts.StartDelay).Sub(now); wait > 0 {
		return controller.Result{RequeueAfter: wait}, nil
	}
	next := pod.DeepCopy()
	code, fails := c.exitCode(pod)
	crashLoops := fails && pod.Spec.RestartPolicy != corev1.RestartPolicyNever
	if crashLoops {
		// A kubelet restarts the failing containers of such a pod, which
		// stays Running and never Ready: a Deployment of a bad image
		// makes no progress, as in a cluster.
		setCrashLooping(next, now, code)
	} else {
		setRunning(next, now)
	}
	_, err := c.client.UpdateStatus(ctx, next)
	switch {
	case apierrors.IsNotFound(err):
		return controller.Result{}, nil
	case apierrors.IsConflict(err):
		// A newer version is on its way through the informer, and with it
		// another sync.
		return controller.Result{}, nil
	case err != nil:
		return controller.Result{}, fmt.Errorf("starting pod %s: %w", key, err)
	}
	c.recordStarted(pod)
	c.mu.Lock()
	c.startedAt[pod.UID] = now
	c.mu.Unlock()
	if ends(pod) && !crashLoops {
		return controller.Result{RequeueAfter: c.runDuration(pod)}, nil
	}
	return controller.Result{}, nil
}

// ends reports whether the containers of pod end, rather than being
// restarted by their kubelet.
func ends(pod *corev1.Pod) bool {
	return pod.Spec.RestartPolicy == corev1.RestartPolicyNever || pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure
}

// finish ends a running pod whose containers exit, RunDuration after it
// started: Succeeded, or Failed with the exit code of a failing pod.
func (c *Controller) finish(ctx context.Context, key string, pod *corev1.Pod) (controller.Result, error) {
	code, fails := c.exitCode(pod)
	if !ends(pod) || (fails && pod.Spec.RestartPolicy != corev1.RestartPolicyNever) {
		return controller.Result{}, nil
	}
	c.mu.Lock()
	at, ok := c.startedAt[pod.UID]
	c.mu.Unlock()
	if !ok {
		if pod.Status.StartTime == nil {
			return controller.Result{}, nil
		}
		at = pod.Status.StartTime.Time
	}
	now := time.Now()
	if wait := at.Add(c.runDuration(pod)).Sub(now); wait > 0 {
		return controller.Result{RequeueAfter: wait}, nil
	}
	next := pod.DeepCopy()
	setTerminated(next, now, code)
	_, err := c.client.UpdateStatus(ctx, next)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return controller.Result{}, fmt.Errorf("ending pod %s: %w", key, err)
	}
	return controller.Result{}, nil
}

// runDuration is how long pod's containers run before they exit.
func (c *Controller) runDuration(pod *corev1.Pod) time.Duration {
	if v, ok := pod.Annotations[RunDurationAnnotation]; ok {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return d
		}
		c.Logger().Warn("ignoring a malformed annotation", "pod", pod.Namespace+"/"+pod.Name, "annotation", RunDurationAnnotation, "value", v)
	}
	return c.opts.RunDuration
}

// exitCode is the code pod's containers exit with, and whether it is a
// failure: ExitCodeAnnotation's, else 1 for a pod that fails.
func (c *Controller) exitCode(pod *corev1.Pod) (int32, bool) {
	if v, ok := pod.Annotations[ExitCodeAnnotation]; ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil {
			return int32(n), n != 0
		}
		c.Logger().Warn("ignoring a malformed annotation", "pod", pod.Namespace+"/"+pod.Name, "annotation", ExitCodeAnnotation, "value", v)
	}
	if c.fails(pod) {
		return 1, true
	}
	return 0, false
}

// fails decides, stably for a pod, whether it runs an image of FailImages
// or is one of the FailFraction.
func (c *Controller) fails(pod *corev1.Pod) bool {
	for _, ctr := range pod.Spec.Containers {
		for _, p := range c.opts.FailImages {
			if ok, _ := path.Match(p, ctr.Image); ok { // patterns checked in New
				return true
			}
		}
	}
	if c.opts.FailFraction == 0 {
		return false
	}
	h := fnv.New64a()
	h.Write([]byte(pod.UID))
	return float64(h.Sum64()%1_000_000)/1_000_000 < c.opts.FailFraction
}

// terminate confirms the graceful deletion of a pod on one of the nodes once
// it has had min(its grace period, TerminationDelay) to shut down. Pods on
// other nodes are left to their own kubelets.
func (c *Controller) terminate(ctx context.Context, pod *corev1.Pod) (controller.Result, error) {
	if !c.nodes[pod.Spec.NodeName] {
		return controller.Result{}, nil
	}
	c.recordKilling(pod)
	grace := time.Duration(0)
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	requested := pod.DeletionTimestamp.Add(-grace)
	done := requested.Add(min(grace, c.opts.TerminationDelay))
	if wait := time.Until(done); wait > 0 {
		return controller.Result{RequeueAfter: wait}, nil
	}
	c.mu.Lock()
	confirmed := c.confirmed[pod.UID]
	c.mu.Unlock()
	if confirmed {
		return controller.Result{}, nil
	}
	zero := int64(0)
	uid := pod.UID
	err := c.client.Delete(ctx, pod.Namespace, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return controller.Result{}, fmt.Errorf("confirming deletion of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err == nil {
		c.mu.Lock()
		c.confirmed[uid] = true
		c.mu.Unlock()
	}
	return controller.Result{}, nil
}

// hostIP gives each simulated node a stable address in 10.0.0.0/16.
func hostIP(node string) string {
	h := fnv.New32a()
	h.Write([]byte(node))
	s := h.Sum32()
	return fmt.Sprintf("10.0.%d.%d", s>>8&0xff, s&0xff)
}

// podIP gives each pod a stable address in 10.244.0.0/16.
func podIP(uid types.UID) string {
	h := fnv.New32a()
	h.Write([]byte(uid))
	s := h.Sum32()
	return fmt.Sprintf("10.244.%d.%d", s>>8&0xff, s&0xff|1)
}
