package workqueue

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// fakeMetric records what a queue reports.
type fakeMetric struct {
	mu           sync.Mutex
	value        float64
	observations []float64
}

func (m *fakeMetric) Inc()          { m.add(1) }
func (m *fakeMetric) Dec()          { m.add(-1) }
func (m *fakeMetric) Set(v float64) { m.mu.Lock(); m.value = v; m.mu.Unlock() }
func (m *fakeMetric) Observe(v float64) {
	m.mu.Lock()
	m.observations = append(m.observations, v)
	m.mu.Unlock()
}
func (m *fakeMetric) add(d float64) { m.mu.Lock(); m.value += d; m.mu.Unlock() }
func (m *fakeMetric) get() float64  { m.mu.Lock(); defer m.mu.Unlock(); return m.value }
func (m *fakeMetric) observed() []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]float64(nil), m.observations...)
}

type fakeProvider struct {
	depth, adds, latency, work, unfinished, longest, retries fakeMetric
}

func (p *fakeProvider) NewDepthMetric(string) GaugeMetric            { return &p.depth }
func (p *fakeProvider) NewAddsMetric(string) CounterMetric           { return &p.adds }
func (p *fakeProvider) NewLatencyMetric(string) HistogramMetric      { return &p.latency }
func (p *fakeProvider) NewWorkDurationMetric(string) HistogramMetric { return &p.work }
func (p *fakeProvider) NewUnfinishedWorkSecondsMetric(string) SettableGaugeMetric {
	return &p.unfinished
}
func (p *fakeProvider) NewLongestRunningProcessorSecondsMetric(string) SettableGaugeMetric {
	return &p.longest
}
func (p *fakeProvider) NewRetriesMetric(string) CounterMetric { return &p.retries }

func TestQueueMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakeProvider{}
		q := NewRateLimitingQueue[string](NewItemExponentialFailureRateLimiter[string](time.Second, time.Second),
			Config{Name: "test", MetricsProvider: p, UnfinishedWorkUpdatePeriod: time.Second})
		q.Add("a")
		q.Add("a")
		q.Add("b")
		if d, a := p.depth.get(), p.adds.get(); d != 2 || a != 2 {
			t.Fatalf("depth %v adds %v, want 2 and 2", d, a)
		}
		time.Sleep(3 * time.Second)
		x, _ := q.Get()
		if got := p.latency.observed(); len(got) != 1 || got[0] != 3 {
			t.Fatalf("latency %v, want [3]", got)
		}
		if d := p.depth.get(); d != 1 {
			t.Fatalf("depth %v, want 1", d)
		}
		time.Sleep(2*time.Second + time.Millisecond)
		synctest.Wait()
		if u, l := p.unfinished.get(), p.longest.get(); u != 2 || l != 2 {
			t.Fatalf("unfinished %v longest %v, want 2 and 2", u, l)
		}
		q.Done(x)
		if got := p.work.observed(); len(got) != 1 || got[0] < 2 || got[0] > 2.01 {
			t.Fatalf("work duration %v, want [2.001]", got)
		}
		q.AddRateLimited("c")
		if r := p.retries.get(); r != 1 {
			t.Fatalf("retries %v, want 1", r)
		}
		q.ShutDown()
		if d := p.depth.get(); d != 0 {
			t.Fatalf("depth after ShutDown %v, want 0", d)
		}
	})
}

func TestNoopMetricsProvider(t *testing.T) {
	q := NewQueue[int](Config{Name: "noop", MetricsProvider: NoopMetricsProvider{}})
	q.Add(1)
	x, _ := q.Get()
	q.Done(x)
	q.ShutDown()
}

func TestPrometheusProviderTwoRegistries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
		pa, err := NewPrometheusProvider(regA)
		if err != nil {
			t.Fatal(err)
		}
		pb, err := NewPrometheusProvider(regB)
		if err != nil {
			t.Fatal(err)
		}
		// A second provider on the same registry reuses its collectors.
		pa2, err := NewPrometheusProvider(regA)
		if err != nil {
			t.Fatalf("second provider on one registry: %v", err)
		}
		qa := NewQueue[string](Config{Name: "alpha", MetricsProvider: pa})
		qa2 := NewQueue[string](Config{Name: "alpha2", MetricsProvider: pa2})
		qb := NewQueue[string](Config{Name: "beta", MetricsProvider: pb})
		qa.Add("x")
		qa.Add("y")
		qa2.Add("x")
		qb.Add("x")
		if got := gauge(t, regA, "workqueue_depth", "alpha"); got != 2 {
			t.Fatalf("registry A depth{alpha} = %v, want 2", got)
		}
		if got := gauge(t, regA, "workqueue_depth", "alpha2"); got != 1 {
			t.Fatalf("registry A depth{alpha2} = %v, want 1", got)
		}
		if got := gauge(t, regB, "workqueue_depth", "beta"); got != 1 {
			t.Fatalf("registry B depth{beta} = %v, want 1", got)
		}
		if got := gauge(t, regB, "workqueue_depth", "alpha"); got != -1 {
			t.Fatalf("registry B has alpha's series")
		}
		if got := gauge(t, regA, "workqueue_adds_total", "alpha"); got != 2 {
			t.Fatalf("adds{alpha} = %v, want 2", got)
		}
		qa.ShutDown()
		qa2.ShutDown()
		qb.ShutDown()
	})
}

func TestPrometheusProviderConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	// A different collector already holds the depth name.
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "other"}))
	_, err := NewPrometheusProvider(reg)
	if err == nil || !strings.Contains(err.Error(), "workqueue") {
		t.Fatalf("NewPrometheusProvider = %v, want a registration error", err)
	}
}

// gauge returns the value of metric{name=queue} in reg, or -1 if absent.
func gauge(t *testing.T, reg *prometheus.Registry, metric, queue string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelValue(m, "name") != queue {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			}
		}
	}
	return -1
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
