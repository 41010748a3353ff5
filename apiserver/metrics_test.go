package apiserver

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCollector scrapes the watch caches' metrics after writes and a
// consistent list: kube-apiserver's names and labels, each resource once
// (the pedantic registry refuses a series twice), counts that follow the
// writes.
func TestCollector(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			srv, c := startServer(t, b.New(t), Config{})
			ctx := t.Context()
			var last string
			for i := range 2 {
				cm, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm", i)}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				last = cm.ResourceVersion
			}
			// A write elsewhere moves storage's revision past the
			// configmaps cache's: the consistent list that follows asks
			// storage's watch for progress.
			if _, err := c.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(srv.Collector())
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			value := func(name string, labels map[string]string) (float64, bool) {
				for _, f := range families {
					if f.GetName() != name {
						continue
					}
				metrics:
					for _, m := range f.GetMetric() {
						for _, l := range m.GetLabel() {
							if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
								continue metrics
							}
						}
						return sampleValue(m), true
					}
				}
				return 0, false
			}
			configmaps := map[string]string{"group": "", "resource": "configmaps"}
			tests := []struct {
				name   string
				labels map[string]string
				check  func(v float64) bool
				want   string
			}{
				{"apiserver_resource_objects", configmaps, func(v float64) bool { return v == 2 }, "2"},
				{"apiserver_storage_objects", map[string]string{"resource": "configmaps"}, func(v float64) bool { return v == 2 }, "2"},
				{"apiserver_storage_objects", map[string]string{"resource": "deployments.apps"}, func(v float64) bool { return v == 0 }, "0"},
				{"apiserver_watch_cache_events_received_total", configmaps, func(v float64) bool { return v >= 2 }, ">= 2"},
				{"apiserver_watch_cache_resource_version", configmaps, func(v float64) bool { return v >= mustFloat(t, last) }, ">= " + last},
				{"apiserver_watch_cache_initializations_total", configmaps, func(v float64) bool { return v == 1 }, "1"},
				{"apiserver_terminated_watchers_total", configmaps, func(v float64) bool { return v == 0 }, "0"},
			}
			for _, tt := range tests {
				v, ok := value(tt.name, tt.labels)
				if !ok || !tt.check(v) {
					t.Errorf("%s%v = %v (found %v), want %s", tt.name, tt.labels, v, ok, tt.want)
				}
			}
			fresh, _ := value("apiserver_watch_cache_consistent_read_total", map[string]string{"group": "", "resource": "configmaps", "fallback": "false"})
			fallback, _ := value("apiserver_watch_cache_consistent_read_total", map[string]string{"group": "", "resource": "configmaps", "fallback": "true"})
			t.Logf("consistent reads of configmaps: %v from cache, %v from storage", fresh, fallback)
			if fresh+fallback < 1 {
				t.Errorf("consistent reads of configmaps: %v from cache, %v from storage; want the list counted", fresh, fallback)
			}
		})
	}
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return 0
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		t.Fatal(err)
	}
	return f
}
