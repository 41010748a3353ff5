package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/listwatch/listwatch/bench/internal/serverload"
	"github.com/listwatch/listwatch/internal/benchpods"
)

// client makes watchload's requests to the server.
type client struct {
	o   options
	tls *tls.Config
	// http is the writer's: one HTTP/2 connection of its own.
	http *http.Client
	// dials counts the TCP connections the watchers' transports opened.
	dials atomic.Int64
}

func newClient(o options) (*client, error) {
	pool, err := serverload.RootCAs(o.ca)
	if err != nil {
		return nil, err
	}
	c := &client{o: o, tls: &tls.Config{RootCAs: pool}}
	c.http = &http.Client{Transport: c.transport(nil), Timeout: 30 * time.Second}
	return c, nil
}

// transport is an HTTP/2 transport to the server, as client-go's: every
// request it carries is a stream of one connection, and a further
// connection is opened only when the server's limit of concurrent streams
// is reached. dials, if not nil, counts the connections it opens.
func (c *client) transport(dials *atomic.Int64) *http.Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials != nil {
				dials.Add(1)
			}
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig:     c.tls.Clone(),
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 4,
	}
}

// watchClient is an HTTP client of its own HTTP/2 connection(s) for
// watches: no timeout, and the connections it opens counted in c.dials.
func (c *client) watchClient() *http.Client {
	return &http.Client{Transport: c.transport(&c.dials)}
}

func (c *client) podsPath() string { return "/api/v1/namespaces/" + c.o.namespace + "/pods" }

// request is a request to the server's path with the token, and a JSON
// body unless body is nil.
func (c *client) request(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.o.server, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.o.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.token)
	}
	return req, nil
}

// send sends a request with the writer's client and returns the code and
// the answer (its start, for a failure).
func (c *client) send(ctx context.Context, method, path, contentType string, body []byte) (int, []byte, error) {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 && len(b) > 300 {
		b = b[:300]
	}
	return resp.StatusCode, b, err
}

// create POSTs body to path and accepts 201, 409 (it exists) and the codes
// in also.
func (c *client) create(ctx context.Context, path, body string, also ...int) error {
	code, answer, err := c.send(ctx, http.MethodPost, path, "", []byte(body))
	if err != nil {
		return err
	}
	if code != http.StatusCreated && code != http.StatusConflict && !slices.Contains(also, code) {
		return fmt.Errorf("POST %s: %d %s", path, code, answer)
	}
	return nil
}

// prepare makes the namespace, its default service account (no controller
// makes it for a bare API server; a server that does not serve them, 404,
// has no admission needing one) and the pods, benchpods.Pod(0) to
// benchpods.Pod(o.pods-1), which may exist already. The first pod is
// retried for up to 30s: kube-apiserver's admission sees the service
// account only once its informer has.
func (c *client) prepare(ctx context.Context) error {
	ns := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, c.o.namespace)
	if err := c.create(ctx, "/api/v1/namespaces", ns); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	sa := `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}}`
	if err := c.create(ctx, "/api/v1/namespaces/"+c.o.namespace+"/serviceaccounts", sa, http.StatusNotFound); err != nil {
		return fmt.Errorf("create service account: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := c.create(ctx, c.podsPath(), benchpods.Pod(0))
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("create pod: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next.Store(1)
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < c.o.pods; i = int(next.Add(1)) - 1 {
				if err := c.create(ctx, c.podsPath(), benchpods.Pod(i)); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("create pod %d: %w", i, err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// listRV is the resourceVersion of a list of the namespace's pods: where a
// watch of them starts with nothing missed.
func (c *client) listRV(ctx context.Context) (string, error) {
	code, body, err := c.send(ctx, http.MethodGet, c.podsPath()+"?limit=1", "", nil)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("list pods: %d %s", code, body)
	}
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return "", fmt.Errorf("list pods: %w", err)
	}
	if l.Metadata.ResourceVersion == "" {
		return "", errors.New("list pods: no resourceVersion")
	}
	return l.Metadata.ResourceVersion, nil
}

// patch sets pod i's annotation to "i/seq/sent" (sent in Unix
// nanoseconds) with a merge patch.
func (c *client) patch(ctx context.Context, i int, seq int32, sent time.Time) error {
	body := `{"metadata":{"annotations":{"` + annotation + `":"` + strconv.Itoa(i) + "/" + strconv.Itoa(int(seq)) + "/" + strconv.FormatInt(sent.UnixNano(), 10) + `"}}}`
	code, answer, err := c.send(ctx, http.MethodPatch, c.podsPath()+"/"+benchpods.Name(i), "application/merge-patch+json", []byte(body))
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("patch pod %d: %d %s", i, code, answer)
	}
	return nil
}

// profile fetches the server's CPU profile of the next d into the file
// path (kube-apiserver serves it with --profiling, listwatch by default).
func (c *client) profile(ctx context.Context, d time.Duration, path string) error {
	secs := max(int(d.Round(time.Second)/time.Second), 1)
	hc := &http.Client{Transport: c.http.Transport, Timeout: d + time.Minute}
	req, err := c.request(ctx, http.MethodGet, "/debug/pprof/profile?seconds="+strconv.Itoa(secs), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cpu profile: %s: %s", resp.Status, clip(b, 300))
	}
	return os.WriteFile(path, b, 0o644)
}
