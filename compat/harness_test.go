package compat_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/apiserver/serve"
	"github.com/listwatch/listwatch/storage"
)

const (
	mediaJSON     = "application/json"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
	// waitTimeout bounds every wait for the client to catch up with the
	// server; it is generous because CI runs with -race on two loaded cores.
	waitTimeout = 20 * time.Second
)

// server is a listwatch API server on 127.0.0.1 as `listwatch apiserver`
// serves it (package serve: bearer-token authentication, RBAC, in-flight
// caps), over HTTPS with HTTP/2 as client-go meets kube-apiserver.
type server struct {
	t     *testing.T
	store storage.Interface
	api   *apiserver.Server
	srv   *serve.Server
	token string
	log   *requestLog
}

// serverOptions tune a test server.
type serverOptions struct {
	watchCache apiserver.WatchCacheConfig
}

func startServer(t *testing.T, b backend, o serverOptions) *server {
	t.Helper()
	st := b.new(t)
	log := &requestLog{}
	srv, err := serve.New(serve.Config{
		API: apiserver.Config{Storage: st, WatchCache: o.watchCache,
			// No controller-manager makes the default service accounts: as
			// kube's integration tests and envtest, ServiceAccount admission
			// is off on this bare API server.
			DisableAdmissionPlugins: []string{"ServiceAccount"}},
		CertDir:   t.TempDir(),
		AdminUser: "compat",
		Filters: filters.Options{
			MaxRequestsInFlight:         filters.DefaultMaxRequestsInFlight,
			MaxMutatingRequestsInFlight: filters.DefaultMaxMutatingRequestsInFlight,
			InFlightQueue:               filters.PriorityAndFairnessQueue,
		},
		WrapRoutes: log.wrap,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serving: %v", err)
		}
	})
	// The namespace default, among what kube-apiserver makes at start.
	if err := srv.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &server{t: t, store: st, api: srv.API, srv: srv, token: srv.Token(), log: log}
}

// restConfig is what a kubeconfig for the server would give client-go:
// its URL, its CA and the bearer token. Client-side rate limiting is off so
// that the tests measure the server, not client-go's token bucket.
func (s *server) restConfig(contentType string) *rest.Config {
	cfg := s.srv.RESTConfig()
	cfg.ContentConfig = rest.ContentConfig{ContentType: contentType, AcceptContentTypes: contentType}
	cfg.UserAgent = "listwatch-compat"
	return cfg
}

func (s *server) clientset(contentType string) kubernetes.Interface {
	s.t.Helper()
	cs, err := kubernetes.NewForConfig(s.restConfig(contentType))
	if err != nil {
		s.t.Fatal(err)
	}
	return cs
}

// truthAgent is the user agent of truthClient.
const truthAgent = "listwatch-compat-truth"

// truthClient is a JSON clientset for reading the server's state in
// comparisons, with a user agent of its own so that the request log tells
// its requests from those of the clients under test.
func (s *server) truthClient() kubernetes.Interface {
	s.t.Helper()
	cfg := s.restConfig(mediaJSON)
	cfg.UserAgent = truthAgent
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	return cs
}

// loggedRequest is one request the server received (after
// authentication) and how it answered.
type loggedRequest struct {
	Method, Path string
	Query        url.Values
	ContentType  string
	Accept       string
	Agent        string
	// Status and ResponseType are set when the response header is written.
	Status       int
	ResponseType string
}

// requestLog records the requests the API handler serves: what the client
// really sent, which client-go's own abstractions would hide.
type requestLog struct {
	mu   sync.Mutex
	reqs []*loggedRequest
	// watches end the watches in progress (see endWatches).
	watches map[*loggedRequest]context.CancelFunc
}

// endWatches ends every watch in progress on the server side, as a
// restarting or overloaded API server does; the connections stay up.
func (l *requestLog) endWatches() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, cancel := range l.watches {
		cancel()
	}
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lr := &loggedRequest{
			Method:      r.Method,
			Path:        r.URL.Path,
			Query:       r.URL.Query(),
			ContentType: r.Header.Get("Content-Type"),
			Accept:      r.Header.Get("Accept"),
			Agent:       r.Header.Get("User-Agent"),
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, lr)
		if isWatch(lr) {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			if l.watches == nil {
				l.watches = map[*loggedRequest]context.CancelFunc{}
			}
			l.watches[lr] = cancel
			defer func() {
				l.mu.Lock()
				delete(l.watches, lr)
				l.mu.Unlock()
			}()
			r = r.WithContext(ctx)
		}
		l.mu.Unlock()
		h.ServeHTTP(&loggingWriter{ResponseWriter: w, log: l, req: lr}, r)
	})
}

// matching returns copies of the logged requests for which keep is true.
func (l *requestLog) matching(keep func(*loggedRequest) bool) []loggedRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []loggedRequest
	for _, r := range l.reqs {
		if keep(r) {
			c := *r
			c.Query = maps.Clone(r.Query)
			out = append(out, c)
		}
	}
	return out
}

// loggingWriter notes the status and content type of a response. Unwrap
// lets http.ResponseController reach the real writer, which the server's
// watches need for flushing and write deadlines.
type loggingWriter struct {
	http.ResponseWriter
	log  *requestLog
	req  *loggedRequest
	once sync.Once
}

func (w *loggingWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.log.mu.Lock()
		w.req.Status, w.req.ResponseType = code, w.Header().Get("Content-Type")
		w.log.mu.Unlock()
	})
	w.ResponseWriter.WriteHeader(code)
}

func (w *loggingWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.ResponseWriter.Write(p)
}

func (w *loggingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isWatch reports whether a logged request was a watch.
func isWatch(r *loggedRequest) bool {
	v := r.Query.Get("watch")
	return r.Method == http.MethodGet && (v == "true" || v == "1")
}

// versions maps namespace/name to resourceVersion: what a cache must hold
// to agree with the server.
type versions map[string]string

func (v versions) String() string {
	keys := slices.Sorted(maps.Keys(v))
	out := ""
	for _, k := range keys {
		out += fmt.Sprintf("%s@%s ", k, v[k])
	}
	return out
}

func versionsOf[T any](objs []T) versions {
	out := versions{}
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			// Not an object: make it show in the comparison that fails.
			out[fmt.Sprintf("<%T without metadata>", o)] = err.Error()
			continue
		}
		out[m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
	}
	return out
}

// serverVersions lists a collection from the server with a consistent
// read (resourceVersion ""): the truth a client cache must converge to.
func serverVersions(ctx context.Context, t *testing.T, list func(context.Context, metav1.ListOptions) (runtime.Object, error)) versions {
	t.Helper()
	obj, err := list(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		t.Fatal(err)
	}
	return versionsOf(items)
}

// eventually polls cond until it holds or waitTimeout passes. The clients
// under test are asynchronous over a real network, so there is no event to
// wait on but the state converging.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in %v: %s", what, waitTimeout, detail)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func rc(name string, replicas int32) *corev1.ReplicationController {
	sel := map[string]string{"app": name}
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: &replicas,
			Selector: sel,
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
}

// statusCode is the HTTP code of an API error, 0 if err is not one.
func statusCode(err error) int32 {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Code
	}
	return 0
}
