package main

// Control-plane workloads: how long an RC of n replicas takes to reach
// status.readyReplicas = n, a Deployment of n replicas availableReplicas =
// n, a rollout of a new template to a Deployment of n replicas to
// complete, a Job of n completions to Complete, and a StatefulSet of n to
// readyReplicas = n, on an in-process equivalent of `listwatch up`
// (embedded etcd in a temporary directory, the API server over HTTPS on
// 127.0.0.1 with up's filters, the controller-manager with no pod
// lifecycle delay), against a floor that does the same writes with no
// controllers at all: a bare loop creating the same pods through the same
// REST client, with the ReplicationManager's concurrency (burstReplicas
// per round, each round in slow-start batches 1, 2, 4, …), while as many
// workers as podlifecycle's scheduler runs bind each pod and as many as
// its kubelets run write it Running and Ready (one binding and one status
// write per pod, as podlifecycle does);
// for the rollout, the bare loop also deletes the n pods it replaces, as
// the ReplicaSet controller and the kubelets must (a graceful delete,
// burstReplicas at a time, then the final one by as many workers).
//
// Each side gets a fresh control plane, so neither inherits the other's
// etcd history or watch cache. The requests each side sent are counted at
// its client's transport, by verb and resource: the controller-manager's
// pod creations must equal the replicas (an expectation miss would show as
// extra creations and deletions). The requests of the driver that creates
// the RC and polls its status are not counted.

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/apiserver/serve"
	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
	"github.com/listwatch/listwatch/controllers/replication"
	"github.com/listwatch/listwatch/storage/etcd"
)

// implFloor names the rows of the bare loop the controllers are measured
// against; printTable gives them a table of their own.
const implFloor = "floor"

func init() {
	for _, n := range []int{1_000, 10_000} {
		k := strconv.Itoa(n/1000) + "k"
		for _, w := range []cpWorkload{rcWorkload, deploymentWorkload, rolloutWorkload, jobWorkload} {
			name := "controlplane-" + w.name + "-" + k
			register(name, func(cfg config) ([]Row, error) {
				return benchControlPlane(name, w, cfg.size(n))
			})
		}
	}
	// An OrderedReady StatefulSet makes its pods one at a time, each once
	// the one before it is Ready: 100 is a large one.
	// A DaemonSet runs a pod on each node: 100 nodes is a large
	// cluster.
	for _, w := range []cpWorkload{statefulSetWorkload, daemonSetWorkload} {
		name := "controlplane-" + w.name + "-100"
		register(name, func(cfg config) ([]Row, error) {
			return benchControlPlane(name, w, cfg.size(100))
		})
	}
}

// cpWorkload is what the controllers are asked to do: prepare, when set,
// does what comes before the measure (neither timed nor counted); start
// makes the change that is timed; await returns once they have finished
// (awaitObject). creates is the number of pods the work needs created, and
// deletes that of the pods it needs deleted: each such pod is deleted
// twice, gracefully by its controller and then by the simulated kubelet
// once it has stopped, and the second delete of some may not have come yet
// when the work is done.
type cpWorkload struct {
	name, metric string
	// noFloor is set for a workload the floor's bare loop (pods created,
	// bound and started) does not stand for: it has no floor rows.
	noFloor bool
	prepare func(ctx context.Context, c *client.Client, n int32) error
	start   func(ctx context.Context, c *client.Client, n int32) error
	await   func(ctx context.Context, c *client.Client, n int32) error
	creates func(n int) int
	deletes func(n int) int
	// nodesPerReplica, when set, runs that many simulated nodes per
	// replica (a DaemonSet's pods are one per node) rather than
	// podlifecycle's default 3.
	nodesPerReplica int
}

func times(k int) func(int) int { return func(n int) int { return k * n } }

// nodes are the names of the simulated nodes w needs for n replicas.
func (w cpWorkload) nodes(n int) []string {
	if w.nodesPerReplica == 0 {
		return defaultNodes
	}
	names := make([]string, w.nodesPerReplica*n)
	for i := range names {
		names[i] = "node-" + strconv.Itoa(i+1)
	}
	return names
}

// podLifecycle is the stand-in kubelet of w's rows for n replicas:
// cpPodLifecycle on w's nodes.
func (w cpWorkload) podLifecycle(n int) podlifecycle.Options {
	o := cpPodLifecycle
	o.Nodes = w.nodes(n)
	return o
}

// podWritesOK reports whether created and deleted pods are what w needs
// for n replicas: more are an expectation miss (a sync acting on a cache
// that had not seen its own writes).
func (w cpWorkload) podWritesOK(n int, created, deleted int64) bool {
	d := int64(w.deletes(n))
	return created == int64(w.creates(n)) && deleted >= d && deleted <= 2*d
}

// rcWorkload: an RC of n replicas to readyReplicas = n.
var rcWorkload = cpWorkload{
	name: "rc", metric: "time to readyReplicas",
	start: func(ctx context.Context, c *client.Client, n int32) error {
		rc := &corev1.ReplicationController{
			ObjectMeta: metav1.ObjectMeta{Name: cpRCName, Namespace: cpNamespace},
			Spec: corev1.ReplicationControllerSpec{
				Replicas: &n,
				Selector: map[string]string{"app": cpRCName},
				Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": cpRCName}}, Spec: podSpec()},
			},
		}
		_, err := client.For[*corev1.ReplicationController](c, cpNamespace).Create(ctx, rc, metav1.CreateOptions{})
		return err
	},
	await: func(ctx context.Context, c *client.Client, n int32) error {
		return awaitObject(ctx, client.For[*corev1.ReplicationController](c, cpNamespace), cpRCName, func(rc *corev1.ReplicationController) (bool, string) {
			return rc.Status.ReadyReplicas == n, fmt.Sprintf("RC at %d of %d ready", rc.Status.ReadyReplicas, n)
		})
	},
	creates: times(1), deletes: times(0),
}

