package workqueue

import "time"

// GaugeMetric is a value that goes up and down.
type GaugeMetric interface {
	Inc()
	Dec()
}

// SettableGaugeMetric is a gauge that is set to an absolute value.
type SettableGaugeMetric interface {
	Set(float64)
}

// CounterMetric is a value that only goes up.
type CounterMetric interface {
	Inc()
}

// HistogramMetric records observations, in seconds for every queue metric.
type HistogramMetric interface {
	Observe(float64)
}

// MetricsProvider makes the metrics of one named queue. A provider is called
// once per metric when a queue is created; it may be shared by any number of
// queues, and several providers (one per registry, say) may coexist.
type MetricsProvider interface {
	// NewDepthMetric counts the items waiting to be processed.
	NewDepthMetric(name string) GaugeMetric
	// NewAddsMetric counts the items accepted by Add.
	NewAddsMetric(name string) CounterMetric
	// NewLatencyMetric observes how long an item waited before Get.
	NewLatencyMetric(name string) HistogramMetric
	// NewWorkDurationMetric observes how long an item was processed.
	NewWorkDurationMetric(name string) HistogramMetric
	// NewUnfinishedWorkSecondsMetric is the total time spent so far on the
	// items being processed; it grows when a worker is stuck.
	NewUnfinishedWorkSecondsMetric(name string) SettableGaugeMetric
	// NewLongestRunningProcessorSecondsMetric is the age of the oldest
	// item being processed.
	NewLongestRunningProcessorSecondsMetric(name string) SettableGaugeMetric
	// NewRetriesMetric counts AddRateLimited calls.
	NewRetriesMetric(name string) CounterMetric
}

// NoopMetricsProvider makes metrics that record nothing.
type NoopMetricsProvider struct{}

type noopMetric struct{}

func (noopMetric) Inc()            {}
func (noopMetric) Dec()            {}
func (noopMetric) Set(float64)     {}
func (noopMetric) Observe(float64) {}

// NewDepthMetric returns a metric that records nothing.
func (NoopMetricsProvider) NewDepthMetric(string) GaugeMetric { return noopMetric{} }

// NewAddsMetric returns a metric that records nothing.
func (NoopMetricsProvider) NewAddsMetric(string) CounterMetric { return noopMetric{} }

// NewLatencyMetric returns a metric that records nothing.
func (NoopMetricsProvider) NewLatencyMetric(string) HistogramMetric { return noopMetric{} }

// NewWorkDurationMetric returns a metric that records nothing.
func (NoopMetricsProvider) NewWorkDurationMetric(string) HistogramMetric { return noopMetric{} }

// NewUnfinishedWorkSecondsMetric returns a metric that records nothing.
func (NoopMetricsProvider) NewUnfinishedWorkSecondsMetric(string) SettableGaugeMetric {
	return noopMetric{}
}

// NewLongestRunningProcessorSecondsMetric returns a metric that records nothing.
func (NoopMetricsProvider) NewLongestRunningProcessorSecondsMetric(string) SettableGaugeMetric {
	return noopMetric{}
}

// NewRetriesMetric returns a metric that records nothing.
func (NoopMetricsProvider) NewRetriesMetric(string) CounterMetric { return noopMetric{} }

// queueMetrics is the per-queue bookkeeping behind the metrics. Its methods
// run under the queue's lock; a queue without metrics has a nil
// *queueMetrics and never reads the clock for them.
type queueMetrics[T comparable] struct {
	depth        GaugeMetric
	adds         CounterMetric
	latency      HistogramMetric
	workDuration HistogramMetric
	unfinished   SettableGaugeMetric
	longest      SettableGaugeMetric
	retries      CounterMetric

	addTimes   map[T]time.Time
	startTimes map[T]time.Time
}

func newQueueMetrics[T comparable](name string, p MetricsProvider) *queueMetrics[T] {
	if p == nil || name == "" {
		return nil
	}
	return &queueMetrics[T]{
		depth:        p.NewDepthMetric(name),
		adds:         p.NewAddsMetric(name),
		latency:      p.NewLatencyMetric(name),
		workDuration: p.NewWorkDurationMetric(name),
		unfinished:   p.NewUnfinishedWorkSecondsMetric(name),
		longest:      p.NewLongestRunningProcessorSecondsMetric(name),
		retries:      p.NewRetriesMetric(name),
		addTimes:     make(map[T]time.Time),
		startTimes:   make(map[T]time.Time),
	}
}

func (m *queueMetrics[T]) add(item T) {
	m.adds.Inc()
	m.depth.Inc()
	if _, ok := m.addTimes[item]; !ok {
		m.addTimes[item] = time.Now()
	}
}

func (m *queueMetrics[T]) get(item T) {
	now := time.Now()
	m.depth.Dec()
	if t, ok := m.addTimes[item]; ok {
		m.latency.Observe(now.Sub(t).Seconds())
		delete(m.addTimes, item)
	}
	m.startTimes[item] = now
}

func (m *queueMetrics[T]) done(item T) {
	if t, ok := m.startTimes[item]; ok {
		m.workDuration.Observe(time.Since(t).Seconds())
		delete(m.startTimes, item)
	}
}

// dropQueued forgets the items that a shutdown discards, so that depth and
// the add times do not keep them.
func (m *queueMetrics[T]) dropQueued(item T) {
	if _, ok := m.addTimes[item]; ok {
		m.depth.Dec()
		delete(m.addTimes, item)
	}
}

func (m *queueMetrics[T]) updateUnfinished() {
	now := time.Now()
	var total, longest float64
	for _, t := range m.startTimes {
		age := now.Sub(t).Seconds()
		total += age
		longest = max(longest, age)
	}
	m.unfinished.Set(total)
	m.longest.Set(longest)
}
