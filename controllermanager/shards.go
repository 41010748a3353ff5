package controllermanager

import (
	"context"
	"fmt"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/internal/ctxtime"
	"github.com/listwatch/listwatch/leaderelection"
)

// Shardable lists the controllers Config.Shards splits
// (informers.ShardByNamespace), each with why it can be split by namespace: everything one of its syncs reads or writes
// is in the namespace of the object it syncs, so a replica that sees a
// namespace whole sees all it needs. They are split by namespace, not by
// uid, because an owner and the objects it owns (a ReplicaSet and its
// pods) have different uids and must be seen together. The controllers
// not listed read cluster-scoped objects (nodes, namespaces, cluster
// roles, admission policies) or follow references across namespaces (the
// garbage collector), and run whole.
var Shardable = map[string]string{
	Replication:   "a ReplicationController's pods are in its namespace",
	ReplicaSet:    "a ReplicaSet's pods are in its namespace",
	Deployment:    "a Deployment's ReplicaSets and their pods are in its namespace",
	Job:           "a Job's pods are in its namespace",
	Endpoints:     "a Service's pods and Endpoints are in its namespace",
	CronJob:       "a CronJob's Jobs are in its namespace",
	StatefulSet:   "a StatefulSet's pods, PersistentVolumeClaims and ControllerRevisions are in its namespace",
	PVCProtection: "the pods that use a claim are in its namespace",
	Disruption:    "a PodDisruptionBudget's pods, and their controllers, are in its namespace",
	// Its syncs read nothing but the Job they delete.
	TTLAfterFinished: "a finished Job is deleted on its own",
}

// runSharded runs the shardable controllers once per shard this replica
// holds, and the others whole behind leader election, until ctx ends.
func (m *Manager) runSharded(ctx context.Context) error {
	var whole, split []string
	for _, n := range m.controllers {
		if _, ok := Shardable[n]; ok {
			split = append(split, n)
		} else {
			whole = append(whole, n)
		}
	}
	le := m.cfg.LeaderElection
	sharder, err := leaderelection.NewSharder(leaderelection.ShardConfig{
		Client: newLeaseClient(m.client), Namespace: m.leaseNamespace(), Name: m.leaseName(),
		Identity: m.identity, Shards: m.cfg.Shards,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		Logger: m.log,
		Run: func(ctx context.Context, shard int) {
			g := &group{names: split, shard: &informers.Shard{Key: informers.ShardByNamespace, Count: m.cfg.Shards, Index: []int{shard}}}
			m.keepRunning(ctx, func(ctx context.Context) error { return m.runControllers(ctx, g) })
		},
	})
	if err != nil {
		return fmt.Errorf("controllermanager: %w", err)
	}
	var wg sync.WaitGroup
	if len(whole) > 0 {
		wg.Go(func() { m.runWhole(ctx, whole) })
	}
	if len(split) > 0 {
		err = sharder.Run(ctx)
	}
	wg.Wait()
	return err
}

// keepRunning runs run until ctx ends: again at once whenever it returns
// nil first, after a backoff that doubles up to maxRestartBackoff
// whenever it fails.
func (m *Manager) keepRunning(ctx context.Context, run func(context.Context) error) {
	backoff := minRestartBackoff
	for {
		err := run(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			backoff = minRestartBackoff
			continue
		}
		m.log.Error("controllers failed; starting them again", "err", err, "after", backoff)
		if !ctxtime.Sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, maxRestartBackoff)
	}
}

// List lists the Leases of namespace that match labelSelector, for the
// Sharder.
func (l leaseClient) List(ctx context.Context, namespace, labelSelector string) ([]coordinationv1.Lease, error) {
	list, err := l.leases.Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: labelSelector})
	if err != nil {
		return nil, err
	}
	out := make([]coordinationv1.Lease, len(list.Items))
	for i, item := range list.Items {
		out[i] = *item
	}
	return out, nil
}
