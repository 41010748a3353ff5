// Command createload measures an API server's pod create throughput over
// HTTPS, the way a controller creating pods meets it: a fixed number of
// concurrent clients POST typical pods for a fixed time, and it reports the
// creates answered 201 per second, their latency, and the CPU the server's
// processes (the API server and, if named, its etcd) spent per create.
//
// With -pods it instead fills the server with a number of pods, created
// and then patched once each as a controller and the kubelets write them,
// for hack/memory.sh to measure what the server holds for them.
//
// It speaks plain HTTP, JSON and (-protobuf) kube's protobuf, so that one
// binary measures listwatch at any revision and kube-apiserver alike;
// hack/create-throughput.sh and hack/memory.sh start the servers and run
// it against each.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
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
	server      string
	ca          string
	token       string
	namespace   string
	concurrency int
	warmup      time.Duration
	duration    time.Duration
	pids        string
	label       string
	webhook     bool
	protobuf    bool
	pods        int
}

// result is one run's figures, printed as a JSON line.
type result struct {
	Label          string  `json:"label"`
	Concurrency    int     `json:"concurrency"`
	Creates        int64   `json:"creates"`
	Errors         int64   `json:"errors"`
	Seconds        float64 `json:"seconds"`
	CreatesPerSec  float64 `json:"createsPerSec"`
	P50ms          float64 `json:"p50ms"`
	P99ms          float64 `json:"p99ms"`
	CPUmsPerCreate float64 `json:"serverCPUmsPerCreate,omitempty"`
	// Patches and PatchesPerSec are -pods' status patches.
	Patches       int64   `json:"patches,omitempty"`
	PatchesPerSec float64 `json:"patchesPerSec,omitempty"`
}

