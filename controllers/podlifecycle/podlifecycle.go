// Package podlifecycle stands in for the scheduler and the kubelets of a
// simulated set of nodes, so that pods created by controllers move through
// their lifecycle without a real cluster: pending pods are bound to a node,
// become Running and Ready after a delay (or Failed, for a chosen fraction),
// and graceful deletions of pods on these nodes are confirmed as a kubelet
// confirms them, by deleting with a zero grace period.
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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
)

// DefaultSchedulerName is the scheduler whose pods this controller binds.
const DefaultSchedulerName = corev1.DefaultSchedulerName

// PodClient is what the simulated scheduler and kubelets write through.
type PodClient interface {
	// Bind assigns the pod namespace/name, which must have the given UID, to
	// node, as a scheduler does through the pods/binding subresource.
	Bind(ctx context.Context, namespace, name string, uid types.UID, node string) error
	// UpdateStatus writes the pod's status subresource.
	UpdateStatus(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error)
	// Delete deletes the pod with the given options.
	Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
}

// Options configure the simulation; the zero value simulates three nodes
// that start pods after one second and never fail them.
type Options struct {
	// Nodes names the simulated nodes (default node-1, node-2, node-3).
	Nodes []string
	// StartDelay is how long a bound pod stays Pending before it runs.
	StartDelay time.Duration
	// FailFraction of pods (0 to 1, chosen by a hash of their UID, so the
	// choice is stable) fail instead of running: those with restartPolicy
	// Never end Failed, the others crash-loop (Running, never Ready), as a
	// kubelet restarts their containers.
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
	if o.StartDelay <= 0 {
		o.StartDelay = time.Second
	}
	if o.TerminationDelay <= 0 {
		o.TerminationDelay = time.Second
	}
	if o.Controller.Workers <= 0 {
		o.Controller.Workers = DefaultWorkers
	}
}

// Controller simulates the scheduler and kubelets. The embedded
// controller is the scheduler: it binds pending pods. Bound pods go to a
// queue and workers of their own (as many), the kubelets', which start
// them, and pods being deleted to a third, whose workers confirm their
// deletions: as in a cluster, kubelets start the pods already bound and
// shut down those deleted while the scheduler goes on binding new ones,
// so a pod does not wait for every pod created before it to be bound
// before it starts, and a rollout's graceful deletions do not hold up
// the new pods it waits for.
type Controller struct {
	*controller.Controller[string]
	starts       *controller.Controller[string]
	terminations *controller.Controller[string]
	informer     cache.Informer[*corev1.Pod]
	client       PodClient
	opts         Options
	nodes        map[string]bool

	mu sync.Mutex
	// boundAt records when each pod was first seen bound to one of the
	// nodes, which starts its StartDelay.
	boundAt map[types.UID]time.Time
	// assumed holds the node each pod was bound to until the informer shows
	// the binding, as the real scheduler's assume cache does: without it,
	// pods bound in quick succession would all see the same least-loaded
	// node.
	assumed map[types.UID]string
	// bound and load are the nodes of the pods seen bound and how many
	// each has, kept by the same handler that drops assumptions, so that
	// assume counts each pod exactly once: the informer's node index is
	// updated before the handlers hear of a binding, and counting it
	// with the assumptions would count a binding twice meanwhile.
	bound map[types.UID]string
	load  map[string]int
	// confirmed holds the pods whose deletion was confirmed until the
	// informer shows them gone: a termination sync queued meanwhile (by
	// another update of the pod) would otherwise delete them again, and
	// get a 404 (about one pod in twenty in a rollout of 1,000).
	confirmed map[types.UID]bool
}

