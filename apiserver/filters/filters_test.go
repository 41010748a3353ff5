package filters

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo answers 200 with the user it was given and the body it read.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	u, _ := UserFrom(r.Context())
	fmt.Fprintf(w, "user=%s groups=%s auth=%q body=%d", u.Name, strings.Join(u.Groups, ","), r.Header.Get("Authorization"), len(body))
})

// decodeStatus checks that rec holds a Status JSON with the given code and
// reason.
func checkStatus(t *testing.T, code int, header http.Header, body []byte, wantCode int, wantReason metav1.StatusReason) {
	t.Helper()
	if code != wantCode {
		t.Fatalf("code %d, want %d; body %s", code, wantCode, body)
	}
	if ct := header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("body is not a Status: %v: %s", err, body)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure || st.Code != int32(wantCode) || st.Reason != wantReason {
		t.Errorf("Status %+v, want code %d reason %s", st, wantCode, wantReason)
	}
}

// value reads a counter or gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	t.Fatalf("metric %v is neither a counter nor a gauge", m.Desc())
	return 0
}

// count returns how many series c holds.
func count(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

func testTokens(t *testing.T) *TokenFile {
	t.Helper()
	tf, err := ParseTokenFile(strings.NewReader("good-token,alice,1001,\"dev,ops\"\nother,bob,1002\n"))
	if err != nil {
		t.Fatal(err)
	}
	return tf
}

func TestAuthentication(t *testing.T) {
	h := Chain(echo, Options{Authenticator: testTokens(t)})
	tests := []struct {
		name, method, path, auth string
		wantCode                 int
		wantBody                 string
	}{
		{name: "valid token", method: "GET", path: "/api/v1/pods", auth: "Bearer good-token", wantCode: 200,
			wantBody: `user=alice groups=dev,ops,system:authenticated auth="" body=0`},
		{name: "scheme is case-insensitive", method: "GET", path: "/api/v1/pods", auth: "bearer other", wantCode: 200,
			wantBody: `user=bob groups=system:authenticated auth="" body=0`},
		{name: "no token on a resource", method: "GET", path: "/api/v1/pods", wantCode: 401},
		{name: "no token on discovery", method: "GET", path: "/apis", wantCode: 401},
		{name: "no token on metrics", method: "GET", path: "/metrics", wantCode: 401},
		{name: "wrong token", method: "GET", path: "/api/v1/pods", auth: "Bearer bad", wantCode: 401},
		{name: "empty token", method: "GET", path: "/api/v1/pods", auth: "Bearer ", wantCode: 401},
		{name: "basic auth", method: "GET", path: "/api/v1/pods", auth: "Basic Z29vZC10b2tlbg==", wantCode: 401},
		{name: "anonymous healthz", method: "GET", path: "/healthz", wantCode: 200,
			wantBody: `user=system:anonymous groups=system:unauthenticated auth="" body=0`},
		{name: "anonymous readyz check", method: "GET", path: "/readyz/etcd", wantCode: 200,
			wantBody: `user=system:anonymous groups=system:unauthenticated auth="" body=0`},
		{name: "anonymous version", method: "GET", path: "/version", wantCode: 200,
			wantBody: `user=system:anonymous groups=system:unauthenticated auth="" body=0`},
		{name: "anonymous write to a public path", method: "POST", path: "/healthz", wantCode: 401},
		{name: "wrong token on healthz is not downgraded", method: "GET", path: "/healthz", auth: "Bearer bad", wantCode: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if tt.wantCode == 401 {
				checkStatus(t, rec.Code, rec.Header(), rec.Body.Bytes(), 401, metav1.StatusReasonUnauthorized)
				return
			}
			if rec.Code != tt.wantCode || rec.Body.String() != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestParseTokenFile(t *testing.T) {
	tests := []struct {
		name, in string
		token    string
		want     User
		wantErr  string
	}{
		{name: "groups", in: "t1,alice,1,\"a,b , c\"\n", token: "t1", want: User{Name: "alice", UID: "1", Groups: []string{"a", "b", "c"}}},
		{name: "no groups, blank lines, spaces", in: "\n\n t2, bob , 2\n\n", token: "t2", want: User{Name: "bob", UID: "2"}},
		{name: "two lines", in: "t1,alice,1\nt2,bob,2\n", token: "t2", want: User{Name: "bob", UID: "2"}},
		{name: "too few fields", in: "t1,alice\n", wantErr: "line 1"},
		{name: "empty token", in: "t1,alice,1\n,bob,2\n", wantErr: "line 2"},
		{name: "empty user", in: "t1,,1\n", wantErr: "empty token or user"},
		{name: "duplicate token", in: "t1,alice,1\nt1,bob,2\n", wantErr: "duplicate"},
		{name: "bad quoting", in: "t1,alice,1,\"a\n", wantErr: "token file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf, err := ParseTokenFile(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, ok := tf.AuthenticateToken(tt.token)
			if !ok || got.Name != tt.want.Name || got.UID != tt.want.UID || strings.Join(got.Groups, "|") != strings.Join(tt.want.Groups, "|") {
				t.Errorf("AuthenticateToken(%q) = %+v, %v; want %+v", tt.token, got, ok, tt.want)
			}
			if _, ok := tf.AuthenticateToken("nope"); ok {
				t.Error("unknown token authenticated")
			}
		})
	}
	var zero TokenFile
	if _, ok := zero.AuthenticateToken(""); ok {
		t.Error("zero TokenFile authenticated the empty token")
	}
}

func TestMaxRequestBody(t *testing.T) {
	const limit = 16
	tests := []struct {
		name string
		body io.Reader
		// length overrides the request's Content-Length (-1: unknown,
		// chunked).
		length   int64
		wantCode int
		wantBody string
	}{
		{name: "no body", wantCode: 200, wantBody: "body=0"},
		{name: "at the limit", body: strings.NewReader(strings.Repeat("x", limit)), length: limit, wantCode: 200, wantBody: "body=16"},
		{name: "declared too large", body: strings.NewReader(strings.Repeat("x", limit+1)), length: limit + 1, wantCode: 413},
		{name: "chunked within", body: strings.NewReader("abc"), length: -1, wantCode: 200, wantBody: "body=3"},
		{name: "chunked too large", body: strings.NewReader(strings.Repeat("x", 10*limit)), length: -1, wantCode: 413},
	}
	h := WithMaxRequestBody(echo, limit)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/api/v1/namespaces/default/pods", tt.body)
			if tt.body != nil {
				req.ContentLength = tt.length
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if tt.wantCode == 413 {
				checkStatus(t, rec.Code, rec.Header(), rec.Body.Bytes(), 413, metav1.StatusReasonRequestEntityTooLarge)
				return
			}
			if rec.Code != tt.wantCode || !strings.HasSuffix(rec.Body.String(), tt.wantBody) {
				t.Errorf("got %d %q, want %d ...%q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
		})
	}
}

// TestMaxRequestBodyDefault sends a body over 3 MiB through a real server
// with the zero Options.
func TestMaxRequestBodyDefault(t *testing.T) {
	srv := httptest.NewServer(Chain(echo, Options{}))
	defer srv.Close()
	for _, tt := range []struct {
		size     int
		wantCode int
	}{{DefaultMaxRequestBodyBytes, 200}, {DefaultMaxRequestBodyBytes + 1, 413}} {
		resp, err := http.Post(srv.URL+"/api/v1/namespaces", "application/json", bytes.NewReader(make([]byte, tt.size)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if tt.wantCode == 413 {
			checkStatus(t, resp.StatusCode, resp.Header, body, 413, metav1.StatusReasonRequestEntityTooLarge)
		} else if resp.StatusCode != tt.wantCode {
			t.Errorf("size %d: code %d", tt.size, resp.StatusCode)
		}
	}
	srv.Client().CloseIdleConnections()
}

// blocker is a handler that holds each request until released, reporting
// when a request has entered it.
type blocker struct {
	entered chan string
	release chan struct{}
}

func newBlocker() *blocker {
	return &blocker{entered: make(chan string, 16), release: make(chan struct{})}
}

func (b *blocker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.entered <- r.Method + " " + r.URL.RequestURI()
	<-b.release
	io.WriteString(w, "done")
}

func TestMaxInFlight(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b := newBlocker()
	h := Chain(b, Options{MaxRequestsInFlight: 1, MaxMutatingRequestsInFlight: 1, Metrics: m})

	// Fill the one read-only and the one mutating slot.
	done := make(chan *httptest.ResponseRecorder, 8)
	serve := func(method, target string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
		done <- rec
	}
	go serve("GET", "/api/v1/pods")
	go serve("POST", "/api/v1/namespaces/default/pods")
	<-b.entered
	<-b.entered
	if got := value(t, m.inflight.WithLabelValues(kindReadOnly)); got != 1 {
		t.Errorf("readOnly in flight = %v, want 1", got)
	}
	if got := value(t, m.inflight.WithLabelValues(kindMutating)); got != 1 {
		t.Errorf("mutating in flight = %v, want 1", got)
	}

	tests := []struct {
		name, method, target string
		want429              bool
	}{
		{name: "read over the cap", method: "GET", target: "/api/v1/namespaces/default/pods/x", want429: true},
		{name: "write over the cap", method: "DELETE", target: "/api/v1/namespaces/default/pods/x", want429: true},
		{name: "non-resource read over the cap", method: "GET", target: "/healthz", want429: true},
		{name: "watch is exempt", method: "GET", target: "/api/v1/pods?watch=true"},
		{name: "legacy watch path is exempt", method: "GET", target: "/api/v1/watch/pods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.want429 {
				go serve(tt.method, tt.target)
				if got := <-b.entered; got != tt.method+" "+tt.target {
					t.Fatalf("entered %q", got)
				}
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.target, nil))
			checkStatus(t, rec.Code, rec.Header(), rec.Body.Bytes(), 429, metav1.StatusReasonTooManyRequests)
			if ra := rec.Header().Get("Retry-After"); ra != "1" {
				t.Errorf("Retry-After %q, want 1", ra)
			}
		})
	}
	if got := value(t, m.longRunning.WithLabelValues("WATCH", "", "v1", "pods", "")); got != 2 {
		t.Errorf("open watches = %v, want 2", got)
	}
	close(b.release)
	for range 4 {
		if rec := <-done; rec.Code != 200 {
			t.Errorf("held request ended %d", rec.Code)
		}
	}
	for _, kind := range []string{kindReadOnly, kindMutating} {
		if got := value(t, m.inflight.WithLabelValues(kind)); got != 0 {
			t.Errorf("%s in flight after release = %v, want 0", kind, got)
		}
	}
	if got := value(t, m.longRunning.WithLabelValues("WATCH", "", "v1", "pods", "")); got != 0 {
		t.Errorf("open watches after release = %v, want 0", got)
	}
	if got := value(t, m.requests.WithLabelValues("GET", "", "v1", "pods", "", "429")); got != 1 {
		t.Errorf("429s counted = %v, want 1", got)
	}
	// A freed slot serves again.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/pods", nil))
	if rec.Code != 200 {
		t.Errorf("after release: %d", rec.Code)
	}
}

func TestPanicRecovery(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		// wantStatus: a 500 Status; otherwise the connection is aborted.
		wantStatus bool
	}{
		{name: "panic before writing", wantStatus: true, handler: func(http.ResponseWriter, *http.Request) { panic("boom") }},
		{name: "panic with an error", wantStatus: true, handler: func(http.ResponseWriter, *http.Request) { panic(errors.New("boom")) }},
		{name: "panic after writing", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "partial")
			http.NewResponseController(w).Flush()
			panic("boom")
		}},
		{name: "ErrAbortHandler passes through", handler: func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(Chain(tt.handler, Options{Logger: log, Metrics: m}))
			// net/http logs aborted handlers; keep the test output clean.
			srv.Config.ErrorLog = nil
			srv.Start()
			defer srv.Close()
			resp, err := srv.Client().Get(srv.URL + "/api/v1/pods")
			if tt.wantStatus {
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				checkStatus(t, resp.StatusCode, resp.Header, body, 500, metav1.StatusReasonInternalError)
				if !strings.Contains(logs.String(), "panic serving request") || !strings.Contains(logs.String(), "boom") {
					t.Errorf("panic not logged: %s", logs.String())
				}
				if got := value(t, m.requests.WithLabelValues("LIST", "", "v1", "pods", "", "500")); got != 1 {
					t.Errorf("500s counted = %v, want 1", got)
				}
			} else {
				// The client must not see a complete response.
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				if err == nil {
					t.Fatal("aborted response read without error")
				}
			}
			srv.Client().CloseIdleConnections()
		})
	}
}

