package scenarios

//lint:file-ignore SA1019 core/v1 Endpoints are what these scenarios compare, beside their EndpointSlices.

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/listwatch/listwatch/client"
)

// serviceEndpoints is a Service selecting the 3 pods of a ReplicaSet
// through a named target port: the endpoints controller lists them in
// the Service's Endpoints and the endpointslice controller in an
// EndpointSlice of its own, both ready; the ReplicaSet scaled down to 1,
// both list the one pod left.
func serviceEndpoints() scenario {
	const name = "web"
	return scenario{
		name: "service-endpoints",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			labels := map[string]string{"app": name}
			if _, err := client.For[*corev1.Service](c, ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "front"}},
				Spec: corev1.ServiceSpec{
					Selector: labels,
					Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
				},
			}, metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := client.For[*appsv1.ReplicaSet](c, ns).Create(ctx, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: appsv1.ReplicaSetSpec{
					Replicas: new(int32(3)),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{
							Name: "main", Image: "nginx:1.26",
							Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						}}},
					},
				},
			}, metav1.CreateOptions{})
			return err
		},
		done: endpointsListed(name, 3),
		then: []step{{
			do: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
				_, err := client.For[*appsv1.ReplicaSet](c, ns).Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{})
				return err
			},
			until: endpointsListed(name, 1),
		}},
	}
}

// serviceEndpointsMirrored is a Service without a selector whose
// Endpoints are written by hand, an address ready and one not: the
// endpointslice-mirroring controller mirrors them into an EndpointSlice.
func serviceEndpointsMirrored() scenario {
	const name = "db"
	return scenario{
		name: "service-endpoints-mirrored",
		create: func(ctx context.Context, c *client.Client, ns string, _ *replay) error {
			if _, err := client.For[*corev1.Service](c, ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "pg", Port: 5432}}},
			}, metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := client.For[*corev1.Endpoints](c, ns).Create(ctx, &corev1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"source": "manual"}},
				Subsets: []corev1.EndpointSubset{{
					Addresses:         []corev1.EndpointAddress{{IP: "192.0.2.10", Hostname: "primary"}},
					NotReadyAddresses: []corev1.EndpointAddress{{IP: "192.0.2.11"}},
					Ports:             []corev1.EndpointPort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}},
				}},
			}, metav1.CreateOptions{})
			return err
		},
		done: func(ctx context.Context, c *client.Client, ns string) (bool, error) {
			slices, err := client.For[*discoveryv1.EndpointSlice](c, ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
			if err != nil {
				return false, err
			}
			return len(slices.Items) == 1 && len(slices.Items[0].Endpoints) == 2, nil
		},
	}
}

// endpointsListed reports whether the Service's Endpoints list n ready
// addresses and nothing else, its EndpointSlices n ready endpoints and
// nothing else, and its namespace holds n pods.
func endpointsListed(name string, n int) func(ctx context.Context, c *client.Client, ns string) (bool, error) {
	return func(ctx context.Context, c *client.Client, ns string) (bool, error) {
		pods, err := client.For[*corev1.Pod](c, ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != n {
			return false, err
		}
		ep, err := client.For[*corev1.Endpoints](c, ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		ready := 0
		for _, ss := range ep.Subsets {
			if len(ss.NotReadyAddresses) > 0 {
				return false, nil
			}
			ready += len(ss.Addresses)
		}
		if ready != n {
			return false, nil
		}
		slices, err := client.For[*discoveryv1.EndpointSlice](c, ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return false, err
		}
		ready = 0
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || !*e.Conditions.Ready {
					return false, nil
				}
				ready++
			}
		}
		return ready == n, nil
	}
}
