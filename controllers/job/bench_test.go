package job_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/job"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
	"github.com/listwatch/listwatch/envtest"
)

// requests counts the controllers' writes by method and resource.
type requests struct {
	mu sync.Mutex
	n  map[string]int
	rt http.RoundTripper
}

func (r *requests) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		parts := strings.Split(req.URL.Path, "/")
		what := parts[len(parts)-1]
		if len(parts) > 2 && (what == "status" || what == "binding") {
			what = parts[len(parts)-3] + "/" + what
		} else if len(parts) > 1 && req.Method != http.MethodPost {
			what = parts[len(parts)-2]
		}
		r.mu.Lock()
		r.n[req.Method+" "+what]++
		r.mu.Unlock()
	}
	return r.rt.RoundTrip(req)
}

// BenchmarkE2EJob measures, against a real API server whose simulated
// nodes run pods for no time, a Job of 1,000 completions, 100 at a time,
// from its creation to its Complete condition: the bench row.
// It reports the controllers' writes per Job.
func BenchmarkE2EJob(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		reqs := &requests{n: map[string]int{}}
		env := envtest.Start(b, envtest.Options{
			Controllers:              []string{controllermanager.Job, controllermanager.PodLifecycle},
			PodLifecycle:             podlifecycle.Options{StartDelay: time.Nanosecond, RunDuration: time.Nanosecond, TerminationDelay: time.Nanosecond},
			Job:                      job.Options{PodFailureBackoff: time.Millisecond},
			WrapControllersTransport: func(rt http.RoundTripper) http.RoundTripper { reqs.rt = rt; return reqs },
		})
		c := env.Client
		if _, err := client.For[*corev1.Namespace](c, "").Create(b.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := client.For[*batchv1.Job](c, ns).Create(b.Context(), newJob("big", 1000, 100), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		j := waitFinished(b, c, "big")
		b.StopTimer()
		if j.Status.Succeeded != 1000 {
			b.Fatalf("status %+v", j.Status)
		}
		reqs.mu.Lock()
		var keys []string
		for k := range reqs.n {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.ReportMetric(float64(reqs.n[k]), strings.ReplaceAll(k, " ", ":")+"/op")
		}
		b.Log(fmt.Sprint(reqs.n))
		reqs.mu.Unlock()
		b.StartTimer()
	}
}
