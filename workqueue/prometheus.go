package workqueue

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Names of the Prometheus metrics, all labelled by queue name. They match
// the names Kubernetes components export, so existing dashboards work.
const (
	metricsSubsystem         = "workqueue"
	metricsNameLabel         = "name"
	depthMetricName          = "depth"
	addsMetricName           = "adds_total"
	latencyMetricName        = "queue_duration_seconds"
	workDurationMetricName   = "work_duration_seconds"
	unfinishedWorkMetricName = "unfinished_work_seconds"
	longestRunningMetricName = "longest_running_processor_seconds"
	retriesMetricName        = "retries_total"

	// Stale-read protection's counters, kept by the controller package
	// (controller.StaleSyncMetricsProvider) under the controller's name.
	controllerSubsystem         = "controller"
	staleSyncSkipsMetricName    = "stale_sync_skips_total"
	staleSyncTimeoutsMetricName = "stale_sync_timeouts_total"
)

// PrometheusProvider is a MetricsProvider that records into Prometheus
// collectors registered with one Registerer. Make one provider per
// registry; queues with the same name share their series.
type PrometheusProvider struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinishedWork *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
	staleSkips     *prometheus.CounterVec
	staleTimeouts  *prometheus.CounterVec
}

// NewPrometheusProvider creates the workqueue collectors and registers them
// with reg (prometheus.DefaultRegisterer when nil). Collectors that reg
// already holds under the same names, from an earlier provider, are reused.
func NewPrometheusProvider(reg prometheus.Registerer) (*PrometheusProvider, error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	labels := []string{metricsNameLabel}
	// From 10ns to 10s: queue waits and syncs span that range.
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 10)
	p := &PrometheusProvider{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: metricsSubsystem, Name: depthMetricName,
			Help: "Current depth of the workqueue.",
		}, labels),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: metricsSubsystem, Name: addsMetricName,
			Help: "Total number of adds handled by the workqueue.",
		}, labels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: metricsSubsystem, Name: latencyMetricName,
			Help:    "How long in seconds an item stays in the workqueue before being requested.",
			Buckets: buckets,
		}, labels),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: metricsSubsystem, Name: workDurationMetricName,
			Help:    "How long in seconds processing an item from the workqueue takes.",
			Buckets: buckets,
		}, labels),
		unfinishedWork: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: metricsSubsystem, Name: unfinishedWorkMetricName,
			Help: "Seconds of work in progress not yet observed by work_duration; large values mean stuck workers.",
		}, labels),
		longestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: metricsSubsystem, Name: longestRunningMetricName,
			Help: "How many seconds the longest running processor of the workqueue has been running.",
		}, labels),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: metricsSubsystem, Name: retriesMetricName,
			Help: "Total number of retries handled by the workqueue.",
		}, labels),
		staleSkips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: controllerSubsystem, Name: staleSyncSkipsMetricName,
			Help: "Syncs put back because an informer had not yet shown the controller's own last write of the key.",
		}, labels),
		staleTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: controllerSubsystem, Name: staleSyncTimeoutsMetricName,
			Help: "Keys synced after waiting the stale-read timeout for an informer to show the controller's own last write.",
		}, labels),
	}
	var err error
	if p.depth, err = register(reg, p.depth); err != nil {
		return nil, err
	}
	if p.adds, err = register(reg, p.adds); err != nil {
		return nil, err
	}
	if p.latency, err = register(reg, p.latency); err != nil {
		return nil, err
	}
	if p.workDuration, err = register(reg, p.workDuration); err != nil {
		return nil, err
	}
	if p.unfinishedWork, err = register(reg, p.unfinishedWork); err != nil {
		return nil, err
	}
	if p.longestRunning, err = register(reg, p.longestRunning); err != nil {
		return nil, err
	}
	if p.retries, err = register(reg, p.retries); err != nil {
		return nil, err
	}
	if p.staleSkips, err = register(reg, p.staleSkips); err != nil {
		return nil, err
	}
	if p.staleTimeouts, err = register(reg, p.staleTimeouts); err != nil {
		return nil, err
	}
	return p, nil
}

// register registers c, or returns the collector of the same kind that reg
// already holds under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, fmt.Errorf("workqueue: registering metrics: %w", err)
}

// NewDepthMetric returns the depth gauge of queue name.
func (p *PrometheusProvider) NewDepthMetric(name string) GaugeMetric {
	return p.depth.WithLabelValues(name)
}

// NewAddsMetric returns the adds counter of queue name.
func (p *PrometheusProvider) NewAddsMetric(name string) CounterMetric {
	return p.adds.WithLabelValues(name)
}

// NewLatencyMetric returns the queue-duration histogram of queue name.
func (p *PrometheusProvider) NewLatencyMetric(name string) HistogramMetric {
	return p.latency.WithLabelValues(name)
}

// NewWorkDurationMetric returns the work-duration histogram of queue name.
func (p *PrometheusProvider) NewWorkDurationMetric(name string) HistogramMetric {
	return p.workDuration.WithLabelValues(name)
}

// NewUnfinishedWorkSecondsMetric returns the unfinished-work gauge of queue
// name.
func (p *PrometheusProvider) NewUnfinishedWorkSecondsMetric(name string) SettableGaugeMetric {
	return p.unfinishedWork.WithLabelValues(name)
}

// NewLongestRunningProcessorSecondsMetric returns the longest-running gauge
// of queue name.
func (p *PrometheusProvider) NewLongestRunningProcessorSecondsMetric(name string) SettableGaugeMetric {
	return p.longestRunning.WithLabelValues(name)
}

// NewRetriesMetric returns the retries counter of queue name.
func (p *PrometheusProvider) NewRetriesMetric(name string) CounterMetric {
	return p.retries.WithLabelValues(name)
}

// NewStaleSyncSkipsMetric returns the stale-sync skips counter of
// controller name.
func (p *PrometheusProvider) NewStaleSyncSkipsMetric(name string) CounterMetric {
	return p.staleSkips.WithLabelValues(name)
}

// NewStaleSyncTimeoutsMetric returns the stale-sync timeouts counter of
// controller name.
func (p *PrometheusProvider) NewStaleSyncTimeoutsMetric(name string) CounterMetric {
	return p.staleTimeouts.WithLabelValues(name)
}
