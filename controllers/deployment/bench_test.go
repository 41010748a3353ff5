package deployment_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
)

// requestCounter counts the controller manager's requests that write
// ReplicaSets or Deployments (the Deployment controller's, and the
// ReplicaSet controller's status writes).
type requestCounter struct {
	writes atomic.Int64
	rt     http.RoundTripper
}

func (c *requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && (strings.Contains(req.URL.Path, "/replicasets") || strings.Contains(req.URL.Path, "/deployments")) {
		c.writes.Add(1)
	}
	return c.rt.RoundTrip(req)
}

// BenchmarkE2EDeployment measures, against a real API server with pods
// that start at once, a Deployment of 1,000 made available from nothing,
// then rolled to a new image (10% surge, 10% unavailable) to completion.
func BenchmarkE2EDeployment(b *testing.B) {
	const replicas = 1000
	for b.Loop() {
		b.StopTimer()
		counter := &requestCounter{}
		c := startCluster(b, podlifecycle.Options{StartDelay: time.Nanosecond, TerminationDelay: time.Millisecond}, func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter })
		deployments := client.For[*appsv1.Deployment](c, "e2e")
		n := int32(replicas)
		ten := intstr.FromString("10%")
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "big"},
			Spec: appsv1.DeploymentSpec{
				Replicas: &n,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: podTemplate("web:1"),
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &ten, MaxUnavailable: &ten}},
			},
		}
		rolledOut := func() bool {
			d, err := deployments.Get(context.Background(), "big", metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			s := d.Status
			return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == n && s.Replicas == n && s.AvailableReplicas == n
		}
		wait := func() time.Duration {
			start := time.Now()
			for deadline := start.Add(2 * time.Minute); !rolledOut(); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatal("not rolled out within two minutes")
				}
			}
			return time.Since(start)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := deployments.Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		wait()
		available := time.Since(start)
		writesAvailable := counter.writes.Load()
		cur, err := deployments.Get(context.Background(), "big", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		cur.Spec.Template = podTemplate("web:2")
		start = time.Now()
		if _, err := deployments.Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		wait()
		rollout := time.Since(start)
		b.StopTimer()
		b.ReportMetric(available.Seconds(), "s-available")
		b.ReportMetric(rollout.Seconds(), "s-rollout")
		b.ReportMetric(float64(writesAvailable), "rs+deploy-writes-available")
		b.ReportMetric(float64(counter.writes.Load()-writesAvailable), "rs+deploy-writes-rollout")
		b.StartTimer()
	}
}
