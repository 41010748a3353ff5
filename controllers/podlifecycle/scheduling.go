package podlifecycle

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// usage is what the pods placed on a node request of it.
type usage struct {
	milliCPU, memory, storage int64
	pods                      int64
}

func (u usage) plus(v usage) usage {
	return usage{u.milliCPU + v.milliCPU, u.memory + v.memory, u.storage + v.storage, u.pods + v.pods}
}

func (u usage) minus(v usage) usage {
	return usage{u.milliCPU - v.milliCPU, u.memory - v.memory, u.storage - v.storage, u.pods - v.pods}
}

// podUsage is what pod requests of its node, computed by kube's own
// helper (init containers, sidecars, overhead and pod-level resources
// counted as the scheduler counts them).
func podUsage(pod *corev1.Pod) usage {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return usage{
		milliCPU: req.Cpu().MilliValue(),
		memory:   req.Memory().Value(),
		storage:  req.StorageEphemeral().Value(),
		pods:     1,
	}
}

// Why a node does not fit a pod, in kube-scheduler's words.
const (
	reasonUnschedulable = "node(s) were unschedulable"
	reasonAffinity      = "node(s) didn't match Pod's node affinity/selector"
	reasonTooManyPods   = "Too many pods"
)

// fit reports why node cannot take pod, whose placement would add want
// to what the node's pods already use; none when it can. The checks are
// kube-scheduler's filters, in its order, the first that fails saying
// why: NodeUnschedulable, TaintToleration (NoSchedule and NoExecute),
// NodeAffinity (nodeSelector and required affinity) and NodeResourcesFit,
// each through kube's helpers.
func fit(pod *corev1.Pod, node *corev1.Node, used, want usage) []string {
	if node.Spec.Unschedulable && !toleratesUnschedulable(pod) {
		return []string{reasonUnschedulable}
	}
	if taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true); untolerated {
		return []string{fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value)}
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return []string{reasonAffinity}
	}
	var why []string
	alloc := node.Status.Allocatable
	total := used.plus(want)
	if q, ok := alloc[corev1.ResourcePods]; ok && total.pods > q.Value() {
		why = append(why, reasonTooManyPods)
	}
	if want.milliCPU > 0 && total.milliCPU > alloc.Cpu().MilliValue() {
		why = append(why, "Insufficient cpu")
	}
	if want.memory > 0 && total.memory > alloc.Memory().Value() {
		why = append(why, "Insufficient memory")
	}
	if want.storage > 0 && total.storage > alloc.StorageEphemeral().Value() {
		why = append(why, "Insufficient ephemeral-storage")
	}
	return why
}

// toleratesUnschedulable reports whether pod tolerates the taint that
// marks a cordoned node, as DaemonSet pods do.
func toleratesUnschedulable(pod *corev1.Pod) bool {
	taint := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	return corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, &taint, true)
}

// unschedulableMessage is kube-scheduler's message for a pod no node
// fits: how many nodes failed for each reason ("2 Insufficient cpu"),
// sorted as strings, then what preemption found.
func unschedulableMessage(nodes int, reasons map[string]int) string {
	parts := make([]string, 0, len(reasons))
	for r, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	slices.Sort(parts)
	msg := fmt.Sprintf("0/%d nodes are available", nodes)
	if len(parts) > 0 {
		msg += ": " + strings.Join(parts, ", ")
	}
	return msg + fmt.Sprintf(". preemption: 0/%d nodes are available: %d Preemption is not helpful for scheduling.", nodes, nodes)
}
