package resourcequota_test

// End to end: the resource quota controller with the API server's
// ResourceQuota admission and the simulated nodes, on listwatch's own API
// server.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	quota "k8s.io/apiserver/pkg/quota/v1"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/envtest"
)

// TestE2E walks a quota through what changes its usage: its first status,
// creations charged by admission (and one refused), a deletion and a pod
// that finished given back by the controller, a raised limit.
func TestE2E(t *testing.T) {
	env := envtest.Start(t, envtest.Options{Controllers: []string{
		controllermanager.ResourceQuota, controllermanager.PodLifecycle,
	}})
	ctx := t.Context()
	const ns = "quota"
	if _, err := client.For[*corev1.Namespace](env.Client, "").Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	quotas := client.For[*corev1.ResourceQuota](env.Client, ns)
	pods := client.For[*corev1.Pod](env.Client, ns)
	configMaps := client.For[*corev1.ConfigMap](env.Client, ns)

	if _, err := configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := quotas.Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourcePods:              resource.MustParse("2"),
			corev1.ResourceRequestsCPU:       resource.MustParse("1"),
			corev1.ResourceConfigMaps:        resource.MustParse("3"),
			"count/deployments.apps":         resource.MustParse("1"),
			corev1.ResourceServicesNodePorts: resource.MustParse("0"),
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, quotas, "the first status", "configmaps=1,count/deployments.apps=0,pods=0,requests.cpu=0,services.nodeports=0")

	pod := func(name string, cpu string, policy corev1.RestartPolicy) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{RestartPolicy: policy, Containers: []corev1.Container{{
				Name: "main", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}}},
		}
	}
	if _, err := pods.Create(ctx, pod("long", "500m", corev1.RestartPolicyAlways), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, quotas, "the pod charged", "configmaps=1,count/deployments.apps=0,pods=1,requests.cpu=500m,services.nodeports=0")

	// Over the limit: refused with kube's message.
	_, err := pods.Create(ctx, pod("big", "600m", corev1.RestartPolicyAlways), metav1.CreateOptions{})
	want := `pods "big" is forbidden: exceeded quota: q, requested: requests.cpu=600m, used: requests.cpu=500m, limited: requests.cpu=1`
	if status, ok := err.(apierrors.APIStatus); !ok || !apierrors.IsForbidden(err) || status.Status().Message != want {
		t.Fatalf("a pod over the quota: %v, want 403 %q", err, want)
	}

	// A pod that runs to completion stops counting once it has finished.
	if _, err := pods.Create(ctx, pod("short", "200m", corev1.RestartPolicyNever), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, quotas, "the finished pod given back", "configmaps=1,count/deployments.apps=0,pods=1,requests.cpu=500m,services.nodeports=0")

	// A deletion is given back.
	if err := pods.Delete(ctx, "long", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, quotas, "the deleted pod given back", "configmaps=1,count/deployments.apps=0,pods=0,requests.cpu=0,services.nodeports=0")

	// A new limit is copied to the status, and its usage counted.
	q, err := quotas.Get(ctx, "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard[corev1.ResourceSecrets] = resource.MustParse("5")
	if _, err := quotas.Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, quotas, "the new limit", "configmaps=1,count/deployments.apps=0,pods=0,requests.cpu=0,secrets=0,services.nodeports=0")
}

// waitUsed waits until the quota's status.hard equals its spec.hard and
// its status.used reads want (name=quantity, in name order).
func waitUsed(t *testing.T, quotas *client.Resource[*corev1.ResourceQuota], what, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		q, err := quotas.Get(context.Background(), "q", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got = format(q.Status.Used); got == want && quota.Equals(q.Spec.Hard, q.Status.Hard) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: status.used %s, want %s", what, got, want)
}

func format(l corev1.ResourceList) string {
	var parts []string
	for _, name := range quota.ResourceNames(l) {
		q := l[name]
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
