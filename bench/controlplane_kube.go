package main

// The control-plane workloads against a cluster the bench did not start:
// with -kubeconfig, the controlplane-* rows give the same cpWorkload to
// whatever controllers run in that cluster (kube-controller-manager, as
// hack/controlplane-kube.sh starts it on kube-apiserver and etcd), with
// the same driver and the same stand-in kubelet (podlifecycle, run here as
// runControllersSide runs it) as our own rows, and time it the same way.
// With -listwatch-controllers as well, listwatch's controller-manager runs
// here against that cluster instead (kube-apiserver with no
// kube-controller-manager), so that the two sets of controllers are also
// compared on the same API server.
//
// The requests counted are the controllers' as the API server saw them:
// apiserver_request_total scraped before and after the timed window,
// less the requests of this process (the driver and the stand-in kubelet,
// counted at their transport). What is left also holds whatever the API
// server asked of itself meanwhile (its identity Lease, a few requests a
// minute), and watches are counted by the server when they end, by the
// bench when they start, so a differing "watch" row is not a miss. With
// -kcm-metrics, kube-controller-manager's own rest_client_requests_total
// is scraped too, as a total to check the difference against.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
)

// implKubeControllerManager names the rows measured against a cluster's
// own controllers, which -kubeconfig selects.
const implKubeControllerManager = "kube-controller-manager"

var (
	cpKubeconfig  = flag.String("kubeconfig", "", "run the controlplane-* workloads against the cluster of this kubeconfig (its own controllers, e.g. kube-controller-manager; see hack/controlplane-kube.sh) instead of an in-process listwatch control plane; only the stand-in kubelet (podlifecycle) runs here, unless -listwatch-controllers")
	lwControllers = flag.Bool("listwatch-controllers", false, "with -kubeconfig, run listwatch's controller-manager (every controller but podlifecycle, as the in-process rows run them) against the cluster, which must run no controllers of its own; its rows are listwatch's")
	kcmMetrics    = flag.String("kcm-metrics", "", "with -kubeconfig, the URL of kube-controller-manager's /metrics (served on its secure port, read without verifying its certificate), whose rest_client_requests_total is reported next to the count at the API server")
)

// defaultNodes are the nodes podlifecycle binds pods to by default. A
// cluster with a node lifecycle and a pod garbage collector needs a
// workload's nodes (cpWorkload.nodes) to exist and be Ready: pods bound to
// a missing node are deleted by the pod GC, and those of a node whose
// kubelet stopped posting are evicted.
var defaultNodes = []string{"node-1", "node-2", "node-3"}

// nodeLeaseRenew is how often the stand-in kubelet renews each node's
// Lease, as the kubelet does (a quarter of its 40 s lease duration).
const nodeLeaseRenew = 10 * time.Second

