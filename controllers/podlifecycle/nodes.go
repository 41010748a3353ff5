package podlifecycle

import (
	"context"
	"fmt"
	"maps"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClient is what the simulated kubelets register their nodes and
// renew their heartbeats through.
type NodeClient interface {
	// Nodes reads and writes the nodes: Update their spec (taints),
	// UpdateStatus their status subresource.
	Nodes() Objects[*corev1.Node]
	// Leases reads and writes the nodes' Leases in kube-node-lease.
	Leases() Objects[*coordinationv1.Lease]
}

// Objects reads and writes the objects of one kind by name, in the
// namespace the client is for. Errors must be recognisable by
// k8s.io/apimachinery/pkg/api/errors.
type Objects[T any] interface {
	Get(ctx context.Context, name string) (T, error)
	Create(ctx context.Context, obj T) (T, error)
	Update(ctx context.Context, obj T) (T, error)
	UpdateStatus(ctx context.Context, obj T) (T, error)
}

// Defaults of the nodes' heartbeats, a kubelet's: the Lease renewed every
// 10 s for 40 s, the Ready condition's heartbeat posted every minute
// (kubelets post it when something changed, or every
// nodeStatusReportFrequency, 5 min by default).
const (
	DefaultLeaseRenewInterval = 10 * time.Second
	DefaultLeaseDuration      = 40 * time.Second
	DefaultNodeStatusInterval = time.Minute
)

// KubeletVersion is what the simulated nodes report as their kubelet's
// version: the version of Kubernetes listwatch serves.
const KubeletVersion = "v1.37.2"

// NodeLabel marks the Node objects of the simulated nodes.
const NodeLabel = "listwatch.io/simulated-node"

// DefaultNodeCapacity is a simulated node's capacity (and allocatable),
// kwok's default: 32 CPUs, 256 GiB of memory, 110 pods.
func DefaultNodeCapacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
}

// newNode is the Node a simulated kubelet registers as name.
func newNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"beta.kubernetes.io/arch": "amd64",
				"beta.kubernetes.io/os":   "linux",
				corev1.LabelArchStable:    "amd64",
				corev1.LabelHostname:      name,
				corev1.LabelOSStable:      "linux",
				NodeLabel:                 "true",
			},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
		},
	}
}

// nodeStatus is the status a simulated kubelet posts for node at now:
// Ready, with no pressure, its conditions' transition times kept from
// the status it replaces.
func (c *Controller) nodeStatus(node *corev1.Node, now time.Time) corev1.NodeStatus {
	t := metav1.NewTime(now)
	prev := map[corev1.NodeConditionType]metav1.Time{}
	for _, cond := range node.Status.Conditions {
		prev[cond.Type] = cond.LastTransitionTime
	}
	cond := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		transition, ok := prev[typ]
		if !ok {
			transition = t
		}
		return corev1.NodeCondition{Type: typ, Status: status, LastHeartbeatTime: t, LastTransitionTime: transition, Reason: reason, Message: message}
	}
	capacity := maps.Clone(c.opts.NodeCapacity)
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: maps.Clone(capacity),
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: hostIP(node.Name)},
			{Type: corev1.NodeHostName, Address: node.Name},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID:               node.Name,
			SystemUUID:              node.Name,
			BootID:                  string(node.UID),
			KernelVersion:           "listwatch",
			OSImage:                 "listwatch simulated node",
			ContainerRuntimeVersion: "listwatch://" + KubeletVersion,
			KubeletVersion:          KubeletVersion,
			OperatingSystem:         "linux",
			Architecture:            "amd64",
		},
	}
}

// runNodes registers the simulated nodes and keeps their heartbeats
// until ctx ends: each node's Lease renewed every LeaseRenewInterval, its
// status every NodeStatusInterval. A failed write is logged and made
// again at the next beat.
func (c *Controller) runNodes(ctx context.Context) {
	lastStatus := map[string]time.Time{}
	for first := true; ; first = false {
		now := time.Now()
		for _, name := range c.opts.Nodes {
			if now.Sub(lastStatus[name]) >= c.opts.NodeStatusInterval || lastStatus[name].IsZero() {
				if err := c.postNodeStatus(ctx, name, now); err != nil {
					if ctx.Err() != nil {
						return
					}
					c.Logger().Warn("posting node status", "node", name, "err", err)
				} else {
					lastStatus[name] = now
					if first {
						c.registeredMu.Lock()
						c.registeredOK = append(c.registeredOK, name)
						c.registeredMu.Unlock()
					}
				}
			}
			if err := c.renewLease(ctx, name, now); err != nil {
				if ctx.Err() != nil {
					return
				}
				c.Logger().Warn("renewing node lease", "node", name, "err", err)
			}
		}
		if first {
			c.registered.Store(true)
		}
		t := time.NewTimer(min(c.opts.LeaseRenewInterval, c.opts.NodeStatusInterval))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// postNodeStatus registers node name if it is not, and posts its status.
// Its spec (taints, unschedulable) and labels are the cluster's to change
// and are left as they are.
func (c *Controller) postNodeStatus(ctx context.Context, name string, now time.Time) error {
	node, err := c.client.Nodes().Get(ctx, name)
	if apierrors.IsNotFound(err) {
		node, err = c.client.Nodes().Create(ctx, newNode(name))
		if apierrors.IsAlreadyExists(err) {
			node, err = c.client.Nodes().Get(ctx, name)
		}
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", name, err)
	}
	node = node.DeepCopy()
	node.Status = c.nodeStatus(node, now)
	node, err = c.client.Nodes().UpdateStatus(ctx, node)
	if err != nil {
		return fmt.Errorf("posting the status of node %s: %w", name, err)
	}
	if taints := readyTaints(node.Spec.Taints); len(taints) != len(node.Spec.Taints) {
		node = node.DeepCopy()
		node.Spec.Taints = taints
		if _, err := c.client.Nodes().Update(ctx, node); err != nil {
			return fmt.Errorf("untainting ready node %s: %w", name, err)
		}
	}
	return nil
}

// readyTaints are taints without the NoSchedule taints of a node not
// ready or unreachable: the API server's TaintNodesByCondition admission
// puts node.kubernetes.io/not-ready on every node registered, and kube's
// node lifecycle controller takes it off once the node reports Ready.
// listwatch runs no node lifecycle controller, so the simulated nodes,
// always Ready, take it off themselves.
func readyTaints(taints []corev1.Taint) []corev1.Taint {
	out := taints[:0:0]
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoSchedule && (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// renewLease renews node name's Lease in kube-node-lease, owned by the
// Node as a kubelet's is, creating it if need be.
func (c *Controller) renewLease(ctx context.Context, name string, now time.Time) error {
	renew := metav1.NewMicroTime(now)
	lease, err := c.client.Leases().Get(ctx, name)
	if apierrors.IsNotFound(err) {
		node, nerr := c.client.Nodes().Get(ctx, name)
		if nerr != nil {
			return fmt.Errorf("lease of node %s: %w", name, nerr)
		}
		holder := name
		duration := int32(c.opts.LeaseDuration / time.Second)
		_, err = c.client.Leases().Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: corev1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: node.UID}},
			},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration, RenewTime: &renew},
		})
		return err
	}
	if err != nil {
		return err
	}
	lease = lease.DeepCopy()
	lease.Spec.RenewTime = &renew
	_, err = c.client.Leases().Update(ctx, lease)
	return err
}
