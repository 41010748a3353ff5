package scenarios

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/listwatch/listwatch/client"
)

// statefulSetScaleRoll is a StatefulSet of 3 (OrderedReady, RollingUpdate)
// that comes up one pod at a time, is scaled to 5, rolled to a new image
// (from the highest ordinal down, one pod at a time, a second
// ControllerRevision), and scaled down to 2 (the highest ordinals
// deleted first).
func statefulSetScaleRoll() scenario {
	const name = "web"
	return scenario{
		name: "statefulset-scale-roll",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			_, err := client.For[*appsv1.StatefulSet](c, ns).Create(ctx, statefulSet(name, 3, nil), metav1.CreateOptions{})
			return err
		},
		done: statefulSetSettled(name, 3),
		then: []step{
			{do: patchStatefulSet(name, `{"spec":{"replicas":5}}`), until: statefulSetSettled(name, 5)},
			{do: patchStatefulSet(name, `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"nginx:1.27"}]}}}}`), until: statefulSetSettled(name, 5)},
			{do: patchStatefulSet(name, `{"spec":{"replicas":2}}`), until: statefulSetSettled(name, 2)},
		},
	}
}

// statefulSetParallelPartition is a StatefulSet of 4 with Parallel pod
// management, rolled to a new image with a partition of 2 and
// maxUnavailable 2: its ordinals 3 and 2 are replaced at once, 0 and 1
// keep the current revision.
func statefulSetParallelPartition() scenario {
	const name = "db"
	return scenario{
		name: "statefulset-parallel-partition",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			set := statefulSet(name, 4, func(s *appsv1.StatefulSetSpec) {
				s.PodManagementPolicy = appsv1.ParallelPodManagement
				s.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{
					Type: appsv1.RollingUpdateStatefulSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{
						Partition:      new(int32(2)),
						MaxUnavailable: new(intstr.FromInt32(2)),
					},
				}
			})
			_, err := client.For[*appsv1.StatefulSet](c, ns).Create(ctx, set, metav1.CreateOptions{})
			return err
		},
		done: statefulSetSettled(name, 4),
		then: []step{{
			do: patchStatefulSet(name, `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"nginx:1.27"}]}}}}`),
			until: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
				set, err := client.For[*appsv1.StatefulSet](c, ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				st := set.Status
				return st.ObservedGeneration == set.Generation && st.UpdatedReplicas == 2 && st.ReadyReplicas == 4 && st.AvailableReplicas == 4 && st.CurrentReplicas == 2, nil
			},
		}},
	}
}

// statefulSetClaims is a StatefulSet of 3 with a volumeClaimTemplate
// whose claims are deleted with the set but kept on scale-down
// (persistentVolumeClaimRetentionPolicy whenDeleted Delete, whenScaled
// Retain), scaled down to 2: every pod gets its claim
// "data-<set>-<ordinal>", owned by the set, and the claim of the pod
// scaled away stays.
func statefulSetClaims() scenario {
	const name = "store"
	return scenario{
		name: "statefulset-claims",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			set := statefulSet(name, 3, func(s *appsv1.StatefulSetSpec) {
				s.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
					ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
					},
				}}
				s.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
					WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
					WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				}
				s.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			})
			_, err := client.For[*appsv1.StatefulSet](c, ns).Create(ctx, set, metav1.CreateOptions{})
			return err
		},
		done: statefulSetSettled(name, 3),
		then: []step{{do: patchStatefulSet(name, `{"spec":{"replicas":2}}`), until: statefulSetSettled(name, 2)}},
	}
}

// statefulSet is a StatefulSet of the given replicas, whose pods (label
// app=<name>) run until deleted; edit changes its spec.
func statefulSet(name string, replicas int32, edit func(*appsv1.StatefulSetSpec)) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    new(replicas),
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			ServiceName: name,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "main", Image: "nginx:1.26"}},
				},
			},
		},
	}
	if edit != nil {
		edit(&set.Spec)
	}
	return set
}

// patchStatefulSet merge-patches the StatefulSet.
func patchStatefulSet(name, patch string) func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
	return func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
		_, err := client.For[*appsv1.StatefulSet](c, ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
}

// statefulSetSettled reports whether the StatefulSet's status is of its
// latest generation and shows replicas pods, all ready, available and of
// one revision, and whether its namespace holds that many pods.
func statefulSetSettled(name string, replicas int32) func(ctx context.Context, c *client.Client, ns string) (bool, error) {
	return func(ctx context.Context, c *client.Client, ns string) (bool, error) {
		set, err := client.For[*appsv1.StatefulSet](c, ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := set.Status
		if st.ObservedGeneration != set.Generation || st.Replicas != replicas || st.ReadyReplicas != replicas ||
			st.AvailableReplicas != replicas || st.UpdatedReplicas != replicas || st.CurrentReplicas != replicas ||
			st.CurrentRevision != st.UpdateRevision {
			return false, nil
		}
		pods, err := client.For[*corev1.Pod](c, ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(pods.Items) != int(replicas) {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return false, nil
			}
		}
		return true, nil
	}
}
