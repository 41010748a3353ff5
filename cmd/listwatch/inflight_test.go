package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMaxInFlightServer saturates the in-flight caps of the server as
// `listwatch apiserver` builds it (token authentication, the whole filter
// chain, storage) over 127.0.0.1, and checks that the next request of each
// kind gets a 429 Status with Retry-After, that watches are exempt, and that
// the server serves again once the held requests end.
//
// Requests are held without any timing: the routes are wrapped so that a
// request carrying holdHeader reports that it reached them, and so holds
// its slot, and waits for the test's release. (A body the client never
// sends holds no slot: the body is read before the in-flight cap.)
func TestMaxInFlightServer(t *testing.T) {
	const readOnlyCap, mutatingCap = 2, 2
	for _, backend := range testBackends {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			tokenFile := filepath.Join(dir, "tokens.csv")
			if err := os.WriteFile(tokenFile, []byte("tok-alice,alice,1,\"system:masters\"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			var releaseOnce sync.Once
			releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
			entered := make(chan struct{}, readOnlyCap+mutatingCap)
			cfg, err := parseServerFlags(t, "--secure-port=0", "--storage-backend="+backend,
				"--data-dir="+filepath.Join(dir, "etcd"), "--cert-dir="+filepath.Join(dir, "pki"),
				"--token-auth-file="+tokenFile,
				"--max-requests-inflight="+strconv.Itoa(readOnlyCap),
				"--max-mutating-requests-inflight="+strconv.Itoa(mutatingCap),
				// The refusal over the caps is what is tested; with the
				// queue (the default) the requests would wait instead.
				"--enable-priority-and-fairness=false")
			if err != nil {
				t.Fatal(err)
			}
			cfg.wrapRoutes = func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get(holdHeader) != "" {
						entered <- struct{}{}
						<-release
					}
					h.ServeHTTP(w, r)
				})
			}
			srv, err := startServer(context.Background(), cfg, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := srv.shutdown(); err != nil {
					t.Errorf("shutdown: %v", err)
				}
			}()
			if err := srv.waitReady(context.Background()); err != nil {
				t.Fatal(err)
			}
			c := newInflightClient(t, srv, "tok-alice")

			// Hold every read-only and every mutating slot.
			var held sync.WaitGroup
			defer held.Wait()
			defer releaseAll() // runs before held.Wait on a failure
			type heldResult struct {
				name string
				code int
				body string
				err  error
			}
			results := make(chan heldResult, readOnlyCap+mutatingCap)
			hold := func(name, method, path, body string) {
				held.Go(func() {
					code, got, err := c.doHeld(method, path, body)
					results <- heldResult{name, code, got, err}
				})
				select {
				case <-entered:
				case r := <-results:
					t.Fatalf("%s ended before holding its slot: %d %s %v", r.name, r.code, r.body, r.err)
				}
			}
			for i := range mutatingCap {
				name := fmt.Sprintf("held-%d", i)
				hold("create "+name, "POST", "/api/v1/namespaces",
					`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+name+`"}}`)
			}
			// The mutating gauge shows the held writes; this read is
			// counted too, as kube-apiserver counts it.
			if got := c.inflightGauge("mutating"); got != mutatingCap {
				t.Errorf("mutating in flight = %d, want %d", got, mutatingCap)
			}
			if got := c.inflightGauge("readOnly"); got != 1 {
				t.Errorf("readOnly in flight while reading the metrics = %d, want 1", got)
			}
			for i := range readOnlyCap {
				hold(fmt.Sprintf("get %d", i), "GET", "/api/v1/namespaces/default", "")
			}

			over := []struct{ name, method, path, body string }{
				{"write over the cap", "POST", "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"refused"}}`},
				{"delete over the cap", "DELETE", "/api/v1/namespaces/nope", ""},
				{"read over the cap", "GET", "/api/v1/namespaces/default", ""},
				{"list over the cap", "GET", "/api/v1/pods", ""},
			}
			for _, tt := range over {
				resp, body := c.do(tt.method, tt.path, tt.body)
				checkTooManyRequests(t, tt.name, resp, body)
			}

			// A watch is long-running: neither capped nor counted.
			wctx, stopWatch := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(wctx, "GET", srv.URL+"/api/v1/namespaces?watch=true", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer tok-alice")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 {
				t.Errorf("watch while saturated: %d, want 200", resp.StatusCode)
			} else if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.Contains(line, `"type":"ADDED"`) {
				t.Errorf("watch while saturated: %q %v, want an ADDED event", line, err)
			}
			stopWatch()
			resp.Body.Close()

			// Release: every held request is served in full.
			releaseAll()
			for range readOnlyCap + mutatingCap {
				r := <-results
				want := 200
				if strings.HasPrefix(r.name, "create") {
					want = 201
				}
				if r.err != nil || r.code != want {
					t.Errorf("%s: %d %s %v, want %d", r.name, r.code, r.body, r.err, want)
				}
			}
			// A held request's small response is written out after its
			// handler, and so the slot release, has returned: the
			// slots are free now.
			if got := c.inflightGauge("mutating"); got != 0 {
				t.Errorf("mutating in flight after release = %d, want 0", got)
			}
			if got := c.inflightGauge("readOnly"); got != 1 {
				t.Errorf("readOnly in flight after release (this read) = %d, want 1", got)
			}
			if got := c.counter(`apiserver_request_total{code="429",group="",resource="namespaces",subresource="",verb="POST",version="v1"}`); got != 1 {
				t.Errorf("429s of POST namespaces counted = %d, want 1", got)
			}
			for _, tt := range []struct{ method, path, body string }{
				{"POST", "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"after"}}`},
				{"GET", "/api/v1/namespaces/held-1", ""},
				{"GET", "/api/v1/pods", ""},
			} {
				resp, body := c.do(tt.method, tt.path, tt.body)
				if resp.StatusCode/100 != 2 {
					t.Errorf("%s %s after release: %d %s", tt.method, tt.path, resp.StatusCode, body)
				}
			}
		})
	}
}

