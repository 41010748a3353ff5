package apiserver

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
)

// The watch caches' metrics, under the names and labels kube-apiserver
// v1.37 exports them with (k8s.io/apiserver's cacher and etcd3 metrics), so
// that a dashboard of one reads the other. A resource stored once and
// served at several versions (events, a custom resource's versions) is
// counted once, under its group and plural.
var (
	descResourceObjects = prometheus.NewDesc("apiserver_resource_objects",
		"Number of stored objects at the time of last check split by kind.", []string{"group", "resource"}, nil)
	descStorageObjects = prometheus.NewDesc("apiserver_storage_objects",
		"[DEPRECATED, consider using apiserver_resource_objects instead] Number of stored objects at the time of last check split by kind.", []string{"resource"}, nil)
	descEventsReceived = prometheus.NewDesc("apiserver_watch_cache_events_received_total",
		"Counter of events received in watch cache broken by resource type.", []string{"group", "resource"}, nil)
	descResourceVersion = prometheus.NewDesc("apiserver_watch_cache_resource_version",
		"Current resource version of watch cache broken by resource type.", []string{"group", "resource"}, nil)
	descInitializations = prometheus.NewDesc("apiserver_watch_cache_initializations_total",
		"Counter of watch cache initializations broken by resource type.", []string{"group", "resource"}, nil)
	descTerminatedWatchers = prometheus.NewDesc("apiserver_terminated_watchers_total",
		"Counter of watchers closed due to unresponsiveness broken by resource type.", []string{"group", "resource"}, nil)
	descConsistentReads = prometheus.NewDesc("apiserver_watch_cache_consistent_read_total",
		"Counter for consistent reads from cache.", []string{"group", "resource", "success", "fallback"}, nil)
)

// Collector returns the metrics of the server's watch caches, built-in and
// custom resources alike, read from the caches when scraped.
func (s *Server) Collector() prometheus.Collector { return cacheCollector{s} }

type cacheCollector struct{ s *Server }

func (cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descResourceObjects, descStorageObjects, descEventsReceived, descResourceVersion,
		descInitializations, descTerminatedWatchers, descConsistentReads} {
		ch <- d
	}
}

func (c cacheCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[schema.GroupResource]bool{}
	emit := func(r *resource, cache *registry.Cache) {
		if r.StoredAs != nil || cache == nil || seen[r.GR()] {
			return
		}
		seen[r.GR()] = true
		select {
		case <-cache.Ready():
		default:
			return // not listed yet: nothing to say
		}
		st := cache.Stats()
		g, res := r.GVK.Group, r.Plural
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		counter := func(d *prometheus.Desc, v int64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
		}
		gauge(descResourceObjects, float64(st.Objects), g, res)
		gauge(descStorageObjects, float64(st.Objects), r.GR().String())
		// kube truncates to the 15 least significant digits, which a
		// float64 holds exactly.
		gauge(descResourceVersion, float64(st.ResourceVersion%1e15), g, res)
		counter(descEventsReceived, st.Events, g, res)
		counter(descInitializations, 1+st.Relists, g, res)
		counter(descTerminatedWatchers, st.TooSlow, g, res)
		for _, fallback := range []bool{false, true} {
			n := st.FreshReads
			if fallback {
				n = st.FreshFallbacks
			}
			counter(descConsistentReads, n, g, res, "true", strconv.FormatBool(fallback))
		}
	}
	for r, cache := range c.s.caches {
		emit(r, cache)
	}
	for _, rs := range c.s.reg.CustomResources().ByCRD {
		for _, r := range rs {
			emit(r, r.Cache)
		}
	}
}