// benchKubeControllerManager runs w for n replicas against the cluster of
// -kubeconfig, which must be fresh: the bench namespace is created here
// and must not exist.
func benchKubeControllerManager(name string, w cpWorkload, n int) ([]Row, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cpTimeout)
	defer cancel()
	base, err := client.LoadConfig(client.LoadOptions{Kubeconfig: *cpKubeconfig, Namespace: cpNamespace})
	if err != nil {
		return nil, err
	}
	// The bench's own requests, the driver's and the stand-in kubelet's, are
	// counted to be told from the controllers' at the API server.
	counter := &requestCounter{}
	cfg := func() *client.Config {
		rc := rest.CopyConfig(base.REST)
		rc.WrapTransport = counter.wrap
		return &client.Config{REST: rc, Namespace: cpNamespace, QPS: -1}
	}
	driver, err := client.New(cfg())
	if err != nil {
		return nil, err
	}
	nodes := w.nodes(n)
	if err := startNodes(ctx, driver, nodes); err != nil {
		return nil, err
	}
	hb, stopHeartbeats := context.WithCancel(ctx)
	var heartbeats sync.WaitGroup
	heartbeats.Go(func() { renewNodeLeases(hb, driver, nodes) })
	defer func() {
		stopHeartbeats()
		heartbeats.Wait()
	}()
	// listwatch's controllers, with -listwatch-controllers, run before the
	// namespace is made: its default ServiceAccount is theirs to create.
	impl := implKubeControllerManager
	var ctrlCounter *requestCounter
	if *lwControllers {
		impl, ctrlCounter = implListwatch, &requestCounter{}
		var names []string
		for _, c := range controllermanager.AllControllers() {
			if c != controllermanager.PodLifecycle {
				names = append(names, c)
			}
		}
		rc := rest.CopyConfig(base.REST)
		rc.WrapTransport = ctrlCounter.wrap
		// As runControllersSide's, but for the stand-in kubelet, which
		// is the bench's below.
		stop, err := startManager(ctx, controllermanager.Config{
			Client:         &client.Config{REST: rc, Namespace: cpNamespace, QPS: -1},
			Controllers:    names,
			LeaderElection: controllermanager.LeaderElection{Disabled: true},
			Logger:         quietLogger(),
		})
		if err != nil {
			return nil, fmt.Errorf("controller-manager: %w", err)
		}
		defer stop()
	}
	if err := createNamespace(ctx, driver); err != nil {
		return nil, err
	}
	stop, err := startManager(ctx, controllermanager.Config{
		Client:         cfg(),
		Controllers:    []string{controllermanager.PodLifecycle},
		LeaderElection: controllermanager.LeaderElection{Disabled: true},
		PodLifecycle:   w.podLifecycle(n),
		Logger:         quietLogger(),
	})
	if err != nil {
		return nil, fmt.Errorf("stand-in kubelet: %w", err)
	}
	defer stop()

	replicas := int32(n)
	if w.prepare != nil {
		if err := w.prepare(ctx, driver, replicas); err != nil {
			return nil, fmt.Errorf("prepare %s: %w", w.name, err)
		}
	}
	metricsClient, err := rest.HTTPClientFor(base.REST)
	if err != nil {
		return nil, err
	}
	// scrape reads the API server's request counts and, with
	// -kcm-metrics, kube-controller-manager's.
	scrape := func() (api, kcm map[string]float64, err error) {
		if api, err = scrapeCounters(ctx, metricsClient, strings.TrimSuffix(base.REST.Host, "/")+"/metrics", "apiserver_request_total"); err != nil {
			return nil, nil, err
		}
		kcm, err = scrapeKCM(ctx)
		return api, kcm, err
	}
	before, kcmBefore, err := scrape()
	if err != nil {
		return nil, err
	}
	counter.reset()
	if ctrlCounter != nil {
		ctrlCounter.reset()
	}
	start := time.Now()
	if err := w.start(ctx, driver, replicas); err != nil {
		return nil, fmt.Errorf("start %s: %w", w.name, err)
	}
	if err := w.await(ctx, driver, replicas); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	ours := counter.snapshot()
	var ctrlOwn map[string]int64
	if ctrlCounter != nil {
		ctrlOwn = ctrlCounter.snapshot()
	}
	after, kcmAfter, err := scrape()
	if err != nil {
		return nil, err
	}

	metric := w.metric + "=" + strconv.Itoa(n)
	rows := []Row{{Workload: name, Impl: impl, Metric: metric, Value: elapsed.Seconds(), Unit: "s"}}
	theirs := controllersRequests(before, after, ours)
	var total, benchTotal int64
	for _, k := range unionKeys(theirs, nil) {
		rows = append(rows, Row{Workload: name, Impl: impl, Metric: "requests " + k, Value: float64(theirs[k]), Unit: "count"})
		total += theirs[k]
	}
	for _, v := range ours {
		benchTotal += v
	}
	rows = append(rows,
		Row{Workload: name, Impl: impl, Metric: "requests total", Value: float64(total), Unit: "count"},
		Row{Workload: name, Impl: impl, Metric: "requests total, driver and stand-in kubelet (not above)", Value: float64(benchTotal), Unit: "count"})
	if kcmBefore != nil {
		var sum float64
		for k, v := range kcmAfter {
			sum += v - kcmBefore[k]
		}
		rows = append(rows, Row{Workload: name, Impl: impl, Metric: "requests total, its rest_client_requests_total", Value: sum, Unit: "count"})
	}
	if ctrlOwn != nil {
		var sum int64
		for _, v := range ctrlOwn {
			sum += v
		}
		rows = append(rows, Row{Workload: name, Impl: impl, Metric: "requests total, at its transport", Value: float64(sum), Unit: "count"})
	}
	return rows, nil
}

// startManager runs a controller-manager of cfg until the returned stop
// is called, once it is Ready.
func startManager(ctx context.Context, cfg controllermanager.Config) (stop func(), err error) {
	_, stop, err = runManager(ctx, cfg)
	return stop, err
}

// runManager is startManager that also returns the manager, for its
// metrics.
func runManager(ctx context.Context, cfg controllermanager.Config) (m *controllermanager.Manager, stop func(), err error) {
	m, err = controllermanager.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(mctx) }()
	stop = func() {
		cancel()
		<-done
	}
	for !m.Ready() {
		select {
		case <-ctx.Done():
			stop()
			return nil, nil, fmt.Errorf("not ready: %w", ctx.Err())
		case err := <-done:
			cancel()
			return nil, nil, fmt.Errorf("stopped: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return m, stop, nil
}

// startNodes registers the nodes named with a Ready condition, as kubelets would.
// The cluster's node controllers write the new nodes too (taints,
// annotations), so a status write that conflicts is made again on the
// node as it is now.
func startNodes(ctx context.Context, c *client.Client, names []string) error {
	nodes := client.For[*corev1.Node](c, "")
	for _, name := range names {
		node, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		for attempt := 0; err == nil; attempt++ {
			now := metav1.Now()
			node.Status.Conditions = []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: now, LastTransitionTime: now,
			}}
			if _, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err == nil || !apierrors.IsConflict(err) || attempt == 10 {
				break
			}
			node, err = nodes.Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
	}
	return nil
}

// renewNodeLeases keeps the nodes' Leases in kube-node-lease fresh until
// ctx ends, which is what the node lifecycle controller reads as a
// kubelet alive. Errors end it: the node would then be seen gone, and the
// run's result would say so.
func renewNodeLeases(ctx context.Context, c *client.Client, names []string) {
	leases := client.For[*coordinationv1.Lease](c, corev1.NamespaceNodeLease)
	duration := int32(40)
	for {
		for _, name := range names {
			now := metav1.NewMicroTime(time.Now())
			l, err := leases.Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				holder := name
				_, err = leases.Create(ctx, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
					Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration, RenewTime: &now},
				}, metav1.CreateOptions{})
			case err == nil:
				l.Spec.RenewTime = &now
				_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
			if err != nil {
				if ctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "bench: node lease %s: %v\n", name, err)
				}
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(nodeLeaseRenew):
		}
	}
}

