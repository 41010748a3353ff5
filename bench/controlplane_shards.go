package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
)

// The sharded rows (controlplane-rcs-*): the rc rows' n pods, made by
// cpShardRCs ReplicationControllers of n/cpShardRCs replicas spread over
// cpShardNamespaces namespaces, so that the ReplicationManager's work can
// be split by namespace. With -replicas N the ReplicationManager runs as
// N controller-manager processes (this binary, re-executed) sharing
// cpShards shards (controllermanager.Config.Shards), the pod lifecycle
// controller in the bench's process; each replica's CPU over the timed
// window is read from /proc and reported apart. Without -replicas they
// run in process, unsharded, as the other rows.
const (
	cpShards          = 6
	cpShardRCs        = 100
	cpShardNamespaces = 24
)

var cpReplicas = flag.Int("replicas", 0, "controlplane-rcs rows: run the ReplicationManager as this many controller-manager processes sharing "+strconv.Itoa(cpShards)+" shards (0: in the bench's process, unsharded)")

func init() {
	for _, n := range []int{1_000, 10_000} {
		name := "controlplane-" + rcsWorkload.name + "-" + strconv.Itoa(n/1000) + "k"
		register(name, func(cfg config) ([]Row, error) {
			return benchControlPlane(name, rcsWorkload, max(cfg.size(n), cpShardRCs))
		})
	}
}

// shardNamespace names the namespace of RC i. The names differ at their
// start: kube's FNV-1a hash barely moves its high bits for a change in
// the last bytes, so cp-rcs-00 to cp-rcs-23 would share one shard of 6.
func shardNamespace(i int) string { return fmt.Sprintf("%02d-cp-rcs", i%cpShardNamespaces) }

// rcsWorkload: cpShardRCs RCs over cpShardNamespaces namespaces, n pods
// in all, to every RC's readyReplicas.
var rcsWorkload = cpWorkload{
	name: "rcs", metric: "time to readyReplicas", noFloor: true,
	prepare: func(ctx context.Context, c *client.Client, _ int32) error {
		for i := range cpShardNamespaces {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shardNamespace(i)}}
			if _, err := client.For[*corev1.Namespace](c, "").Create(ctx, ns, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	},
	start: func(ctx context.Context, c *client.Client, n int32) error {
		per := n / cpShardRCs
		for i := range cpShardRCs {
			name := fmt.Sprintf("rc-%03d", i)
			rc := &corev1.ReplicationController{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.ReplicationControllerSpec{
					Replicas: &per,
					Selector: map[string]string{"app": name},
					Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: podSpec()},
				},
			}
			if _, err := client.For[*corev1.ReplicationController](c, shardNamespace(i)).Create(ctx, rc, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	},
	await: func(ctx context.Context, c *client.Client, n int32) error {
		rcs := client.For[*corev1.ReplicationController](c, "")
		for {
			l, err := rcs.List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			var ready int32
			for _, rc := range l.Items {
				ready += rc.Status.ReadyReplicas
			}
			if ready == n/cpShardRCs*cpShardRCs {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%d of %d pods ready: %w", ready, n, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	},
	creates: func(n int) int { return n / cpShardRCs * cpShardRCs }, deletes: times(0),
}

// replicaEnv carries a replica process's replicaConfig: its presence
// makes the bench binary run one replica (runReplica) instead of rows.
const replicaEnv = "LISTWATCH_BENCH_REPLICA"

// replicaConfig is how a replica process reaches the control plane.
type replicaConfig struct {
	Host, Token string
	CA          []byte
	Shards      int
}

// startReplicas starts n replica processes against cp; stop ends them
// (SIGTERM, so that they release their Leases) and waits for them.
func startReplicas(cp *controlPlane, n int) (pids []int, stop func(), err error) {
	rc := cp.srv.RESTConfig()
	cfg, err := json.Marshal(replicaConfig{Host: rc.Host, Token: rc.BearerToken, CA: rc.CAData, Shards: cpShards})
	if err != nil {
		return nil, nil, err
	}
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
	}
	for range n {
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), replicaEnv+"="+string(cfg))
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			stop()
			return nil, nil, err
		}
		cmds = append(cmds, c)
		pids = append(pids, c.Process.Pid)
	}
	return pids, stop, nil
}

// runReplica is a replica process: the ReplicationManager with Shards,
// leader election's default durations, until SIGTERM.
func runReplica(spec string) int {
	var cfg replicaConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "bench replica: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	m, err := controllermanager.New(controllermanager.Config{
		Client: &client.Config{REST: &rest.Config{Host: cfg.Host, BearerToken: cfg.Token,
			TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CA}}, QPS: -1},
		Controllers: []string{controllermanager.Replication},
		Shards:      cfg.Shards,
		Logger:      quietLogger(),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench replica: %v\n", err)
		return 2
	}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "bench replica: %v\n", err)
		return 1
	}
	return 0
}

// awaitShardsBalanced waits until replicas processes hold the shards,
// each its equal share (one more for some where they do not divide).
func awaitShardsBalanced(ctx context.Context, c *client.Client, replicas int) error {
	leases := client.For[*coordinationv1.Lease](c, controllermanager.DefaultLeaseNamespace)
	for {
		l, err := leases.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		held := map[string]int{}
		for _, item := range l.Items {
			if strings.HasPrefix(item.Name, controllermanager.DefaultLeaseName+"-shard-") && item.Spec.HolderIdentity != nil && *item.Spec.HolderIdentity != "" {
				held[*item.Spec.HolderIdentity]++
			}
		}
		counts := slices.Collect(func(yield func(int) bool) {
			for _, v := range held {
				if !yield(v) {
					return
				}
			}
		})
		slices.Sort(counts)
		if len(counts) == replicas && counts[0] >= cpShards/replicas && counts[len(counts)-1] <= (cpShards+replicas-1)/replicas {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("shards not shared out among %d replicas: %v: %w", replicas, held, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pidCPU is the CPU time, user and system, that process pid has used,
// from /proc/<pid>/stat; false where there is no /proc.
func pidCPU(pid int) (time.Duration, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: count the fields
	// after its closing one. utime and stime are fields 14 and 15, in
	// clock ticks (USER_HZ, 100 on Linux).
	_, rest, ok := strings.Cut(line, ") ")
	if !ok {
		return 0, false
	}
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * (time.Second / 100), true
}