func main() {
	var o options
	flag.StringVar(&o.server, "server", "", "API server URL (https://127.0.0.1:6443)")
	flag.StringVar(&o.ca, "ca", "", "CA certificate of the server")
	flag.StringVar(&o.token, "token", "", "bearer token (a system:masters user)")
	flag.StringVar(&o.namespace, "namespace", "createload", "namespace the pods are created in (made if missing)")
	flag.IntVar(&o.concurrency, "concurrency", 8, "concurrent clients")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "untimed creates before the measurement")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time")
	flag.StringVar(&o.pids, "pids", "", "comma-separated process IDs whose CPU time is the server's")
	flag.StringVar(&o.label, "label", "", "name of the run in the output")
	flag.BoolVar(&o.webhook, "webhook", false, "install one validating webhook allowing every pod, served by this process")
	flag.BoolVar(&o.protobuf, "protobuf", false, "send the pods in protobuf (application/vnd.kubernetes.protobuf), as client-go's typed clients do, rather than JSON")
	flag.IntVar(&o.pods, "pods", 0, "rather than creating pods for -duration, create this many pods of a ReplicaSet as kube-controller-manager does, then merge-patch each one's status once as a kubelet does (-warmup and -duration unused)")
	flag.Parse()
	run := run
	if o.pods > 0 {
		run = fill
	}
	res, err := run(context.Background(), o)
	if err != nil {
		slog.Error("createload", "err", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}

func run(ctx context.Context, o options) (result, error) {
	if o.server == "" || o.concurrency < 1 {
		return result{}, errors.New("-server and a positive -concurrency are required")
	}
	c, err := newClient(o)
	if err != nil {
		return result{}, err
	}
	if err := c.prepare(ctx); err != nil {
		return result{}, err
	}
	if o.webhook {
		stop, err := c.allowWebhook(ctx)
		if err != nil {
			return result{}, err
		}
		defer stop()
	}
	pids, err := serverload.ParsePIDs(o.pids)
	if err != nil {
		return result{}, err
	}
	var seq atomic.Int64
	warm, cancel := context.WithTimeout(ctx, o.warmup)
	c.load(warm, o.concurrency, &seq)
	cancel()

	cpu0, err := serverload.CPUTime(pids)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	timed, cancel := context.WithTimeout(ctx, o.duration)
	lat, errs := c.load(timed, o.concurrency, &seq)
	cancel()
	elapsed := time.Since(start)
	cpu1, err := serverload.CPUTime(pids)
	if err != nil {
		return result{}, err
	}
	res := result{Label: o.label, Concurrency: o.concurrency, Creates: int64(len(lat)), Errors: errs, Seconds: elapsed.Seconds()}
	if len(lat) == 0 {
		return res, fmt.Errorf("no create succeeded (%d errors)", errs)
	}
	slices.Sort(lat)
	res.CreatesPerSec = float64(len(lat)) / elapsed.Seconds()
	res.P50ms = float64(lat[len(lat)/2]) / 1e6
	res.P99ms = float64(lat[len(lat)*99/100]) / 1e6
	if len(pids) > 0 {
		res.CPUmsPerCreate = float64((cpu1 - cpu0).Microseconds()) / 1e3 / float64(len(lat))
	}
	return res, nil
}

type client struct {
	o    options
	http *http.Client
}

func newClient(o options) (*client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = o.concurrency
	tr.ForceAttemptHTTP2 = false // one connection per client, as separate controllers would have
	pool, err := serverload.RootCAs(o.ca)
	if err != nil {
		return nil, err
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	return &client{o: o, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

// prepare makes the namespace and its default service account (no
// controller makes it for a bare API server), then waits until a pod can
// be created: kube-apiserver's admission sees the service account only
// once its informer has.
func (c *client) prepare(ctx context.Context) error {
	ns := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, c.o.namespace)
	if err := c.ensure(ctx, "/api/v1/namespaces", ns); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	// A server that does not serve service accounts (404) has no
	// admission needing one.
	sa := `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}}`
	if err := c.ensure(ctx, "/api/v1/namespaces/"+c.o.namespace+"/serviceaccounts", sa, http.StatusNotFound); err != nil {
		return fmt.Errorf("create service account: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		code, body, err := c.post(ctx, c.podsPath(), pod("probe-"+strconv.Itoa(i)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36), i))
		if err == nil && code == http.StatusCreated {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no pod could be created: %d %s %v", code, body, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ensure creates body at path, an object that may exist already (409);
// the codes in also are accepted too.
func (c *client) ensure(ctx context.Context, path, body string, also ...int) error {
	code, answer, err := c.post(ctx, path, body)
	if err != nil {
		return err
	}
	if code != http.StatusCreated && code != http.StatusConflict && !slices.Contains(also, code) {
		return fmt.Errorf("%d %s", code, answer)
	}
	return nil
}

func (c *client) podsPath() string { return "/api/v1/namespaces/" + c.o.namespace + "/pods" }

// load runs n clients creating pods until ctx ends, and returns the
// latency of each create answered 201 and the number of other answers.
func (c *client) load(ctx context.Context, n int, seq *atomic.Int64) ([]time.Duration, int64) {
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs atomic.Int64
		wg   sync.WaitGroup
	)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for range n {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				i := int(seq.Add(1))
				t := time.Now()
				code, _, err := c.createPod(ctx, pod(fmt.Sprintf("load-%s-%07d", run, i), i), "")
				if ctx.Err() != nil {
					break // cut by the end of the run: counted neither way
				}
				if err != nil || code != http.StatusCreated {
					errs.Add(1)
					continue
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return lat, errs.Load()
}

func (c *client) post(ctx context.Context, path, body string) (int, string, error) {
	return c.do(ctx, http.MethodPost, path, body)
}

// do sends one request with a JSON body ("" for none) and returns the
// code and the answer (its start, for a failure).
func (c *client) do(ctx context.Context, method, path, body string) (int, string, error) {
	return c.send(ctx, request{method: method, path: path, contentType: "application/json", body: []byte(body)})
}

// request is one request to the server.
type request struct {
	method, path string
	// contentType is the body's media type; accept the answer's ("":
	// JSON); userAgent ("": Go's) names the field manager of a write.
	contentType, accept, userAgent string
	body                           []byte
}

// send sends r and returns the code and the answer (its start, for a
// failure).
func (c *client) send(ctx context.Context, r request) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, r.method, strings.TrimSuffix(c.o.server, "/")+r.path, bytes.NewReader(r.body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", r.contentType)
	req.Header.Set("Accept", cmp.Or(r.accept, "application/json"))
	if r.userAgent != "" {
		req.Header.Set("User-Agent", r.userAgent)
	}
	if c.o.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 && len(b) > 300 {
		b = b[:300]
	}
	return resp.StatusCode, string(b), err
}

// createPod creates the pod of the JSON body pod in the run's namespace,
// sent in protobuf with -protobuf (and then answered in protobuf, as
// client-go's typed clients ask), as userAgent.
func (c *client) createPod(ctx context.Context, pod, userAgent string) (int, string, error) {
	r := request{method: http.MethodPost, path: c.podsPath(), contentType: "application/json", userAgent: userAgent, body: []byte(pod)}
	if c.o.protobuf {
		b, err := podProtobuf(pod)
		if err != nil {
			return 0, "", err
		}
		r.contentType, r.accept, r.body = protobufMediaType, protobufMediaType, b
	}
	return c.send(ctx, r)
}

// pod is the typical pod of the apiserver package's BenchmarkCreatePod:
// labels, an owner, one container with a port and resources, a node and a
// status.
func pod(name string, i int) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"labels":{"app":"bench","shard":"%d","gen":"000000000"},
"ownerReferences":[{"apiVersion":"v1","kind":"ReplicationController","name":"rc-%d","uid":"6f1c1f7e-0000-4000-8000-%012d","controller":true}]},
"spec":{"nodeName":"node-%d","containers":[{"name":"main","image":"registry.k8s.io/pause:3.10",
"ports":[{"containerPort":8080,"protocol":"TCP"}],
"resources":{"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"200m","memory":"128Mi"}}}]},
"status":{"phase":"Running","podIP":"10.0.%d.%d"}}`, name, i%10, i/100, i/100, i%50, (i/250)%250, i%250)
}