// New returns a Controller over the shared pod informer, which may be
// running already: its handler is replayed what is cached, bindings
// included.
func New(pods cache.Informer[*corev1.Pod], client PodClient, opts Options) (*Controller, error) {
	if pods == nil || client == nil {
		return nil, errors.New("podlifecycle: New needs an informer and a client")
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
		informer:  pods,
		client:    client,
		opts:      opts,
		nodes:     map[string]bool{},
		boundAt:   map[types.UID]time.Time{},
		assumed:   map[types.UID]string{},
		bound:     map[types.UID]string{},
		load:      map[string]int{},
		confirmed: map[types.UID]bool{},
	}
	for _, n := range opts.Nodes {
		c.nodes[n] = true
	}
	var err error
	c.Controller, err = controller.New("podlifecycle", c.sync, opts.Controller, controller.Handle[string](pods, cache.ResourceEventHandlerFuncs[*corev1.Pod]{
		AddFunc:    func(p *corev1.Pod, _ bool) { c.observe(p) },
		UpdateFunc: func(_, p *corev1.Pod) { c.observe(p) },
		DeleteFunc: func(p *corev1.Pod, _ bool) {
			c.mu.Lock()
			delete(c.boundAt, p.UID)
			delete(c.assumed, p.UID)
			delete(c.confirmed, p.UID)
			if n, ok := c.bound[p.UID]; ok {
				c.load[n]--
				delete(c.bound, p.UID)
			}
			c.mu.Unlock()
		},
	}))
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

// Run runs the workers that bind pods, those that start them and those
// that confirm their deletions until ctx ends, and returns once all have
// stopped.
func (c *Controller) Run(ctx context.Context) error {
	errs := make(chan error, 2)
	go func() { errs <- c.starts.Run(ctx) }()
	go func() { errs <- c.terminations.Run(ctx) }()
	err := c.Controller.Run(ctx)
	return errors.Join(err, <-errs, <-errs)
}

// observe counts a pod the informer shows bound on its node in place of
// its assumption, and queues the pod.
func (c *Controller) observe(p *corev1.Pod) {
	if n := p.Spec.NodeName; n != "" {
		c.mu.Lock()
		delete(c.assumed, p.UID)
		if _, ok := c.bound[p.UID]; !ok {
			c.bound[p.UID] = n
			c.load[n]++
		}
		c.mu.Unlock()
	}
	c.enqueue(p)
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
	if err != nil || !ok || pod.DeletionTimestamp != nil || pod.Spec.NodeName != "" {
		// Gone, or the business of the kubelets' workers.
		return controller.Result{}, err
	}
	return c.schedule(ctx, key, pod)
}

// syncStart starts the pod at key if it is bound to one of the nodes and
// has not started.
func (c *Controller) syncStart(ctx context.Context, key string) (controller.Result, error) {
	pod, ok, err := c.informer.GetIndexer().GetByKey(key)
	if err != nil || !ok || pod.DeletionTimestamp != nil || !c.nodes[pod.Spec.NodeName] {
		return controller.Result{}, err
	}
	if pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" {
		return controller.Result{}, nil
	}
	return c.start(ctx, key, pod)
}

// schedule binds a pending pod to the node with the fewest pods.
func (c *Controller) schedule(ctx context.Context, key string, pod *corev1.Pod) (controller.Result, error) {
	if s := pod.Spec.SchedulerName; s != "" && s != DefaultSchedulerName {
		return controller.Result{}, nil
	}
	node := c.assume(pod.UID)
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
	return controller.Result{}, nil
}

// assume picks the node with the fewest pods, counting those bound but not
// yet seen bound, and records the pod there.
func (c *Controller) assume(uid types.UID) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.assumed[uid]; ok {
		return n
	}
	if n, ok := c.bound[uid]; ok {
		return n
	}
	inFlight := map[string]int{}
	for _, n := range c.assumed {
		inFlight[n]++
	}
	best, bestN := "", -1
	for _, n := range c.opts.Nodes {
		if load := c.load[n] + inFlight[n]; bestN < 0 || load < bestN {
			best, bestN = n, load
		}
	}
	c.assumed[uid] = best
	return best
}

