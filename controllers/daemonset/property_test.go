package daemonset

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubernetes/pkg/controller/daemon/util"

	"github.com/listwatch/listwatch/internal/proptest"
)

// TestPlacementProperty: over random histories of nodes joining,
// leaving and changing their labels and taints, and of template changes
// under a random update strategy, once the controller and the kubelet
// have settled and synced the set once more, every node kube's
// NodeShouldRunDaemonPod says should run
// the set's pod has exactly one, of the current template, every node
// that should not keep one has none, and the status counts just that.
// The pods of a node that leaves go with it, as the pod garbage collector
// deletes them.
func TestPlacementProperty(t *testing.T) {
	labelValues := []string{"a", "b"}
	taints := []string{"", "dedicated=db:NoSchedule", "evict=yes:NoExecute", corev1.TaintNodeUnschedulable + ":NoSchedule", "tolerated=yes:NoSchedule"}
	proptest.ForEachSeed(t, 40, func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 0))
		randomNode := func(name string) *corev1.Node {
			var labels, ts []string
			if v := labelValues[rng.IntN(len(labelValues))]; rng.IntN(3) > 0 {
				labels = append(labels, "zone="+v)
			}
			if tt := taints[rng.IntN(len(taints))]; tt != "" {
				ts = append(ts, tt)
			}
			return node(name, labels, ts...)
		}
		strategy := appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
		switch rng.IntN(3) {
		case 0:
			strategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{
				MaxUnavailable: new(intstr.FromInt32(1 + rng.Int32N(2))), MaxSurge: new(intstr.FromInt32(0))}}
		case 1:
			strategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{
				MaxUnavailable: new(intstr.FromInt32(0)), MaxSurge: new(intstr.FromInt32(1 + rng.Int32N(2)))}}
		}
		ds := newSet(func(s *appsv1.DaemonSetSpec) {
			s.UpdateStrategy = strategy
			s.Template.Spec.Tolerations = []corev1.Toleration{{Key: "tolerated", Operator: corev1.TolerationOpExists}}
			if rng.IntN(2) == 0 {
				s.Template.Spec.NodeSelector = map[string]string{"zone": labelValues[rng.IntN(len(labelValues))]}
			}
		})
		var nodes []*corev1.Node
		for i := range 1 + rng.IntN(4) {
			nodes = append(nodes, randomNode(fmt.Sprintf("node-%d", i)))
		}
		a, stop := start(t, ds, nodes...)
		defer stop()
		images := 1
		for step := range 8 {
			switch rng.IntN(4) {
			case 0: // a node joins
				if _, err := a.nodes.Create(randomNode(fmt.Sprintf("node-%d", 10+step))); err != nil {
					t.Fatal(err)
				}
			case 1: // a node changes its labels and taints
				all := a.nodes.Items()
				if len(all) == 0 {
					continue
				}
				n := all[rng.IntN(len(all))].DeepCopy()
				next := randomNode(n.Name)
				n.Labels, n.Spec.Taints = next.Labels, next.Spec.Taints
				if _, err := a.nodes.Update(n); err != nil {
					t.Fatal(err)
				}
			case 2: // a node leaves, its pods with it
				all := a.nodes.Items()
				if len(all) == 0 {
					continue
				}
				gone := all[rng.IntN(len(all))].Name
				if _, err := a.nodes.Delete("", gone); err != nil {
					t.Fatal(err)
				}
				for _, p := range a.pods.Items() {
					if p.Spec.NodeName == gone {
						if _, err := a.pods.Delete(p.Namespace, p.Name); err != nil {
							t.Fatal(err)
						}
					}
				}
			case 3: // a new template
				images++
				a.edit(t, image(fmt.Sprintf("agent:%d", images)))
			}
			a.settle(t)
			if strategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
				// OnDelete rolls nothing: the test deletes every old pod
				// as a user would.
				for _, p := range a.pods.Items() {
					if p.Spec.Containers[0].Image != fmt.Sprintf("agent:%d", images) {
						if err := a.DeletePod(t.Context(), p.Namespace, p.Name, metav1.DeleteOptions{}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			// A surge's old pod goes once the new one is available: the
			// next sync sees it.
			for range 3 {
				time.Sleep(time.Second)
				a.settle(t)
			}
			// Some changes call for no sync of their own, in kube's
			// controller as here: a node's deletion (the pending pod
			// meant for it goes at the next sync), a NoSchedule taint on
			// a node that keeps its pod (misscheduled from the next
			// sync). A write of the set's metadata makes that sync.
			a.touch(t)
			a.settle(t)
			checkPlacement(t, a, fmt.Sprintf("agent:%d", images), step)
		}
	})
}

// checkPlacement fails unless every node has the set's pod, of image,
// just when it should, and the status says so.
func checkPlacement(t *testing.T, a *api, image string, step int) {
	t.Helper()
	ds := a.set(t)
	byNode := map[string][]*corev1.Pod{}
	for _, p := range a.pods.Items() {
		node, err := util.GetTargetNodeName(p)
		if err != nil {
			t.Fatalf("step %d: pod %s: %v", step, p.Name, err)
		}
		byNode[node] = append(byNode[node], p)
	}
	var desired, misscheduled int32
	for _, n := range a.nodes.Items() {
		shouldRun, shouldContinue := nodeShouldRun(n, ds)
		pods := byNode[n.Name]
		delete(byNode, n.Name)
		switch {
		case shouldRun:
			desired++
			if len(pods) != 1 || pods[0].Spec.Containers[0].Image != image {
				t.Fatalf("step %d: node %s (labels %v, taints %v) should run one pod of %s, has %v", step, n.Name, n.Labels, n.Spec.Taints, image, describe(pods))
			}
		case shouldContinue:
			// A NoSchedule taint that came after the pod: it may stay.
			if len(pods) > 1 {
				t.Fatalf("step %d: node %s keeps %v", step, n.Name, describe(pods))
			}
			if len(pods) == 1 {
				misscheduled++
			}
		case len(pods) > 0:
			t.Fatalf("step %d: node %s (labels %v, taints %v) should run no pod, has %v", step, n.Name, n.Labels, n.Spec.Taints, describe(pods))
		}
	}
	if len(byNode) > 0 {
		t.Fatalf("step %d: pods of nodes gone: %v", step, byNode)
	}
	st := ds.Status
	if st.DesiredNumberScheduled != desired || st.NumberMisscheduled != misscheduled || st.UpdatedNumberScheduled != desired || st.NumberAvailable != desired || st.ObservedGeneration != ds.Generation {
		t.Fatalf("step %d: status %+v, want %d desired, updated and available, %d misscheduled", step, st, desired, misscheduled)
	}
}

func describe(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"@"+p.Spec.Containers[0].Image)
	}
	slices.Sort(out)
	return out
}

// touch writes the set's metadata, which queues it as any change does.
func (a *api) touch(t *testing.T) {
	t.Helper()
	s := a.set(t).DeepCopy()
	s.Annotations["touched"] = fmt.Sprint(a.next())
	if _, err := a.sets.Update(s); err != nil {
		t.Fatal(err)
	}
}
