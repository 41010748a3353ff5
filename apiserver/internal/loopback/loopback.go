// Package loopback is the API server's client of itself, as kube-apiserver
// has one (its "loopback client"): a client-go rest.Config whose transport
// hands each request to the server's own http.Handler in the same process,
// with no listener, no TLS and no network, authenticated as kube-apiserver
// authenticates its own requests (user system:apiserver in group
// system:masters).
//
// A request other than a watch is served to completion into a buffer
// before its answer is returned; a watch is served by a goroutine that
// streams into the response body until the client closes it, the request's
// context ends, or the transport is closed.
package loopback

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// Identity of the loopback client, as kube-apiserver's
// (k8s.io/apiserver/pkg/authentication/user.APIServerUser and
// SystemPrivilegedGroup).
const (
	User  = "system:apiserver"
	Group = "system:masters"
)

// host is the URL the loopback client addresses; no name is ever resolved.
const host = "http://loopback.apiserver.local"

// ErrClosed is the error of a request made after Close.
var ErrClosed = errors.New("loopback: transport closed")

// Transport serves requests with an http.Handler in-process. It is an
// http.RoundTripper; make one with New.
type Transport struct {
	handler http.Handler
	token   string

	// ctx ends at Close and cancels every request being served.
	ctx    context.Context
	cancel context.CancelFunc
	// streams counts the watches being served.
	streams sync.WaitGroup
	mu      sync.Mutex
	closed  bool
}

// New returns a transport serving requests with h, and the bearer token
// its Config sends (see Token).
func New(h http.Handler) (*Transport, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("loopback: token: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Transport{handler: h, token: hex.EncodeToString(b), ctx: ctx, cancel: cancel}, nil
}

// Token is the random bearer token the loopback client sends. The server
// recognises it (Authenticates) and serves its requests as User.
func (t *Transport) Token() string { return t.token }

// Authenticates reports whether token is the loopback client's.
func (t *Transport) Authenticates(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), []byte(t.token)) == 1
}

// Config returns a client-go configuration for clients of the handler
// through t: JSON, no client-side rate limit (kube-apiserver's loopback
// client is not throttled in practice either: its requests are its own),
// and the loopback token.
func (t *Transport) Config() *rest.Config {
	return &rest.Config{
		Host:          host,
		BearerToken:   t.token,
		Transport:     t,
		QPS:           -1,
		ContentConfig: rest.ContentConfig{ContentType: "application/json"},
		// kube-apiserver's own writes are recorded in managedFields
		// under the User-Agent's first part: "kube-apiserver".
		UserAgent: "kube-apiserver/loopback",
	}
}

// Close cancels the requests being served, refuses new ones and waits for
// the watches being served to end.
func (t *Transport) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.streams.Wait()
}

// RoundTrip serves req with the handler.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.ctx, cancel)
	sreq := serverRequest(ctx, req)
	if !isWatch(req) {
		defer stop()
		defer cancel()
		if err := t.begin(false); err != nil {
			return nil, err
		}
		w := &bufferWriter{answerHeader: answerHeader{header: http.Header{}}}
		t.handler.ServeHTTP(w, sreq)
		return w.answer(req), nil
	}
	if err := t.begin(true); err != nil {
		stop()
		cancel()
		return nil, err
	}
	pr, pw := io.Pipe()
	w := &streamWriter{answerHeader: answerHeader{header: http.Header{}}, pw: pw, committed: make(chan struct{})}
	w.buf = bufio.NewWriter(pw)
	// A request ended by its client or by Close unblocks a handler
	// writing to a reader that no longer reads.
	unblock := context.AfterFunc(ctx, func() { _ = pr.CloseWithError(context.Canceled) })
	go func() {
		defer t.streams.Done()
		t.handler.ServeHTTP(w, sreq)
		w.finish(ctx)
		unblock()
		cancel()
		stop()
	}()
	select {
	case <-w.committed:
	case <-ctx.Done():
		// The handler ends with the context; its answer, if any, is not
		// waited for.
		_ = pr.CloseWithError(ctx.Err())
		return nil, fmt.Errorf("loopback: %s %s: %w", req.Method, req.URL.Path, context.Cause(ctx))
	}
	return w.answerHeader.response(req, &streamBody{pr: pr, cancel: cancel}, -1), nil
}

