package controllermanager_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/envtest"
)

// TestStaleSyncMetrics: stale-read protection's counters are on the
// manager's metrics for its controllers, and a ReplicaSet scaled up still
// gets exactly its replicas with the protection on.
func TestStaleSyncMetrics(t *testing.T) {
	env := envtest.Start(t, envtest.Options{})
	cc := &client.Config{REST: env.Config, QPS: -1}
	m := runManager(t, controllermanager.Config{Client: cc, Controllers: []string{controllermanager.ReplicaSet, controllermanager.PodLifecycle}})
	c, err := client.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	replicas := int32(50)
	labels := map[string]string{"app": "web"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
	if _, err := client.For[*appsv1.ReplicaSet](c, "default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := client.For[*appsv1.ReplicaSet](c, "default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Replicas == replicas && got.Status.ObservedGeneration == got.Generation {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the ReplicaSet never reached %d replicas: %+v", replicas, got.Status)
		case <-time.After(20 * time.Millisecond):
		}
	}
	pods, err := client.For[*corev1.Pod](c, "default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != int(replicas) {
		t.Errorf("%d pods, want %d", len(pods.Items), replicas)
	}

	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range families {
		switch f.GetName() {
		case "controller_stale_sync_skips_total", "controller_stale_sync_timeouts_total":
			for _, s := range f.GetMetric() {
				for _, l := range s.GetLabel() {
					if l.GetName() == "name" && l.GetValue() == "replicaset" {
						found[f.GetName()] = true
						t.Logf("%s{name=%q} %v", f.GetName(), l.GetValue(), s.GetCounter().GetValue())
						if f.GetName() == "controller_stale_sync_timeouts_total" && s.GetCounter().GetValue() != 0 {
							t.Errorf("a sync waited past the stale-read timeout")
						}
					}
				}
			}
		}
	}
	for _, name := range []string{"controller_stale_sync_skips_total", "controller_stale_sync_timeouts_total"} {
		if !found[name] {
			t.Errorf("%s{name=\"replicaset\"} is not on the manager's metrics", name)
		}
	}
}