// start makes a bound pod Running and Ready, or Failed, once StartDelay has
// passed since it was first seen bound.
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
	switch {
	case !c.fails(pod):
		setRunning(next, now)
	case pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
		setFailed(next, now)
	default:
		// A kubelet restarts the failing containers of such a pod, which
		// stays Running and never Ready: a Deployment of a bad image
		// makes no progress, as in a cluster.
		setCrashLooping(next, now)
	}
	_, err := c.client.UpdateStatus(ctx, next)
	switch {
	case apierrors.IsNotFound(err):
	case apierrors.IsConflict(err):
		// A newer version is on its way through the informer, and with it
		// another sync.
	case err != nil:
		return controller.Result{}, fmt.Errorf("starting pod %s: %w", key, err)
	}
	return controller.Result{}, nil
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

func setRunning(p *corev1.Pod, now time.Time) {
	setStarted(p, now, true, func(ctr corev1.Container, cs *corev1.ContainerStatus) {
		cs.Ready = true
		cs.Started = new(true)
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}
	})
}

// setCrashLooping makes p a pod whose containers exit with an error and
// are restarted with a back-off: Running, not Ready, each container
// waiting in CrashLoopBackOff after its first failure.
func setCrashLooping(p *corev1.Pod, now time.Time) {
	setStarted(p, now, false, func(ctr corev1.Container, cs *corev1.ContainerStatus) {
		cs.RestartCount = 1
		cs.Started = new(false)
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason:  "CrashLoopBackOff",
			Message: "back-off 10s restarting failed container=" + ctr.Name + " pod=" + p.Name + "_" + p.Namespace + "(" + string(p.UID) + ")",
		}}
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error", StartedAt: metav1.NewTime(now), FinishedAt: metav1.NewTime(now), ContainerID: cs.ContainerID,
		}}
	})
}

// setStarted makes p Running on its node since now, Ready or not, with a
// status per container that container fills in.
func setStarted(p *corev1.Pod, now time.Time, ready bool, container func(ctr corev1.Container, cs *corev1.ContainerStatus)) {
	t := metav1.NewTime(now)
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &t
	p.Status.HostIP = hostIP(p.Spec.NodeName)
	p.Status.PodIP = podIP(p.UID)
	readiness := corev1.ConditionFalse
	if ready {
		readiness = corev1.ConditionTrue
	}
	p.Status.Conditions = append(conditions(t, corev1.ConditionTrue, corev1.PodScheduled, corev1.PodInitialized),
		conditions(t, readiness, corev1.ContainersReady, corev1.PodReady)...)
	p.Status.ContainerStatuses = p.Status.ContainerStatuses[:0]
	for i, ctr := range p.Spec.Containers {
		cs := corev1.ContainerStatus{
			Name:        ctr.Name,
			Image:       ctr.Image,
			ImageID:     "sim://" + ctr.Image,
			ContainerID: "sim://" + string(p.UID) + "/" + strconv.Itoa(i),
		}
		container(ctr, &cs)
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
	}
}

func setFailed(p *corev1.Pod, now time.Time) {
	t := metav1.NewTime(now)
	p.Status.Phase = corev1.PodFailed
	p.Status.StartTime = &t
	p.Status.HostIP = hostIP(p.Spec.NodeName)
	p.Status.Reason = "SimulatedFailure"
	p.Status.Message = "podlifecycle failed this pod, as configured by FailFraction"
	p.Status.Conditions = append(conditions(t, corev1.ConditionTrue, corev1.PodScheduled),
		conditions(t, corev1.ConditionFalse, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady)...)
	p.Status.ContainerStatuses = p.Status.ContainerStatuses[:0]
	for _, ctr := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name:  ctr.Name,
			Image: ctr.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: "Error", StartedAt: t, FinishedAt: t,
			}},
		})
	}
}

func conditions(t metav1.Time, status corev1.ConditionStatus, types ...corev1.PodConditionType) []corev1.PodCondition {
	out := make([]corev1.PodCondition, 0, len(types))
	for _, typ := range types {
		out = append(out, corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: t})
	}
	return out
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
