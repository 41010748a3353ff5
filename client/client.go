// Package client is a REST client for the Kubernetes API: configuration from
// a kubeconfig or a pod's service account, a typed client per resource
// (generic over the object type, with an unstructured variant for custom
// resources), typed Status errors, list paging, and watch streams decoded
// from JSON or protobuf. A Resource is a cache.ListerWatcher, and a Client
// is the Source of an informers.SharedInformerFactory.
package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/time/rate"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/internal/ctxtime"
)

// Client talks to one API server. It is safe for concurrent use.
type Client struct {
	base       *url.URL
	hc         *http.Client
	limiter    *rate.Limiter
	userAgent  string
	preferJSON bool
	maxEvent   int
	namespace  string
	// keepManaged keeps managedFields in the objects of ListerWatcher.
	keepManaged bool
	// maxRetries bounds the retries of a request the server asked to
	// retry later; sleep waits between them (a field so that tests can
	// see the waits without taking them).
	maxRetries int
	sleep      func(ctx context.Context, d time.Duration) bool
}

// CloseIdleConnections closes the client's connections to the server that
// carry no request, as http.Client's does: a program or test done with the
// client calls it so that no connection outlives it.
func (c *Client) CloseIdleConnections() {
	// The transport under client-go's authentication wrappers holds them.
	utilnet.CloseIdleConnectionsFor(c.hc.Transport)
}

// New returns a client for the server cfg names.
func New(cfg *Config) (*Client, error) {
	if cfg == nil || cfg.REST == nil {
		return nil, errors.New("client: no REST config")
	}
	base, err := baseURL(cfg.REST)
	if err != nil {
		return nil, err
	}
	rc := rest.CopyConfig(cfg.REST)
	// Watches last minutes: the request's context bounds each call instead
	// of a client-wide timeout.
	rc.Timeout = 0
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("client: transport: %w", err)
	}
	c := &Client{base: base, hc: hc, userAgent: cfg.UserAgent, preferJSON: cfg.PreferJSON,
		maxEvent: cfg.MaxEventBytes, namespace: cfg.Namespace, keepManaged: cfg.KeepManagedFields,
		maxRetries: cfg.MaxRetries, sleep: ctxtime.Sleep}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	if c.userAgent == "" {
		c.userAgent = DefaultUserAgent()
	}
	if c.maxEvent <= 0 {
		c.maxEvent = DefaultMaxEventBytes
	}
	if c.namespace == "" {
		c.namespace = "default"
	}
	qps, burst := cfg.QPS, cfg.Burst
	if qps == 0 {
		qps = DefaultQPS
	}
	if burst <= 0 {
		burst = DefaultBurst
	}
	if qps > 0 {
		c.limiter = rate.NewLimiter(rate.Limit(qps), burst)
	}
	return c, nil
}

// Namespace returns the default namespace of the configuration.
func (c *Client) Namespace() string { return c.namespace }

// Host returns the server's URL.
func (c *Client) Host() string { return c.base.String() }

// request is one HTTP call to the API.
type request struct {
	verb        string
	path        string // absolute, already escaped, without the base path
	query       url.Values
	body        []byte
	contentType string
	accept      string
	list        bool // reads a collection, not one object
}

func (c *Client) url(req *request) string {
	u := *c.base
	u.RawPath = ""
	u.Path = c.base.Path + req.path
	if len(req.query) > 0 {
		u.RawQuery = req.query.Encode()
	}
	return u.String()
}

// send performs req, after waiting for the rate limiter, and returns the
// response of a successful call, whose body the caller must close. An
// unsuccessful one is returned as a *StatusError. A refusal that asks to be
// retried later (429, or a 5xx with Retry-After: the server did not act on
// the request) is retried after the delay it asks for, up to maxRetries
// times, as client-go does: a burst that overruns the server's in-flight
// cap then slows down instead of failing writes that nothing was wrong
// with.
func (c *Client) send(ctx context.Context, req *request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, retryIn, err := c.sendOnce(ctx, req)
		if err == nil || retryIn < 0 || attempt >= c.maxRetries {
			return resp, err
		}
		if !c.sleep(ctx, min(retryIn, maxRetryWait)) {
			// The caller gave up: what the server said is the answer.
			return nil, err
		}
	}
}

// maxRetryWait caps a server's Retry-After, so that a bogus one cannot park
// a request for hours.
const maxRetryWait = time.Minute

// sendOnce performs req once. For a refusal that may be retried it also
// returns how long the server asked to wait, and -1 otherwise.
func (c *Client) sendOnce(ctx context.Context, req *request) (*http.Response, time.Duration, error) {
	if c.limiter != nil {
		if err := c.limiter.Wait(ctx); err != nil {
			return nil, -1, fmt.Errorf("%s %s: rate limiter: %w", req.verb, req.path, err)
		}
	}
	u := c.url(req)
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.verb, u, body)
	if err != nil {
		return nil, -1, fmt.Errorf("%s %s: %w", req.verb, u, err)
	}
	hr.Header.Set("User-Agent", c.userAgent)
	if req.accept != "" {
		hr.Header.Set("Accept", req.accept)
	}
	if req.contentType != "" {
		hr.Header.Set("Content-Type", req.contentType)
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, -1, fmt.Errorf("%s %s: %w", req.verb, u, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, -1, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return nil, retryDelay(resp), newStatusError(req.verb, u, resp.StatusCode, resp.Header, b)
}

// retryDelay is how long a refused request should wait before it is sent
// again, or -1 when it should not be: only a 429 or a 5xx that carries a
// Retry-After in seconds says that the server did not act on it.
func retryDelay(resp *http.Response) time.Duration {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
		return -1
	}
	s, ok := retryAfterSeconds(resp.Header)
	if !ok {
		return -1
	}
	return time.Duration(s) * time.Second
}
