// Command watchload measures an API server's watch fan-out over HTTPS, the
// way a fleet of controllers and kubelets meets it: many watchers of one
// namespace's pods, each an HTTP/2 stream as client-go opens them, while a
// writer patches the pods at a steady rate. It reports how long each update
// took to reach each watcher, whether any watch was ended by the server or
// missed an update, and the CPU the server's processes spent.
//
// A run creates a namespace and -pods pods in it (bench's typical
// ReplicaSet pods, internal/benchpods), opens -watchers watches of them
// from the list's resourceVersion with bookmarks, spread over connections
// of at most -per-conn streams each (kube-apiserver allows 100 concurrent
// streams per connection by default, Go's HTTP/2 server 250), and, once
// every watch has its response headers, merge-patches the pods round-robin
// at -rate updates per second for -warmup and then -duration. Each update
// sets an annotation to "POD/SEQ/NANOS": the pod, the update's sequence
// number among that pod's, and the time it was sent. Each watcher reads
// the annotation from every event, and records the delivery latency (the
// time it was read less the time it was sent, on one machine's clock) of
// the updates sent in the measured -duration, and the gaps in each pod's
// sequence; after the last update it waits up to -drain for every watcher
// to see every update.
//
// It prints one JSON line: the watchers and the connections they used; the
// updates sent in the measured time, their rate and latency; the events
// delivered of those expected (watchers × updates); the latency percentiles
// over all watchers; the watches the server ended (stream closed, or an
// ERROR event such as 410 Expired) and why, each watched again from its last
// resourceVersion (after an ERROR, from a new list's) as client-go's
// reflector does; the updates missed (never seen by a watcher that should
// have seen them); and the CPU seconds of the server's processes (-pids)
// and of watchload itself in the measured time, with the load average at
// its end.
//
// It speaks plain HTTP and JSON, so that one binary measures listwatch at
// any revision and kube-apiserver alike; hack/watch-fanout.sh starts the
// servers and runs it against each.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/listwatch/listwatch/bench/internal/serverload"
)

type options struct {
	server    string
	ca        string
	token     string
	namespace string
	pods      int
	watchers  int
	perConn   int
	rate      float64
	writers   int
	warmup    time.Duration
	duration  time.Duration
	drain     time.Duration
	pids      string
	label     string
	profile   string
}

// result is one run's figures, printed as a JSON line.
type result struct {
	Label       string `json:"label"`
	Pods        int    `json:"pods"`
	Watchers    int    `json:"watchers"`
	Connections int64  `json:"connections"`
	// Seconds is the measured time; UpdatesSent the updates sent in it
	// that succeeded, at UpdatesPerSec; UpdateErrors the updates that
	// failed (any time), UpdatesSkipped those of the measured time not
	// sent for want of a free writer.
	Seconds        float64 `json:"seconds"`
	UpdatesSent    int64   `json:"updatesSent"`
	UpdatesPerSec  float64 `json:"updatesPerSec"`
	UpdateErrors   int64   `json:"updateErrors"`
	UpdatesSkipped int64   `json:"updatesSkipped"`
	PatchP50ms     float64 `json:"patchP50ms"`
	PatchP99ms     float64 `json:"patchP99ms"`
	// EventsDelivered is the measured updates the watchers saw, of
	// EventsExpected (watchers × UpdatesSent); the percentiles are over
	// them.
	EventsDelivered int64   `json:"eventsDelivered"`
	EventsExpected  int64   `json:"eventsExpected"`
	P50ms           float64 `json:"p50ms"`
	P90ms           float64 `json:"p90ms"`
	P99ms           float64 `json:"p99ms"`
	P999ms          float64 `json:"p999ms"`
	MaxMs           float64 `json:"maxMs"`
	// WatchesEnded counts the watches the server ended before the client
	// stopped, EndReasons by why.
	WatchesEnded int            `json:"watchesEndedByServer"`
	EndReasons   map[string]int `json:"endReasons,omitempty"`
	// EventsMissed counts the updates (any time) some watcher never saw;
	// EventsOutOfOrder the events that repeated or went back on an
	// update a watcher had seen.
	EventsMissed     int64 `json:"eventsMissed"`
	EventsOutOfOrder int64 `json:"eventsOutOfOrder"`
	// EventBytes is the mean size of an event on the wire (JSON).
	EventBytes float64 `json:"eventBytes"`
	// DrainSeconds is how long after the last update the watchers took
	// to see every update (or -drain, when some never did).
	DrainSeconds     float64    `json:"drainSeconds"`
	ServerCPUSeconds float64    `json:"serverCPUSeconds,omitempty"`
	ClientCPUSeconds float64    `json:"clientCPUSeconds"`
	LoadAvg          [3]float64 `json:"loadAvg"`
}