// deploymentWorkload: a Deployment of n replicas to availableReplicas = n.
var deploymentWorkload = cpWorkload{
	name: "deployment", metric: "time to availableReplicas",
	start: func(ctx context.Context, c *client.Client, n int32) error {
		return createDeployment(ctx, c, n, appsv1.DeploymentStrategy{})
	},
	await:   awaitDeployment,
	creates: times(1), deletes: times(0),
}

// rolloutWorkload: once a Deployment of n replicas is available (neither
// timed nor counted), a new image rolled out with 10% surge and 10%
// unavailable (the settings of the kube-controller-manager figure the
// issue quotes), to every replica updated and available: n pods created
// and n deleted.
var rolloutWorkload = cpWorkload{
	name: "rollout", metric: "time to rollout complete",
	prepare: func(ctx context.Context, c *client.Client, n int32) error {
		ten := intstr.FromString("10%")
		strategy := appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &ten, MaxUnavailable: &ten}}
		if err := createDeployment(ctx, c, n, strategy); err != nil {
			return err
		}
		return awaitDeployment(ctx, c, n)
	},
	start: func(ctx context.Context, c *client.Client, n int32) error {
		patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}`)
		_, err := client.For[*appsv1.Deployment](c, cpNamespace).Patch(ctx, cpRCName, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	},
	await:   awaitDeployment,
	creates: times(1), deletes: times(1),
}

// jobWorkload: a Job of n completions, n/10 at a time, to its Complete
// condition, its pods running for no time (cpPodLifecycle).
var jobWorkload = cpWorkload{
	name: "job", metric: "time to Complete", noFloor: true,
	start: func(ctx context.Context, c *client.Client, n int32) error {
		completions, parallelism := n, max(n/10, 1)
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: cpRCName, Namespace: cpNamespace},
			Spec: batchv1.JobSpec{
				Completions: &completions, Parallelism: &parallelism,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "busybox:1.37"}},
				}},
			},
		}
		_, err := client.For[*batchv1.Job](c, cpNamespace).Create(ctx, j, metav1.CreateOptions{})
		return err
	},
	await: func(ctx context.Context, c *client.Client, n int32) error {
		return awaitObject(ctx, client.For[*batchv1.Job](c, cpNamespace), cpRCName, func(j *batchv1.Job) (bool, string) {
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
					return true, ""
				}
			}
			return false, fmt.Sprintf("Job at %d of %d succeeded, %d active", j.Status.Succeeded, n, j.Status.Active)
		})
	},
	creates: times(1), deletes: times(0),
}

// statefulSetWorkload: a StatefulSet of n replicas (OrderedReady) to
// kubectl rollout status's test: n ready, n updated, of its latest
// generation.
var statefulSetWorkload = cpWorkload{
	name: "statefulset", metric: "time to readyReplicas", noFloor: true,
	start: func(ctx context.Context, c *client.Client, n int32) error {
		labels := map[string]string{"app": cpRCName}
		set := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: cpRCName, Namespace: cpNamespace},
			Spec: appsv1.StatefulSetSpec{
				Replicas:    &n,
				ServiceName: cpRCName,
				Selector:    &metav1.LabelSelector{MatchLabels: labels},
				Template:    corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()},
			},
		}
		_, err := client.For[*appsv1.StatefulSet](c, cpNamespace).Create(ctx, set, metav1.CreateOptions{})
		return err
	},
	await: func(ctx context.Context, c *client.Client, n int32) error {
		return awaitObject(ctx, client.For[*appsv1.StatefulSet](c, cpNamespace), cpRCName, func(s *appsv1.StatefulSet) (bool, string) {
			st := s.Status
			ok := st.ObservedGeneration == s.Generation && st.ReadyReplicas == n && st.UpdatedReplicas == n
			return ok, fmt.Sprintf("StatefulSet at %d of %d ready, %d updated", st.ReadyReplicas, n, st.UpdatedReplicas)
		})
	},
	creates: times(1), deletes: times(0),
}

// daemonSetWorkload: a DaemonSet over n nodes (RollingUpdate) to kubectl
// rollout status's test: a pod scheduled, updated and available on each
// node, of its latest generation.
var daemonSetWorkload = cpWorkload{
	name: "daemonset", metric: "time to numberAvailable", noFloor: true, nodesPerReplica: 1,
	start: func(ctx context.Context, c *client.Client, _ int32) error {
		labels := map[string]string{"app": cpRCName}
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: cpRCName, Namespace: cpNamespace},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()},
			},
		}
		_, err := client.For[*appsv1.DaemonSet](c, cpNamespace).Create(ctx, ds, metav1.CreateOptions{})
		return err
	},
	await: func(ctx context.Context, c *client.Client, n int32) error {
		return awaitObject(ctx, client.For[*appsv1.DaemonSet](c, cpNamespace), cpRCName, func(ds *appsv1.DaemonSet) (bool, string) {
			st := ds.Status
			ok := st.ObservedGeneration == ds.Generation && st.DesiredNumberScheduled == n && st.NumberAvailable == n && st.UpdatedNumberScheduled == n
			return ok, fmt.Sprintf("DaemonSet at %d of %d available (%d desired), %d updated", st.NumberAvailable, n, st.DesiredNumberScheduled, st.UpdatedNumberScheduled)
		})
	},
	creates: times(1), deletes: times(0),
}

// createDeployment creates the bench's Deployment of n replicas, with
// kube's default strategy when strategy is the zero value.
func createDeployment(ctx context.Context, c *client.Client, n int32, strategy appsv1.DeploymentStrategy) error {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: cpRCName, Namespace: cpNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": cpRCName}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": cpRCName}}, Spec: podSpec()},
			Strategy: strategy,
		},
	}
	_, err := client.For[*appsv1.Deployment](c, cpNamespace).Create(ctx, d, metav1.CreateOptions{})
	return err
}

// awaitDeployment waits for kubectl rollout status's test to hold: the
// controller saw the last change, and every replica is updated and
// available.
func awaitDeployment(ctx context.Context, c *client.Client, n int32) error {
	return awaitObject(ctx, client.For[*appsv1.Deployment](c, cpNamespace), cpRCName, func(d *appsv1.Deployment) (bool, string) {
		s := d.Status
		ok := s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == n && s.Replicas == n && s.AvailableReplicas == n
		return ok, fmt.Sprintf("Deployment at %d updated, %d available of %d", s.UpdatedReplicas, s.AvailableReplicas, n)
	})
}

// cpPodLifecycle is the stand-in kubelet of every row: the zero value
// means podlifecycle's one-second delays; a nanosecond is "at once".
var cpPodLifecycle = podlifecycle.Options{StartDelay: time.Nanosecond, RunDuration: time.Nanosecond, TerminationDelay: time.Nanosecond,
	NodeCapacity: cpNodeCapacity()}

// cpNodeCapacity is kwok's node with room for the largest row: its 110
// pods a node would hold 330 of the rows' 1,000 to 12,500 pods.
func cpNodeCapacity() corev1.ResourceList {
	c := podlifecycle.DefaultNodeCapacity()
	c[corev1.ResourcePods] = resource.MustParse("20000")
	return c
}

const (
	cpNamespace = "bench"
	cpRCName    = "web"
	// cpLifecycleWorkers is podlifecycle's default number of workers, which
	// the controller-manager runs; the floor marks pods with as many.
	cpLifecycleWorkers = 4
	// cpTimeout bounds one side of one run.
	cpTimeout = 10 * time.Minute
)

func benchControlPlane(name string, w cpWorkload, n int) ([]Row, error) {
	if *cpKubeconfig != "" {
		// Another cluster's controllers (controlplane_kube.go).
		return benchKubeControllerManager(name, w, n)
	}
	// Each round runs both sides, the one that went second last round
	// first, so that neither always has the machine in the state the other
	// left it in; the rows are the medians.
	var lws, floors []cpRun
	var lwReqs, floorReqs []map[string]int64
	for round := range max(*cpRounds, 1) {
		lwFirst := round%2 == 0
		for side := range 2 {
			if (side == 0) == lwFirst {
				run, reqs, err := runControllersSide(w, n)
				if err != nil {
					return nil, fmt.Errorf("controller-manager: %w", err)
				}
				// Pod writes beyond the replicas are what an expectation
				// miss costs (a sync acting on a cache that had not seen
				// its own creations): the measure of a controller-manager
				// that does them is not one.
				// The replica processes' requests are not counted here
				// (runControllersSide counts the pods instead).
				if got, deleted := reqs["create pods"], reqs["delete pods"]; *cpReplicas == 0 && !w.podWritesOK(n, got, deleted) {
					return nil, fmt.Errorf("the controller-manager created %d pods and deleted %d for %d replicas, want %d and %d to %d (in %.2fs)",
						got, deleted, n, w.creates(n), w.deletes(n), 2*w.deletes(n), run.wall.Seconds())
				}
				lws, lwReqs = append(lws, run), append(lwReqs, reqs)
			} else if !w.noFloor {
				run, reqs, err := runFloorSide(w, n)
				if err != nil {
					return nil, fmt.Errorf("floor: %w", err)
				}
				floors, floorReqs = append(floors, run), append(floorReqs, reqs)
			}
		}
		if *cpRounds > 1 && !w.noFloor {
			l, f := lws[len(lws)-1], floors[len(floors)-1]
			fmt.Fprintf(os.Stderr, "%s round %d: %.3fs / %.3fs = %.2fx, cpu %.2fs / %.2fs\n", name, round+1,
				l.wall.Seconds(), f.wall.Seconds(), l.wall.Seconds()/f.wall.Seconds(), l.cpu.Seconds(), f.cpu.Seconds())
		}
	}
	lw := medianRun(lws)
	if w.noFloor {
		rows := []Row{
			{Workload: name, Impl: implListwatch, Metric: w.metric + "=" + strconv.Itoa(n), Value: lw.wall.Seconds(), Unit: "s"},
			{Workload: name, Impl: implListwatch, Metric: "cpu time", Value: lw.cpu.Seconds(), Unit: "s"},
		}
		for i, c := range lw.replicas {
			rows = append(rows, Row{Workload: name, Impl: implListwatch, Metric: fmt.Sprintf("cpu time of replica %d of %d (most first)", i+1, len(lw.replicas)), Value: c.Seconds(), Unit: "s"})
		}
		var total float64
		counts := medianCounts(lwReqs)
		for _, k := range unionKeys(counts) {
			if isSyncCount(k) {
				rows = append(rows, Row{Workload: name, Impl: implListwatch, Metric: k, Value: float64(counts[k]), Unit: "count"})
				continue
			}
			rows = append(rows, Row{Workload: name, Impl: implListwatch, Metric: "requests " + k, Value: float64(counts[k]), Unit: "count"})
			total += float64(counts[k])
		}
		return append(rows, Row{Workload: name, Impl: implListwatch, Metric: "requests total", Value: total, Unit: "count"}), nil
	}
	floor := medianRun(floors)
	rows := []Row{
		{Workload: name, Impl: implListwatch, Metric: w.metric + "=" + strconv.Itoa(n), Value: lw.wall.Seconds(), Unit: "s"},
		{Workload: name, Impl: implFloor, Metric: w.metric + "=" + strconv.Itoa(n), Value: floor.wall.Seconds(), Unit: "s"},
	}
	if lw.cpu > 0 && floor.cpu > 0 {
		// The whole process's CPU (API server, etcd and the controllers or
		// the floor's writers) over the timed window: next to the time it
		// tells work from waiting (2 cores bound it at twice the time).
		rows = append(rows,
			Row{Workload: name, Impl: implListwatch, Metric: "cpu time", Value: lw.cpu.Seconds(), Unit: "s"},
			Row{Workload: name, Impl: implFloor, Metric: "cpu time", Value: floor.cpu.Seconds(), Unit: "s"})
	}
	var total, floorTotal float64
	lwMedian, floorMedian := medianCounts(lwReqs), medianCounts(floorReqs)
	for _, k := range unionKeys(lwMedian, floorMedian) {
		metric := "requests " + k
		if isSyncCount(k) {
			rows = append(rows, Row{Workload: name, Impl: implListwatch, Metric: k, Value: float64(lwMedian[k]), Unit: "count"})
			continue
		}
		if v, ok := lwMedian[k]; ok {
			rows = append(rows, Row{Workload: name, Impl: implListwatch, Metric: metric, Value: float64(v), Unit: "count"})
			total += float64(v)
		}
		if v, ok := floorMedian[k]; ok {
			rows = append(rows, Row{Workload: name, Impl: implFloor, Metric: metric, Value: float64(v), Unit: "count"})
			floorTotal += float64(v)
		}
	}
	rows = append(rows,
		Row{Workload: name, Impl: implListwatch, Metric: "requests total", Value: total, Unit: "count"},
		Row{Workload: name, Impl: implFloor, Metric: "requests total", Value: floorTotal, Unit: "count"})
	return rows, nil
}

// cpRun is one side's measure: the time until the workload was done, and
// the CPU the process spent meanwhile, with that of the replica processes
// (-replicas), which replicas also gives apart, most first.
type cpRun struct {
	wall, cpu time.Duration
	replicas  []time.Duration
}

// medianRun is the median of runs' times and, apart, of their CPU times.
func medianRun(runs []cpRun) cpRun {
	wall, cpu := make([]float64, len(runs)), make([]float64, len(runs))
	for i, r := range runs {
		wall[i], cpu[i] = float64(r.wall), float64(r.cpu)
	}
	out := cpRun{wall: time.Duration(median(wall)), cpu: time.Duration(median(cpu))}
	for i := range runs[0].replicas {
		at := make([]float64, len(runs))
		for j, r := range runs {
			at[j] = float64(r.replicas[i])
		}
		out.replicas = append(out.replicas, time.Duration(median(at)))
	}
	return out
}

// medianCounts is the median of each request count over the runs (one
// some runs did not make counts 0 in those).
func medianCounts(runs []map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for _, k := range unionKeys(runs...) {
		v := make([]float64, len(runs))
		for i, m := range runs {
			v[i] = float64(m[k])
		}
		out[k] = int64(math.Round(median(v)))
	}
	return out
}

func unionKeys(ms ...map[string]int64) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// startSide starts the control plane one side of a workload runs on, with
// cpTimeout to run in (ctx) and a counter for the requests of the clients
// it configures; stop closes the control plane.
func startSide() (ctx context.Context, cp *controlPlane, counter *requestCounter, stop func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), cpTimeout)
	cp, err = startControlPlane(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, nil, err
	}
	return ctx, cp, &requestCounter{}, func() { cp.close(); cancel() }, nil
}

// runControllersSide starts a control plane and a controller-manager,
// gives it w's work and times until w is done.
func runControllersSide(w cpWorkload, n int) (cpRun, map[string]int64, error) {
	ctx, cp, counter, stop, err := startSide()
	if err != nil {
		return cpRun{}, nil, err
	}
	defer stop()

	cmCfg := cp.clientConfig(counter.wrap)
	var only []string
	if *cpReplicas > 0 {
		if w.name != rcsWorkload.name {
			return cpRun{}, nil, fmt.Errorf("-replicas applies to the controlplane-%s rows only", rcsWorkload.name)
		}
		// The replica processes run the ReplicationManager; this
		// process the simulated nodes.
		only = []string{controllermanager.PodLifecycle}
	}
	manager, stopManager, err := runManager(ctx, controllermanager.Config{
		Client:      cmCfg,
		Controllers: only,
		// One replica alone: the Lease would only add its own requests.
		LeaderElection: controllermanager.LeaderElection{Disabled: true},
		Replication:    replication.Options{},
		PodLifecycle:   w.podLifecycle(n),
		Logger:         quietLogger(),
		// -stale-read-timeout -1ns measures the controllers without
		// stale-read protection, for its cost and its conflicts saved.
		StaleReadTimeout: *cpStaleReadTimeout,
	})
	if err != nil {
		return cpRun{}, nil, fmt.Errorf("controller-manager: %w", err)
	}
	defer stopManager()
	// The caches' initial lists are not part of the measure, nor is the
	// controllers' own start-up on a new control plane (the namespaces'
	// default service accounts and root CA config maps, the aggregated
	// cluster roles): it is over once they have sent nothing for a while.
	if err := awaitQuiet(ctx, counter, cpQuiet); err != nil {
		return cpRun{}, nil, fmt.Errorf("controller-manager start-up: %w", err)
	}
	counter.reset()

	driver, err := client.New(cp.clientConfig(nil))
	if err != nil {
		return cpRun{}, nil, err
	}
	var pids []int
	if *cpReplicas > 0 {
		var stopReplicas func()
		if pids, stopReplicas, err = startReplicas(cp, *cpReplicas); err != nil {
			return cpRun{}, nil, fmt.Errorf("replicas: %w", err)
		}
		defer stopReplicas()
		if err := awaitShardsBalanced(ctx, driver, *cpReplicas); err != nil {
			return cpRun{}, nil, err
		}
	}
	replicas := int32(n)
	if w.prepare != nil {
		if err := w.prepare(ctx, driver, replicas); err != nil {
			return cpRun{}, nil, fmt.Errorf("prepare %s: %w", w.name, err)
		}
		counter.reset()
	}
	endProfile := profileWindow("listwatch")
	cpu0, _ := processCPU()
	replicaCPU0 := make([]time.Duration, len(pids))
	for i, pid := range pids {
		replicaCPU0[i], _ = pidCPU(pid)
	}
	start := time.Now()
	if err := w.start(ctx, driver, replicas); err != nil {
		return cpRun{}, nil, fmt.Errorf("start %s: %w", w.name, err)
	}
	err = w.await(ctx, driver, replicas)
	endProfile()
	if err != nil {
		return cpRun{}, nil, err
	}
	elapsed := time.Since(start)
	cpu1, _ := processCPU()
	run := cpRun{wall: elapsed, cpu: cpu1 - cpu0}
	for i, pid := range pids {
		c, _ := pidCPU(pid)
		run.replicas = append(run.replicas, c-replicaCPU0[i])
		run.cpu += c - replicaCPU0[i]
	}
	// Most first: a replica's place in the list is its rank, the same
	// from round to round.
	slices.SortFunc(run.replicas, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	reqs := counter.snapshot()
	maps.Copy(reqs, controllerCounts(manager))
	if len(pids) > 0 {
		// Extra pods are what an expectation miss costs; the replicas'
		// creations are not counted by this process, so count the pods.
		pods, err := client.For[*corev1.Pod](driver, "").List(ctx, metav1.ListOptions{})
		if err != nil {
			return cpRun{}, nil, err
		}
		if want := w.creates(n); len(pods.Items) != want {
			return cpRun{}, nil, fmt.Errorf("%d pods for %d replicas after the replicas' work, want %d", len(pods.Items), n, want)
		}
	}
	return run, reqs, nil
}

// Counts of runControllersSide that are no requests: the syncs each
// controller ran (items its queue handed out, less those put back), and
// those its stale-read protection put back.
const (
	syncsPrefix         = "syncs by "
	staleSkipsPrefix    = "stale syncs skipped by "
	staleTimeoutsPrefix = "stale syncs timed out in "
)

// isSyncCount tells the counts of controllerCounts from those of requests.
func isSyncCount(k string) bool {
	return strings.HasPrefix(k, staleSkipsPrefix) || strings.HasPrefix(k, staleTimeoutsPrefix) || strings.HasPrefix(k, syncsPrefix)
}

// controllerCounts reads, from m's metrics, the syncs each controller ran
// and those its stale-read protection put back.
func controllerCounts(m *controllermanager.Manager) map[string]int64 {
	out := map[string]int64{}
	families, err := m.Registry().Gather()
	if err != nil {
		return out
	}
	handed, skipped, timedOut := map[string]int64{}, map[string]int64{}, map[string]int64{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			name := ""
			for _, l := range metric.GetLabel() {
				if l.GetName() == "name" {
					name = l.GetValue()
				}
			}
			switch f.GetName() {
			case "workqueue_work_duration_seconds":
				handed[name] = int64(metric.GetHistogram().GetSampleCount())
			case "controller_stale_sync_skips_total":
				skipped[name] = int64(metric.GetCounter().GetValue())
			case "controller_stale_sync_timeouts_total":
				timedOut[name] = int64(metric.GetCounter().GetValue())
			}
		}
	}
	for name, n := range handed {
		if n > 0 {
			out[syncsPrefix+name] = n - skipped[name]
		}
		if skipped[name] > 0 {
			out[staleSkipsPrefix+name] = skipped[name]
		}
		if timedOut[name] > 0 {
			out[staleTimeoutsPrefix+name] = timedOut[name]
		}
	}
	return out
}

// awaitObject waits until done holds for the object name of r, watching it
// as kubectl rollout status does: from a GET, then through a watch of that
// one object (watched again from the last resourceVersion seen when the
// stream ends, and from a new GET when it is refused). done also says
// what state the object is in, for -trace and for the error when it never
// gets there.
//
// The watch makes the measure exact and costs the server one event per
// change. Polling did neither: it rounded the time up by its period, and
// its GETs, every few milliseconds, were work only the controllers' side
// paid (the floor polls nothing).
func awaitObject[T cache.Object](ctx context.Context, r *client.Resource[T], name string, done func(T) (bool, string)) error {
	t0, state := time.Now(), ""
	holds := func(obj T) bool {
		ok, now := done(obj)
		if *cpTrace && now != state {
			fmt.Fprintf(os.Stderr, "trace: %6.2fs %s\n", time.Since(t0).Seconds(), now)
		}
		state = now
		return ok
	}
	rv := ""
	for {
		if rv == "" {
			obj, err := r.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s: %w", state, err)
			}
			if holds(obj) {
				return nil
			}
			rv = obj.GetResourceVersion()
		}
		w, err := r.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			return fmt.Errorf("%s: %w", state, err)
		}
		ok, err := func() (bool, error) {
			defer w.Stop()
			for {
				ev, err := w.Next()
				if errors.Is(err, io.EOF) && ctx.Err() == nil {
					return false, nil
				}
				if err != nil {
					return false, err
				}
				switch ev.Type {
				case cache.EventAdded, cache.EventModified:
					rv = ev.Object.GetResourceVersion()
					if holds(ev.Object) {
						return true, nil
					}
				case cache.EventBookmark:
					rv = ev.Object.GetResourceVersion()
				case cache.EventDeleted:
					return false, errors.New("deleted")
				case cache.EventError:
					// Too old a resourceVersion, say: read it again.
					rv = ""
					return false, nil
				}
			}
		}()
		if err != nil {
			return fmt.Errorf("%s: %w", state, err)
		}
		if ok {
			return nil
		}
	}
}

// runFloorSide does the pod writes w needs for n replicas with no
// controllers, at the controllers' concurrency: it creates n pods and
// marks them Running and Ready with the fewest writes the controllers
// could do and, for a workload that replaces pods, deletes n pods made
// (and marked) before the measure, as a rollout must: gracefully, then
// finally, as the kubelet confirms.
func runFloorSide(w cpWorkload, n int) (cpRun, map[string]int64, error) {
	ctx, cp, counter, stop, err := startSide()
	if err != nil {
		return cpRun{}, nil, err
	}
	defer stop()

	c, err := client.New(cp.clientConfig(counter.wrap))
	if err != nil {
		return cpRun{}, nil, err
	}
	pods := client.For[*corev1.Pod](c, "").Namespace(cpNamespace)
	var old []*corev1.Pod
	if d := w.deletes(n); d > 0 {
		// Neither timed nor counted, as the Deployment the controllers
		// roll is made before their measure.
		if old, err = floorPods(ctx, pods, d); err != nil {
			return cpRun{}, nil, fmt.Errorf("pods to delete: %w", err)
		}
	}
	counter.reset()
	endProfile := profileWindow(implFloor)
	cpu0, _ := processCPU()
	start := time.Now()
	errs := make(chan error, 2)
	go func() {
		_, err := floorPods(ctx, pods, w.creates(n))
		errs <- err
	}()
	go func() { errs <- floorDeletes(ctx, pods, old) }()
	err = errors.Join(<-errs, <-errs)
	elapsed := time.Since(start)
	cpu1, _ := processCPU()
	endProfile()
	if err != nil {
		return cpRun{}, nil, err
	}
	return cpRun{wall: elapsed, cpu: cpu1 - cpu0}, counter.snapshot(), nil
}

// floorPods creates n pods with the ReplicationManager's concurrency
// (burstReplicas per round, each round in slow-start batches 1, 2, 4, …)
// while podlifecycle's number of workers binds each, and as many write
// each bound pod Running and Ready, and returns them as created.
func floorPods(ctx context.Context, pods *client.Resource[*corev1.Pod], n int) ([]*corev1.Pod, error) {
	// The pods carry the same controller reference as the RC's would.
	owner := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: cpRCName, Namespace: cpNamespace, UID: types.UID(rand.Text())}}
	ref := controller.NewControllerRef(owner, corev1.SchemeGroupVersion.WithKind("ReplicationController"))
	nodes := []string{"node-1", "node-2", "node-3"}

	// As podlifecycle's scheduler and kubelets, one set of workers binds
	// the pods created and another starts those bound.
	created, bound := make(chan *corev1.Pod, n), make(chan *corev1.Pod, n)
	var markErr atomic.Pointer[error]
	var binders, starters sync.WaitGroup
	for w := range cpLifecycleWorkers {
		binders.Go(func() {
			i := w
			for p := range created {
				node := nodes[i%len(nodes)]
				if err := bindPod(ctx, pods, p, node); err != nil {
					markErr.CompareAndSwap(nil, &err)
					continue
				}
				p.Spec.NodeName = node
				bound <- p
				i++
			}
		})
		starters.Go(func() {
			for p := range bound {
				if err := startPod(ctx, pods, p); err != nil {
					markErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	var mu sync.Mutex
	all := make([]*corev1.Pod, 0, n)
	var createErr error
	for left := n; left > 0 && createErr == nil; {
		round := min(left, replication.DefaultBurstReplicas)
		_, createErr = controller.SlowStartBatch(ctx, round, controller.SlowStartInitialBatchSize, 0, func(ctx context.Context, _ int) error {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					GenerateName:    cpRCName + "-",
					Namespace:       cpNamespace,
					Labels:          map[string]string{"app": cpRCName},
					OwnerReferences: []metav1.OwnerReference{*ref},
				},
				Spec: podSpec(),
			}
			// A 429 from the in-flight cap is retried by the client after
			// the server's Retry-After, for the floor as for the controllers.
			got, err := pods.Create(ctx, p, metav1.CreateOptions{})
			for apierrors.IsAlreadyExists(err) {
				// The server draws a generated name again when the one it
				// drew is taken, up to 8 times as kube-apiserver does, so
				// this takes 8 collisions in a row (5 random characters
				// collide a few times in 10,000, so practically never);
				// the ReplicationManager would try again at its next sync.
				got, err = pods.Create(ctx, p, metav1.CreateOptions{})
			}
			if err != nil {
				return err
			}
			mu.Lock()
			all = append(all, got)
			mu.Unlock()
			created <- got
			return nil
		})
		left -= round
	}
	close(created)
	binders.Wait()
	close(bound)
	starters.Wait()
	if createErr != nil {
		return nil, createErr
	}
	if p := markErr.Load(); p != nil {
		return nil, *p
	}
	return all, nil
}

// floorDeletes deletes pods as a ReplicaSet controller and the kubelets
// do: gracefully, burstReplicas per round in slow-start batches (as the
// floor creates them), then finally (a zero grace period, with the pod's
// UID as precondition) by as many workers as podlifecycle runs for
// terminations.
func floorDeletes(ctx context.Context, pods *client.Resource[*corev1.Pod], victims []*corev1.Pod) error {
	graceful := make(chan *corev1.Pod, len(victims))
	var finalErr atomic.Pointer[error]
	var final sync.WaitGroup
	for range cpLifecycleWorkers {
		final.Go(func() {
			zero := int64(0)
			for p := range graceful {
				err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
				if err != nil {
					finalErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	var err error
	for round := range slices.Chunk(victims, replication.DefaultBurstReplicas) {
		if err != nil {
			break
		}
		_, err = controller.SlowStartBatch(ctx, len(round), controller.SlowStartInitialBatchSize, 0, func(ctx context.Context, i int) error {
			p := round[i]
			if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				return err
			}
			graceful <- p
			return nil
		})
	}
	close(graceful)
	final.Wait()
	if p := finalErr.Load(); p != nil {
		err = errors.Join(err, *p)
	}
	return err
}

// bindPod binds p to node through pods/binding, podlifecycle's first
// write.
func bindPod(ctx context.Context, pods *client.Resource[*corev1.Pod], p *corev1.Pod, node string) error {
	b := &corev1.Binding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := pods.CreateSubresource(ctx, p.Name, "binding", b, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bind %s: %w", p.Name, err)
	}
	return nil
}

// startPod writes the bound pod p Running and Ready through pods/status,
// podlifecycle's second write. Pods take status updates without a
// resourceVersion, so no read comes between.
func startPod(ctx context.Context, pods *client.Resource[*corev1.Pod], p *corev1.Pod) error {
	next := p.DeepCopy()
	next.ResourceVersion = ""
	now := metav1.Now()
	next.Status.Phase = corev1.PodRunning
	next.Status.StartTime = &now
	next.Status.HostIP = "10.0.0.1"
	next.Status.PodIP = "10.244.0.1"
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		next.Status.Conditions = append(next.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	started := true
	for i, ctr := range next.Spec.Containers {
		next.Status.ContainerStatuses = append(next.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image, ImageID: "sim://" + ctr.Image,
			ContainerID: "sim://" + string(p.UID) + "/" + strconv.Itoa(i),
			Ready:       true, Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if _, err := pods.UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	return nil
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// controlPlane is the API server of `listwatch up` (package serve) on a
// fresh embedded etcd, behind the same filters and in-flight caps, over
// HTTPS with HTTP/2 on 127.0.0.1.
type controlPlane struct {
	dir    string
	member *etcd.Embedded
	store  *etcd.Store
	srv    *serve.Server
	// stop ends the serving; served is closed once it has.
	stop   context.CancelFunc
	served chan struct{}
}

func startControlPlane(ctx context.Context) (_ *controlPlane, err error) {
	dir, err := os.MkdirTemp("", "listwatch-bench-etcd-")
	if err != nil {
		return nil, err
	}
	cp := &controlPlane{dir: dir}
	defer func() {
		if err != nil {
			cp.close()
		}
	}()
	if cp.member, err = etcd.StartEmbedded(ctx, etcd.EmbeddedConfig{Dir: filepath.Join(dir, "etcd")}); err != nil {
		return nil, err
	}
	ecfg := cp.member.ClientConfig()
	ecfg.Logger = quietLogger()
	if cp.store, err = etcd.New(ctx, ecfg); err != nil {
		return nil, err
	}
	if cp.srv, err = serve.New(serve.Config{
		API: apiserver.Config{Storage: cp.store,
			// No service account controller runs in the bench: as envtest,
			// ServiceAccount admission is off.
			DisableAdmissionPlugins: []string{"ServiceAccount"}},
		CertDir:   filepath.Join(dir, "pki"),
		AdminUser: "bench",
		Filters: filters.Options{
			MaxRequestBodyBytes:         filters.DefaultMaxRequestBodyBytes,
			MaxRequestsInFlight:         filters.DefaultMaxRequestsInFlight,
			MaxMutatingRequestsInFlight: filters.DefaultMaxMutatingRequestsInFlight,
			// Requests over the caps wait for a seat, as kube-apiserver's
			// API Priority and Fairness (on by default) queues them,
			// rather than cost their client a Retry-After second: the
			// kube-controller-manager figures these rows are held to were
			// measured so.
			InFlightQueue: filters.PriorityAndFairnessQueue,
		},
		Logger: quietLogger(),
	}); err != nil {
		return nil, err
	}
	run, stop := context.WithCancel(context.WithoutCancel(ctx))
	cp.stop, cp.served = stop, make(chan struct{})
	go func() {
		defer close(cp.served)
		if err := cp.srv.Run(run); err != nil {
			fmt.Fprintf(os.Stderr, "bench: serving: %v\n", err)
		}
	}()
	if err := cp.srv.WaitReady(ctx); err != nil {
		return nil, err
	}

	c, err := client.New(cp.clientConfig(nil))
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cpNamespace}}
	if _, err := client.For[*corev1.Namespace](c, "").Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	return cp, nil
}

// clientConfig is what a kubeconfig of the control plane gives, without
// client-side rate limits (the controller-manager and the floor alike),
// with wrap, when not nil, around the transport.
func (cp *controlPlane) clientConfig(wrap func(http.RoundTripper) http.RoundTripper) *client.Config {
	rc := cp.srv.RESTConfig()
	if wrap != nil {
		rc.WrapTransport = wrap
	}
	return &client.Config{REST: rc, Namespace: cpNamespace, QPS: -1}
}

func (cp *controlPlane) close() {
	switch {
	case cp.stop != nil:
		cp.stop()
		<-cp.served
	case cp.srv != nil:
		cp.srv.Close()
	}
	var errs []error
	if cp.store != nil {
		errs = append(errs, cp.store.Close())
	}
	if cp.member != nil {
		errs = append(errs, cp.member.Close())
	}
	errs = append(errs, os.RemoveAll(cp.dir))
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "bench: closing control plane: %v\n", err)
	}
}

// cpTrace asks the control-plane rows for a timeline on stderr: each
// state the driver polls, and, for each kind of request, when the first,
// the 10th, 50th and 90th percentile and the last of them completed.
var cpRounds = flag.Int("rounds", 1, "control-plane rows: run each side this many times, alternating which goes first, and report the medians (each round's times on stderr)")

var cpStaleReadTimeout = flag.Duration("stale-read-timeout", 0, "control-plane rows: the controller-manager's stale-read protection timeout (0: its default; negative: protection off)")

var cpTrace = flag.Bool("trace", false, "control-plane rows: print on stderr when each kind of request completed and each state the driver saw")

// requestCounter counts the requests through a transport by verb and
// resource ("create pods", "update pods/status", "watch pods", …),
// whatever their outcome: a retried or refused request still cost a trip.
// With -trace it also keeps when each completed, from start (set by
// reset), and snapshot prints their spread.
// cpQuiet is how long the controller-manager must send no request for its
// start-up to be taken as over (awaitQuiet).
const cpQuiet = 300 * time.Millisecond

// awaitQuiet waits until the client counted by c has sent no request for
// quiet.
func awaitQuiet(ctx context.Context, c *requestCounter, quiet time.Duration) error {
	total := func() (n int64) {
		for _, v := range c.snapshot() {
			n += v
		}
		return n
	}
	last, since := total(), time.Now()
	for time.Since(since) < quiet {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(quiet / 10):
		}
		if n := total(); n != last {
			last, since = n, time.Now()
		}
	}
	return nil
}

type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int64
	times  map[string][]time.Duration
	start  time.Time
}

func (r *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		k := requestKey(req)
		resp, err := rt.RoundTrip(req)
		switch {
		case err != nil:
			k += " (error)"
		case resp.StatusCode >= 300:
			// Refused requests (429 from the in-flight cap, 409s) are
			// counted apart, so that "create pods" is what was created.
			k += " (" + strconv.Itoa(resp.StatusCode) + ")"
		}
		r.mu.Lock()
		if r.counts == nil {
			r.counts = map[string]int64{}
		}
		r.counts[k]++
		if *cpTrace {
			if r.times == nil {
				r.times = map[string][]time.Duration{}
			}
			r.times[k] = append(r.times[k], time.Since(r.start))
		}
		r.mu.Unlock()
		return resp, err
	})
}

func (r *requestCounter) reset() {
	r.mu.Lock()
	r.counts = nil
	r.times = nil
	r.start = time.Now()
	r.mu.Unlock()
}

func (r *requestCounter) snapshot() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(r.times)) {
		ts := r.times[k]
		n := len(ts)
		fmt.Fprintf(os.Stderr, "trace: %-40s n=%5d done at first %6.2fs p10 %6.2fs p50 %6.2fs p90 %6.2fs last %6.2fs\n",
			k, n, ts[0].Seconds(), ts[n/10].Seconds(), ts[n/2].Seconds(), ts[n*9/10].Seconds(), ts[n-1].Seconds())
	}
	out := make(map[string]int64, len(r.counts))
	for k, v := range r.counts {
		out[k] = v
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// requestKey names a request as the API server's audit log would: the
// Kubernetes verb and the resource, with its subresource.
func requestKey(req *http.Request) string {
	path := strings.Trim(req.URL.Path, "/")
	segs := strings.Split(path, "/")
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		segs = segs[3:]
	default:
		return strings.ToLower(req.Method) + " /" + path
	}
	if len(segs) >= 3 && segs[0] == "namespaces" {
		segs = segs[2:]
	}
	if len(segs) == 0 {
		return strings.ToLower(req.Method) + " discovery"
	}
	resource, named := segs[0], len(segs) >= 2
	if len(segs) >= 3 {
		resource += "/" + segs[2]
	}
	verb := strings.ToLower(req.Method)
	switch req.Method {
	case http.MethodGet:
		switch {
		case named:
			verb = "get"
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodDelete:
		if !named {
			verb = "deletecollection"
		}
	}
	return verb + " " + resource
}
