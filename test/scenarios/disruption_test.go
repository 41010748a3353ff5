package scenarios

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/listwatch/listwatch/client"
)

// drainWithBudget is `kubectl drain` of a node under a
// PodDisruptionBudget: a ReplicaSet of 3 (one pod a node) and a budget of
// minAvailable 2; once the budget allows one disruption, the node of one
// of the pods is cordoned and its pod evicted as kubectl drain does
// (pods/eviction, retried while the budget answers 429). The ReplicaSet
// replaces the pod on another node, the budget allows one disruption
// again, and the node is uncordoned.
func drainWithBudget() scenario {
	const name = "web"
	drained := new(string)
	return scenario{
		name: "pdb-drain",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			if err := createReplicaSet(ctx, c, ns, name, 3); err != nil {
				return err
			}
			_, err := client.For[*policyv1.PodDisruptionBudget](c, ns).Create(ctx, budget(name, func(s *policyv1.PodDisruptionBudgetSpec) {
				s.MinAvailable = new(intstr.FromInt32(2))
			}), metav1.CreateOptions{})
			return err
		},
		done: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			return budgetSettled(ctx, c, ns, name, 3, 2, 3, 1)
		},
		then: []step{
			{do: drainNodeOfOnePod(name, drained), until: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
				pods, err := client.For[*corev1.Pod](c, ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				for _, p := range pods.Items {
					if p.Spec.NodeName == *drained {
						return false, nil
					}
				}
				node, err := client.For[*corev1.Node](c, "").Get(ctx, *drained, metav1.GetOptions{})
				if err != nil || !node.Spec.Unschedulable {
					return false, err
				}
				return budgetSettled(ctx, c, ns, name, 3, 2, 3, 1)
			}},
			{do: func(ctx context.Context, c *client.Client, _ string, _ *replay) error {
				return cordon(ctx, c, *drained, false)
			}, until: func(ctx context.Context, c *client.Client, _ string) (bool, error) {
				node, err := client.For[*corev1.Node](c, "").Get(ctx, *drained, metav1.GetOptions{})
				return err == nil && !node.Spec.Unschedulable, err
			}},
		},
	}
}

// budgetStatus is the status the disruption controller keeps: a budget of
// maxUnavailable 50% over a ReplicaSet of 2 (its expected pods the
// ReplicaSet's scale), and one selecting no pod (NoPods).
func budgetStatus() scenario {
	return scenario{
		name: "pdb-status",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			if err := createReplicaSet(ctx, c, ns, "api", 2); err != nil {
				return err
			}
			pdbs := client.For[*policyv1.PodDisruptionBudget](c, ns)
			if _, err := pdbs.Create(ctx, budget("api", func(s *policyv1.PodDisruptionBudgetSpec) {
				s.MaxUnavailable = new(intstr.FromString("50%"))
			}), metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := pdbs.Create(ctx, budget("none", func(s *policyv1.PodDisruptionBudgetSpec) {
				s.MinAvailable = new(intstr.FromInt32(1))
			}), metav1.CreateOptions{})
			return err
		},
		done: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			ok, err := budgetSettled(ctx, c, ns, "api", 2, 1, 2, 1)
			if !ok || err != nil {
				return false, err
			}
			return budgetSettled(ctx, c, ns, "none", 0, 1, 0, 0)
		},
	}
}

// createReplicaSet creates replicaSet(name, replicas) and waits for its
// pods to be there, so that a budget made next finds them at its first
// sync (else whether it records NoPods is a race).
func createReplicaSet(ctx context.Context, c *client.Client, ns, name string, replicas int32) error {
	if _, err := client.For[*appsv1.ReplicaSet](c, ns).Create(ctx, replicaSet(name, replicas), metav1.CreateOptions{}); err != nil {
		return err
	}
	for deadline := time.Now().Add(doneTimeout); ; time.Sleep(poll) {
		pods, err := client.For[*corev1.Pod](c, ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return err
		}
		if len(pods.Items) == int(replicas) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ReplicaSet %s has %d pods after %v", name, len(pods.Items), doneTimeout)
		}
	}
}

// replicaSet is a ReplicaSet of the given replicas, whose pods (label
// app=<name>) run until deleted.
func replicaSet(name string, replicas int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: new(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx:1.26"}}},
			},
		},
	}
}

// budget is a PodDisruptionBudget selecting app=<name>; edit sets its
// minAvailable or maxUnavailable.
func budget(name string, edit func(*policyv1.PodDisruptionBudgetSpec)) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
	}
	edit(&pdb.Spec)
	return pdb
}

// budgetSettled reports whether the budget's status is of its generation
// and counts what is given, with no eviction pending.
func budgetSettled(ctx context.Context, c *client.Client, ns, name string, healthy, desired, expected, allowed int32) (bool, error) {
	pdb, err := client.For[*policyv1.PodDisruptionBudget](c, ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	st := pdb.Status
	return st.ObservedGeneration == pdb.Generation && st.CurrentHealthy == healthy && st.DesiredHealthy == desired &&
		st.ExpectedPods == expected && st.DisruptionsAllowed == allowed && len(st.DisruptedPods) == 0, nil
}

// drainNodeOfOnePod drains the node of the first pod (by name) of the
// ReplicaSet that is alone there, as kubectl drain does: the node
// cordoned, then each of the namespace's pods on it evicted, an eviction
// the budget refuses (429) tried again a second later, and the pods
// waited for until they are gone. The node's name goes to *drained.
func drainNodeOfOnePod(name string, drained *string) func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
	return func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
		pods := client.For[*corev1.Pod](c, ns)
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		perNode := map[string]int{}
		for _, p := range list.Items {
			perNode[p.Spec.NodeName]++
		}
		*drained = ""
		for _, p := range list.Items {
			if p.Labels["app"] == name && p.Spec.NodeName != "" && perNode[p.Spec.NodeName] == 1 && (*drained == "" || p.Spec.NodeName < *drained) {
				*drained = p.Spec.NodeName
			}
		}
		if *drained == "" {
			return fmt.Errorf("no node holds one pod of %s alone", name)
		}
		if err := cordon(ctx, c, *drained, true); err != nil {
			return err
		}
		for _, p := range list.Items {
			if p.Spec.NodeName != *drained {
				continue
			}
			for {
				err := pods.CreateSubresource(ctx, p.Name, "eviction", &policyv1.Eviction{
					TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
					ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns},
				}, metav1.CreateOptions{})
				if apierrors.IsTooManyRequests(err) {
					time.Sleep(time.Second)
					continue
				}
				if err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("evicting %s: %w", p.Name, err)
				}
				break
			}
		}
		return nil
	}
}

// cordon marks the node unschedulable, or schedulable again.
func cordon(ctx context.Context, c *client.Client, node string, unschedulable bool) error {
	_, err := client.For[*corev1.Node](c, "").Patch(ctx, node, types.StrategicMergePatchType,
		fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable), metav1.PatchOptions{})
	return err
}