func main() {
	var o options
	flag.StringVar(&o.server, "server", "", "API server URL (https://127.0.0.1:6443)")
	flag.StringVar(&o.ca, "ca", "", "CA certificate of the server")
	flag.StringVar(&o.token, "token", "", "bearer token (a system:masters user)")
	flag.StringVar(&o.namespace, "namespace", "watchload", "namespace of the pods (made if missing)")
	flag.IntVar(&o.pods, "pods", 100, "pods created and updated")
	flag.IntVar(&o.watchers, "watchers", 1000, "watches of the namespace's pods")
	flag.IntVar(&o.perConn, "per-conn", 100, "watches per HTTP/2 connection (at most the server's limit of concurrent streams, or watches queue)")
	flag.Float64Var(&o.rate, "rate", 200, "updates per second")
	flag.IntVar(&o.writers, "writers", 32, "concurrent patches at most")
	flag.DurationVar(&o.warmup, "warmup", 5*time.Second, "updates before the measured time")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "measured time")
	flag.DurationVar(&o.drain, "drain", 30*time.Second, "how long to wait after the last update for every watcher to see every update")
	flag.StringVar(&o.pids, "pids", "", "comma-separated process IDs whose CPU time is the server's")
	flag.StringVar(&o.label, "label", "", "name of the run in the output")
	flag.StringVar(&o.profile, "profile", "", "write the server's CPU profile of the measured time (/debug/pprof/profile) to this file")
	flag.Parse()
	res, err := run(context.Background(), o)
	if err != nil {
		slog.Error("watchload", "err", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}

func run(ctx context.Context, o options) (result, error) {
	if o.server == "" || o.pods < 1 || o.watchers < 1 || o.perConn < 1 || o.rate <= 0 || o.writers < 1 || o.duration <= 0 {
		return result{}, errors.New("-server and positive -pods, -watchers, -per-conn, -rate, -writers and -duration are required")
	}
	pids, err := serverload.ParsePIDs(o.pids)
	if err != nil {
		return result{}, err
	}
	c, err := newClient(o)
	if err != nil {
		return result{}, err
	}
	if err := c.prepare(ctx); err != nil {
		return result{}, err
	}
	rv, err := c.listRV(ctx)
	if err != nil {
		return result{}, err
	}
	slog.Info("pods created", "pods", o.pods, "namespace", o.namespace, "resourceVersion", rv)

	win := &window{}
	win.from.Store(math.MaxInt64)
	win.to.Store(math.MaxInt64)
	watchers, stop, err := c.openWatchers(ctx, rv, win)
	defer stop()
	if err != nil {
		return result{}, err
	}

	wr := newWriter(c, o.rate, o.pods, win)
	begin := time.Now()
	from := begin.Add(o.warmup)
	to := from.Add(o.duration)
	win.from.Store(from.UnixNano())
	win.to.Store(to.UnixNano())
	written := make(chan struct{})
	go func() {
		defer close(written)
		wr.run(ctx, begin, to, o.writers)
	}()
	time.Sleep(time.Until(from))
	self := []int{os.Getpid()}
	server0, err := serverload.CPUTime(pids)
	if err != nil {
		return result{}, err
	}
	client0, err := serverload.CPUTime(self)
	if err != nil {
		return result{}, err
	}
	profiled := make(chan error, 1)
	if o.profile != "" {
		go func() { profiled <- c.profile(ctx, o.duration, o.profile) }()
	} else {
		profiled <- nil
	}
	slog.Info("measuring", "rate", o.rate, "duration", o.duration)
	time.Sleep(time.Until(to))
	server1, err := serverload.CPUTime(pids)
	if err != nil {
		return result{}, err
	}
	client1, err := serverload.CPUTime(self)
	if err != nil {
		return result{}, err
	}
	load := loadAvg()
	<-written

	final := wr.final()
	var total int64
	for _, n := range final {
		total += int64(n)
	}
	drained := time.Now()
	for deadline := drained.Add(o.drain); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var seen int64
		for _, w := range watchers {
			seen += w.received.Load()
		}
		if seen >= total*int64(len(watchers)) {
			break
		}
	}
	drain := time.Since(drained)
	stop()
	if err := <-profiled; err != nil {
		slog.Warn("no CPU profile", "err", err)
	}

	res := result{
		Label: o.label, Pods: o.pods, Watchers: o.watchers, Connections: c.dials.Load(),
		Seconds: to.Sub(from).Seconds(), UpdatesSent: wr.sent.Load(), UpdateErrors: wr.errs.Load(), UpdatesSkipped: wr.skipped.Load(),
		EndReasons: map[string]int{}, DrainSeconds: drain.Seconds(),
		ServerCPUSeconds: (server1 - server0).Seconds(), ClientCPUSeconds: (client1 - client0).Seconds(), LoadAvg: load,
	}
	res.UpdatesPerSec = float64(res.UpdatesSent) / res.Seconds
	res.EventsExpected = res.UpdatesSent * int64(o.watchers)
	slices.Sort(wr.lat)
	res.PatchP50ms = ms(percentile(wr.lat, 0.50))
	res.PatchP99ms = ms(percentile(wr.lat, 0.99))

	var lat []int32
	var bytes, events int64
	for _, w := range watchers {
		lat = append(lat, w.lat...)
		w.lat = nil
		res.EventsDelivered += w.delivered
		res.EventsMissed += w.missed
		res.EventsOutOfOrder += w.outOfOrder
		for p, n := range final {
			res.EventsMissed += max(int64(n)-int64(w.last[p]), 0)
		}
		for r, n := range w.ended {
			res.EndReasons[r] += n
			res.WatchesEnded += n
		}
		bytes += w.bytes
		events += w.events
	}
	if events > 0 {
		res.EventBytes = float64(bytes) / float64(events)
	}
	if len(lat) == 0 {
		return res, fmt.Errorf("no measured update reached a watcher (%d sent)", res.UpdatesSent)
	}
	slices.Sort(lat)
	us := func(q float64) float64 { return float64(percentile(lat, q)) / 1e3 }
	res.P50ms, res.P90ms, res.P99ms, res.P999ms = us(0.50), us(0.90), us(0.99), us(0.999)
	res.MaxMs = float64(lat[len(lat)-1]) / 1e3
	return res, nil
}