func checkTooManyRequests(t *testing.T, name string, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("%s: %d %s, want 429", name, resp.StatusCode, body)
		return
	}
	if ra := resp.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("%s: Retry-After %q, want 1", name, ra)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", name, ct)
	}
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("%s: %v in %s", name, err, body)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure ||
		st.Reason != metav1.StatusReasonTooManyRequests || st.Code != 429 ||
		st.Details == nil || st.Details.RetryAfterSeconds != 1 {
		t.Errorf("%s: Status %s, want a TooManyRequests Failure with retryAfterSeconds 1", name, body)
	}
}

// inflightClient talks HTTP/1.1 to the server (one connection per
// concurrent request) with a token.
type inflightClient struct {
	*http.Client
	t     *testing.T
	base  string
	token string
}

func newInflightClient(t *testing.T, srv *runningServer, token string) *inflightClient {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(srv.CAPEM) {
		t.Fatal("bad CA")
	}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &inflightClient{Client: &http.Client{Transport: tr}, t: t, base: srv.URL, token: token}
}

func (c *inflightClient) newRequest(ctx context.Context, method, path string, body io.Reader) *http.Request {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// do sends a request and reads the whole response.
func (c *inflightClient) do(method, path, body string) (*http.Response, []byte) {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	resp, err := c.Do(c.newRequest(context.Background(), method, path, r))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, b
}

// holdHeader marks a request the test's wrapped routes hold.
const holdHeader = "X-Test-Hold"

// doHeld sends a request the routes hold until the test releases them. It
// must not call t.Fatal: it runs on its own goroutine.
func (c *inflightClient) doHeld(method, path, body string) (int, string, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(holdHeader, "1")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// inflightGauge reads apiserver_current_inflight_requests for kind from
// /metrics (-1 when absent).
func (c *inflightClient) inflightGauge(kind string) int {
	c.t.Helper()
	return c.counter(`apiserver_current_inflight_requests{request_kind="` + kind + `"}`)
}

// counter returns the integer value of the exposition line starting with
// series in /metrics, or -1.
func (c *inflightClient) counter(series string) int {
	c.t.Helper()
	resp, body := c.do("GET", "/metrics", "")
	if resp.StatusCode != 200 {
		c.t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				c.t.Fatalf("%s: %v", line, err)
			}
			return int(f)
		}
	}
	return -1
}