// createNamespace creates the bench namespace and waits for its default
// ServiceAccount, without which the ServiceAccount admission plugin
// refuses the pods.
func createNamespace(ctx context.Context, c *client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cpNamespace}}
	if _, err := client.For[*corev1.Namespace](c, "").Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	accounts := client.For[*corev1.ServiceAccount](c, cpNamespace)
	for {
		_, err := accounts.Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("default service account: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no default service account in %s (is the serviceaccount controller running?): %w", cpNamespace, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// scrapeKCM reads -kcm-metrics' rest_client_requests_total, or nothing
// when the flag is not set.
func scrapeKCM(ctx context.Context) (map[string]float64, error) {
	if *kcmMetrics == "" {
		return nil, nil
	}
	// Its serving certificate is self-signed; the paths it allows without
	// authorization (--authorization-always-allow-paths) take no token.
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer c.CloseIdleConnections()
	return scrapeCounters(ctx, c, *kcmMetrics, "rest_client_requests_total")
}

// scrapeCounters reads the samples of the counter name from the Prometheus
// text exposition at url, keyed by their labels as exposed.
func scrapeCounters(ctx context.Context, c *http.Client, url, name string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scrape %s: %s: %s", url, resp.Status, body)
	}
	return parseCounters(resp.Body, name)
}

// parseCounters keeps the samples of name from a text exposition:
// `name{labels} value`, labels as exposed (the key), value a float.
func parseCounters(r io.Reader, name string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		labels := ""
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				return nil, fmt.Errorf("metrics: unterminated labels in %q", line)
			}
			labels, rest = rest[1:end], rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: value in %q: %w", line, err)
		}
		out[labels] += v
	}
	return out, sc.Err()
}

// parseLabels splits `a="x",b="y"` into a map, undoing the exposition's
// escapes (\\, \", \n).
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return nil, fmt.Errorf("metrics: bad labels %q", s)
		}
		key := s[:eq]
		s = s[eq+2:]
		var v strings.Builder
		closed := false
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\' && i+1 < len(s):
				i++
				if s[i] == 'n' {
					v.WriteByte('\n')
				} else {
					v.WriteByte(s[i])
				}
			case c == '"':
				closed, s = true, s[i+1:]
			default:
				v.WriteByte(c)
			}
			if closed {
				break
			}
		}
		if !closed {
			return nil, errors.New("metrics: unterminated label value")
		}
		out[key] = v.String()
		s = strings.TrimPrefix(s, ",")
	}
	return out, nil
}

// serverVerbs maps apiserver_request_total's verbs to requestKey's.
var serverVerbs = map[string]string{
	"GET": "get", "LIST": "list", "WATCH": "watch", "POST": "create", "PUT": "update",
	"PATCH": "patch", "APPLY": "patch", "DELETE": "delete", "DELETECOLLECTION": "deletecollection",
}

// controllersRequests is the difference of apiserver_request_total between
// before and after, keyed as requestKey keys requests ("create pods",
// "update pods/status (409)"), less ours, the bench's own requests of the
// window: what the controllers asked. Requests that name no resource
// (discovery, /metrics) are left out, and a count below ours is zero.
func controllersRequests(before, after map[string]float64, ours map[string]int64) map[string]int64 {
	server := map[string]float64{}
	for labels, v := range after {
		d := v - before[labels]
		if d <= 0 {
			continue
		}
		l, err := parseLabels(labels)
		if err != nil || l["resource"] == "" {
			continue
		}
		verb, ok := serverVerbs[l["verb"]]
		if !ok {
			verb = strings.ToLower(l["verb"])
		}
		k := verb + " " + l["resource"]
		if l["subresource"] != "" {
			k += "/" + l["subresource"]
		}
		if code, err := strconv.Atoi(l["code"]); err == nil && code >= 300 {
			k += " (" + l["code"] + ")"
		}
		server[k] += d
	}
	out := map[string]int64{}
	for k, v := range server {
		if d := int64(v) - ours[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}
