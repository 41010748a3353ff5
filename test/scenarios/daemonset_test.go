package scenarios

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/listwatch/listwatch/client"
)

// taintedNode is the stand-in node the DaemonSet scenario taints, and the
// taint, which the set does not tolerate.
const taintedNode = "node-3"

var scenarioTaint = corev1.Taint{Key: "scenario.listwatch.io/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}

// daemonSetTaintedNode is a DaemonSet over the 3 stand-in nodes, one of
// which carries a NoSchedule taint the set does not tolerate: it runs 2
// pods (each bound by kube's node-name affinity), then is rolled to a new
// image, one node at a time (RollingUpdate, maxUnavailable 1), which
// makes a second ControllerRevision. The taint is removed when the
// scenario ends, for the scenarios after it.
func daemonSetTaintedNode() scenario {
	const name = "agent"
	return scenario{
		name: "daemonset-tainted-node",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			// The set is made once the nodes are up, and node-3 tainted:
			// a pod placed before the taint would stay (a NoSchedule
			// taint evicts nothing).
			if err := awaitNodesReady(ctx, c); err != nil {
				return err
			}
			if err := taint(ctx, c, true); err != nil {
				return err
			}
			labels := map[string]string{"app": name}
			_, err := client.For[*appsv1.DaemonSet](c, ns).Create(ctx, &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: appsv1.DaemonSetSpec{
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx:1.26"}}},
					},
				},
			}, metav1.CreateOptions{})
			return err
		},
		done: daemonSetSettled(name, 2, "nginx:1.26"),
		then: []step{{
			do: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
				_, err := client.For[*appsv1.DaemonSet](c, ns).Patch(ctx, name, types.MergePatchType,
					[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"nginx:1.27"}]}}}}`), metav1.PatchOptions{})
				return err
			},
			until: daemonSetSettled(name, 2, "nginx:1.27"),
		}},
		cleanup: func(ctx context.Context, c *client.Client) error { return taint(ctx, c, false) },
	}
}

// standInNodes are the stand-in's nodes (podlifecycle's default).
var standInNodes = []string{"node-1", "node-2", "node-3"}

// awaitNodesReady waits for the stand-in's nodes to be registered and
// Ready, without the taints a node has until it is (which a DaemonSet
// does not tolerate).
func awaitNodesReady(ctx context.Context, c *client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		ready := 0
		for _, name := range standInNodes {
			n, err := client.For[*corev1.Node](c, "").Get(ctx, name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err == nil && nodeReady(n) {
				ready++
			}
		}
		if ready == len(standInNodes) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the stand-in nodes are not Ready: %w", ctx.Err())
		case <-time.After(poll):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// taint adds scenarioTaint to taintedNode, or removes it, keeping the
// node's other taints.
func taint(ctx context.Context, c *client.Client, add bool) error {
	nodes := client.For[*corev1.Node](c, "")
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, taintedNode, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == scenarioTaint.Key })
		if add {
			n.Spec.Taints = append(n.Spec.Taints, scenarioTaint)
		}
		_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// daemonSetSettled reports whether the DaemonSet's status is of its latest
// generation and shows n pods scheduled, ready, available and updated, and
// whether its namespace holds just those n pods, of image, none being
// deleted.
func daemonSetSettled(name string, n int32, image string) func(ctx context.Context, c *client.Client, ns string) (bool, error) {
	return func(ctx context.Context, c *client.Client, ns string) (bool, error) {
		ds, err := client.For[*appsv1.DaemonSet](c, ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := ds.Status
		if st.ObservedGeneration != ds.Generation || st.DesiredNumberScheduled != n || st.CurrentNumberScheduled != n ||
			st.NumberReady != n || st.NumberAvailable != n || st.UpdatedNumberScheduled != n || st.NumberUnavailable != 0 {
			return false, nil
		}
		pods, err := client.For[*corev1.Pod](c, ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(pods.Items) != int(n) {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != image {
				return false, nil
			}
		}
		return true, nil
	}
}
