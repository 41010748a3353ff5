package controllermanager

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// clientMetrics counts and times the manager's API requests, by verb,
// resource and code, as kube-controller-manager's rest_client metrics do:
// the first thing to look at when a controller misbehaves is what it asks
// of the server.
type clientMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newClientMetrics(reg prometheus.Registerer) (*clientMetrics, error) {
	m := &clientMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total",
			Help: "API requests of the controller-manager, by verb, resource and HTTP code (\"<error>\" when none came back).",
		}, []string{"verb", "resource", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rest_client_request_duration_seconds",
			Help:    "Latency of the controller-manager's API requests until response headers, by verb and resource.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"verb", "resource"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// wrap returns rt with every request counted. Watches are counted when
// their response starts, and timed to that point.
func (m *clientMetrics) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		start := time.Now()
		verb := req.Method
		if req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true" {
			verb = "WATCH"
		}
		res := resourceOf(req.URL.Path)
		resp, err := rt.RoundTrip(req)
		code := "<error>"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		m.requests.WithLabelValues(verb, res, code).Inc()
		m.latency.WithLabelValues(verb, res).Observe(time.Since(start).Seconds())
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf names the resource of an API path, with its subresource:
// /api/v1/namespaces/ns/pods/p/binding is "pods/binding", /apis/g/v/foos
// is "foos"; discovery paths are "discovery". Only the kind of path, never
// a name, ends up in a label, so the series stay few.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) == 0 {
		return "discovery"
	}
	// namespaces/{ns}/{resource}... is a resource in a namespace; a bare
	// namespaces or namespaces/{name}[/{sub}] is the namespace itself.
	if parts[0] == "namespaces" && len(parts) >= 3 {
		parts = parts[2:]
	}
	if len(parts) >= 3 {
		return parts[0] + "/" + parts[2]
	}
	return parts[0]
}
