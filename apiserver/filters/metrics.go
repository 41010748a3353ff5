package filters

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the request metrics of the server, named as kube-apiserver
// names them so that existing dashboards work.
type Metrics struct {
	// requests counts finished requests by verb, group, version, resource,
	// subresource and code.
	requests *prometheus.CounterVec
	// duration observes the latency of requests that are not long-running
	// (a watch's duration is its lifetime, not a latency).
	duration *prometheus.HistogramVec
	// inflight is the number of requests being served by request_kind
	// (readOnly, mutating), watches excluded.
	inflight *prometheus.GaugeVec
	// longRunning is the number of open watches.
	longRunning *prometheus.GaugeVec
}

var requestLabels = []string{"verb", "group", "version", "resource", "subresource"}

// NewMetrics creates the request metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out by verb, group, version, resource, subresource and HTTP response code.",
		}, append(requestLabels, "code")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, group, version, resource and subresource; watches excluded.",
			Buckets: []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60},
		}, requestLabels),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_current_inflight_requests",
			Help: "Number of requests currently being served, by request kind (readOnly, mutating); watches excluded.",
		}, []string{"request_kind"}),
		longRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_longrunning_requests",
			Help: "Number of open long-running requests (watches) by verb, group, version, resource and subresource.",
		}, requestLabels),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.inflight, m.longRunning} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("filters: register metrics: %w", err)
		}
	}
	// Both kinds exist from the start, so that a scrape shows 0 rather than
	// nothing.
	m.inflight.WithLabelValues(kindReadOnly)
	m.inflight.WithLabelValues(kindMutating)
	return m, nil
}

// metricVerb is the verb label kube-apiserver uses: LIST and WATCH for
// those, the HTTP method for everything else.
func metricVerb(ri RequestInfo, method string) string {
	switch ri.Verb {
	case "list":
		return "LIST"
	case "watch":
		return "WATCH"
	}
	return strings.ToUpper(method)
}

// WithInstrumentation records each request in m (when not nil) and logs it
// to log at debug level (when not nil) once it is done.
//
// A 401 is recorded without its group, version and resource: those come
// from a path anyone can choose, and unauthenticated clients must not be
// able to grow the metrics without bound.
func WithInstrumentation(h http.Handler, m *Metrics, log *slog.Logger) http.Handler {
	if m == nil && log == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := requestInfoOf(r)
		verb := metricVerb(ri, r.Method)
		labels := []string{verb, ri.APIGroup, ri.APIVersion, ri.Resource, ri.Subresource}
		rec := recorderOf(w)
		if m != nil && ri.IsLongRunning() {
			g := m.longRunning.WithLabelValues(labels...)
			g.Inc()
			defer g.Dec()
		}
		defer func() {
			// Runs during a panic that recovery re-raised as well, so that an
			// aborted response is still counted.
			elapsed := time.Since(start)
			code := rec.code()
			if m != nil {
				if code == http.StatusUnauthorized {
					labels = []string{verb, "", "", "", ""}
				}
				m.requests.WithLabelValues(append(labels, strconv.Itoa(code))...).Inc()
				if !ri.IsLongRunning() {
					m.duration.WithLabelValues(labels...).Observe(elapsed.Seconds())
				}
			}
			if log != nil && log.Enabled(r.Context(), slog.LevelDebug) {
				attrs := []any{"method", r.Method, "uri", r.URL.RequestURI(), "verb", ri.Verb,
					"code", code, "bytes", rec.bytes, "duration", elapsed, "remote", r.RemoteAddr}
				if ri.Resource != "" {
					attrs = append(attrs, "resource", ri.Resource)
				}
				if rec.user != "" {
					attrs = append(attrs, "user", rec.user)
				}
				log.Debug("request", attrs...)
			}
		}()
		h.ServeHTTP(rec, r)
	})
}