// begin admits a request unless the transport is closed; a watch is
// counted until its goroutine ends.
func (t *Transport) begin(stream bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if stream {
		t.streams.Add(1)
	}
	return nil
}

// isWatch reports whether req asks for a stream of watch events: a
// watch=true query, or the legacy /api/v1/watch/... and
// /apis/<group>/<version>/watch/... paths.
func isWatch(req *http.Request) bool {
	switch req.URL.Query().Get("watch") {
	case "true", "1":
		return true
	}
	p := strings.Split(strings.TrimPrefix(req.URL.Path, "/"), "/")
	switch {
	case len(p) > 2 && p[0] == "api":
		return p[2] == "watch"
	case len(p) > 3 && p[0] == "apis":
		return p[3] == "watch"
	}
	return false
}

// serverRequest is req as a server receives it.
func serverRequest(ctx context.Context, req *http.Request) *http.Request {
	sreq := req.Clone(ctx)
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "127.0.0.1:0"
	sreq.Host = req.URL.Host
	sreq.Proto, sreq.ProtoMajor, sreq.ProtoMinor = "HTTP/1.1", 1, 1
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	return sreq
}

// answerHeader is what a writer holds of its answer's head: the header
// being built, and the status code and header WriteHeader committed.
type answerHeader struct {
	header http.Header
	sent   http.Header
	code   int
}

func (h *answerHeader) Header() http.Header { return h.header }

// commit commits code and the header, the first time only (1xx codes are
// not answers), and reports whether it did.
func (h *answerHeader) commit(code int) bool {
	if h.code != 0 || code < 200 {
		return false
	}
	h.code = code
	h.sent = h.header.Clone()
	return true
}

// response is the head of the answer, around body.
func (h *answerHeader) response(req *http.Request, body io.ReadCloser, length int64) *http.Response {
	return &http.Response{
		Status:        strconv.Itoa(h.code) + " " + http.StatusText(h.code),
		StatusCode:    h.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h.sent,
		Body:          body,
		ContentLength: length,
		Request:       req,
	}
}

// bufferWriter collects a whole answer.
type bufferWriter struct {
	answerHeader
	body bytes.Buffer
}

func (w *bufferWriter) WriteHeader(code int) { w.commit(code) }

func (w *bufferWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.body.Write(p)
}

// Flush does nothing: the answer is returned whole.
func (w *bufferWriter) Flush() {}

func (w *bufferWriter) answer(req *http.Request) *http.Response {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.answerHeader.response(req, io.NopCloser(bytes.NewReader(w.body.Bytes())), int64(w.body.Len()))
}

// streamWriter writes an answer into a pipe the client reads from.
type streamWriter struct {
	answerHeader
	committed chan struct{}
	pw        *io.PipeWriter
	buf       *bufio.Writer
}

func (w *streamWriter) WriteHeader(code int) {
	if w.commit(code) {
		close(w.committed)
	}
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.buf.Write(p)
}

// Flush hands what was written to the reader; it blocks until read.
func (w *streamWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush, reporting a reader that has gone.
func (w *streamWriter) FlushError() error {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.buf.Flush()
}

// finish ends the answer once the handler has returned: a clean end of
// the body only when the request was not cut short (by its client or by
// Close), whichever of the two closes of the pipe comes first.
func (w *streamWriter) finish(ctx context.Context) {
	err := w.FlushError()
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	_ = w.pw.CloseWithError(err)
}

// streamBody is a streamed answer; closing it ends the handler's request.
type streamBody struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
}

func (b *streamBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *streamBody) Close() error {
	b.cancel()
	return b.pr.Close()
}
