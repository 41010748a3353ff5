package scenarios

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	quota "k8s.io/apiserver/pkg/quota/v1"

	"github.com/listwatch/listwatch/client"
)

// resourceQuotaStatus is a ResourceQuota over pods' requests and limits,
// object counts (legacy and count/…) and services: its first status
// counts what was there before it (the namespace's kube-root-ca.crt, a
// Secret), creations are charged, a pod that finished and a deleted
// Service are given back, and a raised limit is copied to the status.
func resourceQuotaStatus() scenario {
	const name = "compute"
	quotas := func(c *client.Client, ns string) *client.Resource[*corev1.ResourceQuota] {
		return client.For[*corev1.ResourceQuota](c, ns)
	}
	used := func(want map[corev1.ResourceName]string) func(ctx context.Context, c *client.Client, ns string) (bool, error) {
		return func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			q, err := quotas(c, ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if !quota.Equals(q.Spec.Hard, q.Status.Hard) {
				return false, nil
			}
			for r, v := range want {
				got, ok := q.Status.Used[r]
				if !ok || got.Cmp(resource.MustParse(v)) != 0 {
					return false, nil
				}
			}
			return true, nil
		}
	}
	pod := func(name, cpu string, policy corev1.RestartPolicy, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec: corev1.PodSpec{RestartPolicy: policy, Containers: []corev1.Container{{
				Name: "main", Image: "busybox", Command: []string{"true"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
			}}},
		}
	}
	return scenario{
		name: "resourcequota-status",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			if _, err := client.For[*corev1.Secret](c, ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := quotas(c, ns).Create(ctx, &corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
					corev1.ResourcePods:              resource.MustParse("3"),
					corev1.ResourceRequestsCPU:       resource.MustParse("2"),
					corev1.ResourceLimitsMemory:      resource.MustParse("1Gi"),
					corev1.ResourceConfigMaps:        resource.MustParse("4"),
					corev1.ResourceSecrets:           resource.MustParse("4"),
					corev1.ResourceServices:          resource.MustParse("2"),
					"count/jobs.batch":               resource.MustParse("2"),
					corev1.ResourceServicesNodePorts: resource.MustParse("1"),
				}},
			}, metav1.CreateOptions{})
			return err
		},
		done: used(map[corev1.ResourceName]string{corev1.ResourceConfigMaps: "1", corev1.ResourceSecrets: "1", corev1.ResourcePods: "0"}),
		then: []step{
			{
				do: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
					pods := client.For[*corev1.Pod](c, ns)
					if _, err := pods.Create(ctx, pod("server", "500m", corev1.RestartPolicyAlways, nil), metav1.CreateOptions{}); err != nil {
						return err
					}
					if _, err := pods.Create(ctx, pod("task", "250m", corev1.RestartPolicyNever, nil), metav1.CreateOptions{}); err != nil {
						return err
					}
					_, err := client.For[*corev1.Service](c, ns).Create(ctx, &corev1.Service{
						ObjectMeta: metav1.ObjectMeta{Name: "web"},
						Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}},
					}, metav1.CreateOptions{})
					return err
				},
				// The task finished and was given back; the server runs.
				until: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
					p, err := client.For[*corev1.Pod](c, ns).Get(ctx, "task", metav1.GetOptions{})
					if err != nil || p.Status.Phase != corev1.PodSucceeded {
						return false, err
					}
					return used(map[corev1.ResourceName]string{corev1.ResourcePods: "1", corev1.ResourceRequestsCPU: "500m", corev1.ResourceServicesNodePorts: "1"})(ctx, c, ns)
				},
			},
			{
				do: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
					if err := client.For[*corev1.Service](c, ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
						return err
					}
					_, err := quotas(c, ns).Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"hard":{"pods":"10"}}}`), metav1.PatchOptions{})
					return err
				},
				until: used(map[corev1.ResourceName]string{corev1.ResourceServices: "0", corev1.ResourceServicesNodePorts: "0"}),
			},
		},
	}
}