func TestInstrumentation(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := Chain(echo, Options{Authenticator: testTokens(t), Metrics: m, Logger: log})
	requests := []struct {
		method, target, token string
		labels                []string // verb group version resource subresource code
	}{
		{"GET", "/api/v1/namespaces/default/pods", "good-token", []string{"LIST", "", "v1", "pods", "", "200"}},
		{"GET", "/api/v1/namespaces/default/pods", "good-token", []string{"LIST", "", "v1", "pods", "", "200"}},
		{"GET", "/apis/apps/v1/namespaces/default/deployments/web/scale", "good-token", []string{"GET", "apps", "v1", "deployments", "scale", "200"}},
		{"PUT", "/api/v1/namespaces/ns1/status", "good-token", []string{"PUT", "", "v1", "namespaces", "status", "200"}},
		{"GET", "/version", "", []string{"GET", "", "", "", "", "200"}},
		// Unauthenticated: the resource from the path is not recorded.
		{"GET", "/apis/evil.example/v1/random-1234", "", []string{"LIST", "", "", "", "", "401"}},
	}
	for _, r := range requests {
		req := httptest.NewRequest(r.method, r.target, nil)
		if r.token != "" {
			req.Header.Set("Authorization", "Bearer "+r.token)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	tests := []struct {
		labels []string
		want   float64
	}{
		{[]string{"LIST", "", "v1", "pods", "", "200"}, 2},
		{[]string{"GET", "apps", "v1", "deployments", "scale", "200"}, 1},
		{[]string{"PUT", "", "v1", "namespaces", "status", "200"}, 1},
		{[]string{"GET", "", "", "", "", "200"}, 1},
		{[]string{"LIST", "", "", "", "", "401"}, 1},
	}
	for _, tt := range tests {
		if got := value(t, m.requests.WithLabelValues(tt.labels...)); got != tt.want {
			t.Errorf("apiserver_request_total%v = %v, want %v", tt.labels, got, tt.want)
		}
	}
	if n := count(m.requests); n != len(tests) {
		t.Errorf("%d request series, want %d", n, len(tests))
	}
	hist, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var samples uint64
	for _, mf := range hist {
		if mf.GetName() == "apiserver_request_duration_seconds" {
			for _, metric := range mf.GetMetric() {
				samples += metric.GetHistogram().GetSampleCount()
			}
		}
	}
	if samples != uint64(len(requests)) {
		t.Errorf("duration samples %d, want %d", samples, len(requests))
	}

	// One debug record per request, with what an operator needs.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != len(requests) {
		t.Fatalf("%d log records, want %d:\n%s", len(lines), len(requests), logs.String())
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"msg": "request", "level": "DEBUG", "method": "GET", "uri": "/api/v1/namespaces/default/pods",
		"verb": "list", "resource": "pods", "code": float64(200), "user": "alice"} {
		if first[k] != want {
			t.Errorf("log %s = %v, want %v", k, first[k], want)
		}
	}
}

func TestParseRequestInfo(t *testing.T) {
	tests := []struct {
		method, target string
		want           RequestInfo
	}{
		{"GET", "/api/v1/pods", RequestInfo{IsResourceRequest: true, Verb: "list", APIVersion: "v1", Resource: "pods"}},
		{"GET", "/api/v1/pods?watch=1", RequestInfo{IsResourceRequest: true, Verb: "watch", APIVersion: "v1", Resource: "pods"}},
		{"GET", "/api/v1/watch/namespaces/ns/pods", RequestInfo{IsResourceRequest: true, Verb: "watch", APIVersion: "v1", Namespace: "ns", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods/p", RequestInfo{IsResourceRequest: true, Verb: "get", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "p"}},
		{"PUT", "/api/v1/namespaces/ns/pods/p/status", RequestInfo{IsResourceRequest: true, Verb: "update", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "p", Subresource: "status"}},
		{"GET", "/api/v1/namespaces/ns", RequestInfo{IsResourceRequest: true, Verb: "get", APIVersion: "v1", Namespace: "ns", Resource: "namespaces", Name: "ns"}},
		{"PUT", "/api/v1/namespaces/ns/finalize", RequestInfo{IsResourceRequest: true, Verb: "update", APIVersion: "v1", Namespace: "ns", Resource: "namespaces", Name: "ns", Subresource: "finalize"}},
		{"POST", "/apis/apps/v1/namespaces/ns/deployments", RequestInfo{IsResourceRequest: true, Verb: "create", APIGroup: "apps", APIVersion: "v1", Namespace: "ns", Resource: "deployments"}},
		{"PATCH", "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/f", RequestInfo{IsResourceRequest: true, Verb: "patch", APIGroup: "samplecontroller.k8s.io", APIVersion: "v1alpha1", Namespace: "ns", Resource: "foos", Name: "f"}},
		{"DELETE", "/api/v1/namespaces/ns/pods", RequestInfo{IsResourceRequest: true, Verb: "deletecollection", APIVersion: "v1", Namespace: "ns", Resource: "pods"}},
		{"DELETE", "/api/v1/namespaces/ns/pods/p", RequestInfo{IsResourceRequest: true, Verb: "delete", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "p"}},
		{"GET", "/api/v1", RequestInfo{Verb: "get"}},
		{"GET", "/apis/apps/v1", RequestInfo{Verb: "get"}},
		{"GET", "/healthz", RequestInfo{Verb: "get"}},
		{"POST", "/api/v1/watch", RequestInfo{Verb: "post"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.target, nil)
			tt.want.Path = req.URL.Path
			if got := ParseRequestInfo(req); got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestWatchStreamsAndEndsOnShutdown runs a watch-like streaming handler
// behind the whole chain on a real server: events are flushed through the
// filters as they are written, and ending Options.Shutdown ends the watch
// while an ordinary request in flight is left alone.
func TestWatchStreamsAndEndsOnShutdown(t *testing.T) {
	shutdown, stop := context.WithCancel(context.Background())
	defer stop()
	listEntered, listRelease := make(chan struct{}), make(chan struct{})
	watchEnded := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			close(listEntered)
			<-listRelease
			if err := r.Context().Err(); err != nil {
				t.Errorf("list context ended: %v", err)
			}
			io.WriteString(w, "list")
			return
		}
		io.WriteString(w, "event-1\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		watchEnded <- context.Cause(r.Context())
	})
	srv := httptest.NewServer(Chain(h, Options{Shutdown: shutdown, MaxRequestsInFlight: 1}))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	resp, err := srv.Client().Get(srv.URL + "/api/v1/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event-1\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	listDone := make(chan string)
	go func() {
		resp, err := srv.Client().Get(srv.URL + "/api/v1/pods")
		if err != nil {
			listDone <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		listDone <- string(body)
	}()
	<-listEntered
	stop()
	if err := <-watchEnded; !errors.Is(err, errServerShutdown) {
		t.Errorf("watch ended with %v, want the shutdown cause", err)
	}
	close(listRelease)
	if got := <-listDone; got != "list" {
		t.Errorf("list got %q", got)
	}
}

// TestStalledUploadsHoldNoSlot: clients that announce a body and never
// send it hold no in-flight slot (the body is read before the request takes
// one), so a write from another client is served while they wait; each of
// them is answered 408 once the request's deadline passes, and the
// connection is closed.
func TestStalledUploadsHoldNoSlot(t *testing.T) {
	const stalled = 20
	srv := httptest.NewServer(Chain(echo, Options{
		MaxMutatingRequestsInFlight: 2,
		RequestTimeout:              time.Second,
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	answers := make(chan string, stalled)
	var wg sync.WaitGroup
	for range stalled {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := fmt.Fprintf(conn, "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				answers <- err.Error()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- fmt.Sprintf("%d close=%v %s", resp.StatusCode, resp.Close, body)
		})
	}

	resp, err := http.Post(srv.URL+"/api/v1/namespaces/default/configmaps", "application/json", strings.NewReader(`{"metadata":{"name":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("write beside %d stalled uploads: %d %s", stalled, resp.StatusCode, body)
	}

	wg.Wait()
	close(answers)
	for a := range answers {
		if !strings.HasPrefix(a, "408 close=true") || !strings.Contains(a, `"reason":"Timeout"`) {
			t.Errorf("stalled upload answered %q, want 408 Timeout and the connection closed", a)
		}
	}
}

// TestRequestTimeout: a request's context ends at the server's timeout or
// at its own shorter timeout parameter; watches are not bounded; a
// timeout that is not a duration is a 400.
func TestRequestTimeout(t *testing.T) {
	deadlineIn := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := r.Context().Deadline()
		if !ok {
			fmt.Fprint(w, "none")
			return
		}
		fmt.Fprint(w, time.Until(d).Round(time.Minute))
	})
	h := Chain(deadlineIn, Options{RequestTimeout: 10 * time.Minute})
	for _, tc := range []struct {
		name, target string
		code         int
		want         string
	}{
		{"default", "/api/v1/namespaces/default/pods", 200, "10m0s"},
		{"shorter parameter", "/api/v1/namespaces/default/pods?timeout=2m", 200, "2m0s"},
		{"longer parameter", "/api/v1/namespaces/default/pods?timeout=20m", 200, "10m0s"},
		{"watch", "/api/v1/namespaces/default/pods?watch=true", 200, "none"},
		{"bad parameter", "/api/v1/namespaces/default/pods?timeout=soon", 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.target, nil))
			if rec.Code != tc.code || tc.want != "" && rec.Body.String() != tc.want {
				t.Errorf("%s: %d %q, want %d %q", tc.target, rec.Code, rec.Body.String(), tc.code, tc.want)
			}
		})
	}
}

// stalledAnswer is what a client that announced a body and never sent it
// got: the response's code, whether the server said it closes the
// connection and then did, and how long after its request that was.
type stalledAnswer struct {
	kind   string
	code   int
	closed bool
	after  time.Duration
	err    error
}

// stall sends head (a request's header, Content-Length: 100 and no body)
// on a new connection to addr and reports its answer on answers.
func stall(t *testing.T, wg *sync.WaitGroup, addr, kind, head string, answers chan<- stalledAnswer) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	wg.Go(func() {
		a := stalledAnswer{kind: kind}
		defer func() { answers <- a }()
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			a.err = err
			return
		}
		a.after = time.Since(sent)
		a.code = resp.StatusCode
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// Nothing more comes: the server closed the connection.
		_, err = br.ReadByte()
		a.closed = resp.Close && errors.Is(err, io.EOF)
	})
}

// TestStalledBodiesAnsweredAtDeadline: a thousand clients that announce a
// body and never send it, most of them without credentials or with bad
// ones (refused before the body is read, which is why net/http would wait
// for the body before it writes the 401), are each answered at the
// request deadline and their connections closed, while an authenticated
// client's writes are served at once; a client without credentials that
// does send its body is answered at once on a connection it may reuse.
func TestStalledBodiesAnsweredAtDeadline(t *testing.T) {
	const (
		stalled = 1000
		timeout = 2 * time.Second
	)
	srv := httptest.NewServer(Chain(echo, Options{
		Authenticator:               testTokens(t),
		MaxMutatingRequestsInFlight: 2,
		RequestTimeout:              timeout,
	}))
	t.Cleanup(srv.Close) // after the clients' connections close
	addr := strings.TrimPrefix(srv.URL, "http://")

	kinds := []struct {
		name, head string
		code       int
	}{
		{"no token", "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", 401},
		{"wrong token", "PUT /api/v1/namespaces/default/configmaps/a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer bad\r\nContent-Length: 100\r\n\r\n", 401},
		{"watch without a token", "GET /api/v1/pods?watch=true HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", 401},
		{"bad timeout parameter", "POST /api/v1/namespaces/default/configmaps?timeout=soon HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good-token\r\nContent-Length: 100\r\n\r\n", 400},
		{"authenticated", "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good-token\r\nContent-Length: 100\r\n\r\n", 408},
	}
	wantCode := map[string]int{}
	answers := make(chan stalledAnswer, stalled)
	var wg sync.WaitGroup
	for i := range stalled {
		k := kinds[i%len(kinds)]
		wantCode[k.name] = k.code
		stall(t, &wg, addr, k.name, k.head, answers)
	}

	// Writes are served beside them, each well before the deadline.
	for i := range 5 {
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/namespaces/default/configmaps", strings.NewReader(`{"metadata":{"name":"x"}}`))
		req.Header.Set("Authorization", "Bearer good-token")
		start := time.Now()
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if took := time.Since(start); resp.StatusCode != http.StatusOK || took >= timeout {
			t.Fatalf("write %d beside %d stalled bodies: %d %s after %v", i, stalled, resp.StatusCode, body, took)
		}
	}

	// Without a token, a body sent is answered at once, and the
	// connection carries the next request.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for i := range 2 {
		start := time.Now()
		if _, err := io.WriteString(conn, "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
			t.Fatalf("request %d on one connection: %v", i, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on one connection: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if took := time.Since(start); resp.StatusCode != http.StatusUnauthorized || resp.Close || took >= timeout {
			t.Fatalf("request %d with a body and no token: %d close=%v after %v, want 401 at once, connection kept", i, resp.StatusCode, resp.Close, took)
		}
	}

	wg.Wait()
	close(answers)
	var latest time.Duration
	for a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("%s: %v", a.kind, a.err)
		case a.code != wantCode[a.kind] || !a.closed:
			t.Errorf("%s: %d closed=%v, want %d and the connection closed", a.kind, a.code, a.closed, wantCode[a.kind])
		case a.after < timeout-100*time.Millisecond || a.after > timeout+10*time.Second:
			t.Errorf("%s: answered after %v, want at the %v deadline", a.kind, a.after, timeout)
		}
		latest = max(latest, a.after)
	}
	t.Logf("%d stalled bodies answered and closed, the last %v after its request (deadline %v)", stalled, latest, timeout)
}