// openWatchers opens o.watchers watches from rv, o.perConn to each
// connection: the first of each connection alone, so that it opens the
// connection the others share. It returns once each has its response
// headers (or fails after two minutes); stop ends them and waits for
// their goroutines.
func (c *client) openWatchers(ctx context.Context, rv string, win *window) (ws []*watcher, stop func(), err error) {
	o := c.o
	conns := (o.watchers + o.perConn - 1) / o.perConn
	clients := make([]*http.Client, conns)
	for i := range clients {
		clients[i] = c.watchClient()
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() {
		cancel()
		wg.Wait()
	}
	var established atomic.Int64
	expect := int(o.rate*o.duration.Seconds()*1.1) + 64
	ws = make([]*watcher, o.watchers)
	start := func(i int) {
		w := newWatcher(c, clients[i/o.perConn], o.pods, win, expect)
		ws[i] = w
		wg.Go(func() { w.run(wctx, rv, func() { established.Add(1) }) })
	}
	wait := func(n int64) error {
		for deadline := time.Now().Add(2 * time.Minute); established.Load() < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d watches established after 2m", established.Load(), n)
			}
		}
		return nil
	}
	t := time.Now()
	for k := range conns {
		start(k * o.perConn)
	}
	if err := wait(int64(conns)); err != nil {
		return ws, stop, err
	}
	for i := range o.watchers {
		if i%o.perConn != 0 {
			start(i)
		}
	}
	if err := wait(int64(o.watchers)); err != nil {
		return ws, stop, err
	}
	for _, w := range ws {
		if w.proto != "HTTP/2.0" {
			return ws, stop, fmt.Errorf("a watch was served over %s, not HTTP/2", w.proto)
		}
	}
	slog.Info("watches established", "watchers", o.watchers, "connections", c.dials.Load(), "took", time.Since(t).Round(time.Millisecond))
	return ws, stop, nil
}

// percentile is the q-quantile of the sorted s (nearest rank), or zero for
// none.
func percentile[T any](s []T, q float64) T {
	if len(s) == 0 {
		var zero T
		return zero
	}
	return s[max(int(math.Ceil(q*float64(len(s))))-1, 0)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// loadAvg is the system's load average over 1, 5 and 15 minutes, zero
// where /proc/loadavg cannot be read.
func loadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range strings.Fields(string(b)) {
		if i >= len(out) {
			break
		}
		out[i], _ = strconv.ParseFloat(f, 64)
	}
	return out
}
