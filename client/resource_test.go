package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
)

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

func somePods(n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = makePod(i, 10+i)
	}
	return pods
}

func TestListAllFollowsEveryPage(t *testing.T) {
	pods := somePods(345)
	for _, tc := range []struct {
		name    string
		json    bool
		noProto bool
	}{{"protobuf", false, false}, {"json", true, false}, {"server without protobuf", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeServer(t, pods, nil)
			fs.noProto = tc.noProto
			srv := startServer(t, fs)
			c := newTestClient(t, srv.URL, func(cfg *Config) { cfg.PreferJSON = tc.json })
			r := NewResource[*corev1.Pod](c, podsGVR, "default")
			l, err := r.ListAll(t.Context(), metav1.ListOptions{Limit: 25, LabelSelector: "app=web"})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != len(pods) || l.ResourceVersion != "100" || l.Continue != "" {
				t.Fatalf("got %d items at %q (continue %q), want %d at 100", len(l.Items), l.ResourceVersion, l.Continue, len(pods))
			}
			for i, p := range l.Items {
				if !apiequality.Semantic.DeepEqual(p, pods[i]) {
					t.Fatalf("item %d differs:\n got %+v\nwant %+v", i, p, pods[i])
				}
			}
			reqs := fs.lastRequests()
			pages := 0
			for _, req := range reqs {
				if req.URL.Query().Get("labelSelector") != "app=web" || req.URL.Query().Get("limit") != "25" {
					t.Fatalf("request %s lost its options", req.URL)
				}
				if req.URL.Query().Get("continue") != fmt.Sprint(pages*25) && pages > 0 {
					t.Fatalf("page %d asked with %s", pages+1, req.URL)
				}
				if strings.Contains(req.Header.Get("Accept"), "application/json") {
					pages++
				}
			}
			if pages != 14 {
				t.Fatalf("%d pages read, want 14 (%d requests)", pages, len(reqs))
			}
			if tc.noProto && !strings.HasPrefix(reqs[0].Header.Get("Accept"), mediaTypeProtobuf) {
				t.Fatalf("first request did not ask for protobuf: %q", reqs[0].Header.Get("Accept"))
			}
			if got := reqs[len(reqs)-1].Header.Get("User-Agent"); !strings.HasPrefix(got, "listwatch/") {
				t.Fatalf("user agent %q", got)
			}
		})
	}
}

// collect reads a watch until it ends.
func collect[T cache.Object](w cache.Watcher[T]) ([]cache.Event[T], error) {
	defer w.Stop()
	var evs []cache.Event[T]
	for {
		ev, err := w.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestWatchOverJSONAndProtobufAgree(t *testing.T) {
	hist := history(30)
	fs := newFakeServer(t, nil, hist)
	srv := startServer(t, fs)
	var got [2][]cache.Event[*corev1.Pod]
	for i, preferJSON := range []bool{false, true} {
		c := newTestClient(t, srv.URL, func(cfg *Config) { cfg.PreferJSON = preferJSON })
		w, err := NewResource[*corev1.Pod](c, podsGVR, "").Watch(t.Context(), metav1.ListOptions{ResourceVersion: "100", AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := collect(w)
		if err != io.EOF {
			t.Fatalf("server closing the stream: got %v, want io.EOF", err)
		}
		got[i] = evs
	}
	reqs := fs.lastRequests()
	if !strings.HasPrefix(reqs[0].Header.Get("Accept"), mediaTypeProtobuf) ||
		reqs[1].Header.Get("Accept") != "application/json" {
		t.Fatalf("accept headers %q, %q", reqs[0].Header.Get("Accept"), reqs[1].Header.Get("Accept"))
	}
	if q := reqs[0].URL.Query(); q.Get("watch") != "true" || q.Get("resourceVersion") != "100" || q.Get("allowWatchBookmarks") != "true" {
		t.Fatalf("watch query %s", reqs[0].URL.RawQuery)
	}
	if len(got[0]) != len(hist) || len(got[1]) != len(hist) {
		t.Fatalf("protobuf %d events, JSON %d, want %d", len(got[0]), len(got[1]), len(hist))
	}
	for i := range hist {
		p, j := got[0][i], got[1][i]
		if p.Type != hist[i].typ || j.Type != p.Type || !apiequality.Semantic.DeepEqual(p.Object, j.Object) || !apiequality.Semantic.DeepEqual(p.Object, hist[i].pod) {
			t.Fatalf("event %d: protobuf %s %+v, JSON %s %+v, recorded %s", i, p.Type, p.Object, j.Type, j.Object, hist[i].typ)
		}
	}
}

// proxy forwards TCP connections to target until closed, when it cuts them.
type proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
	target string
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(out, in); out.Close() })
		p.wg.Go(func() { io.Copy(in, out); in.Close() })
	}
}

// cut closes the listener and every connection, and waits for the copies.
func (p *proxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A watch cut mid-stream fails with an error that is not io.EOF, so the
// Reflector treats it as a broken stream and re-watches from the last
// resourceVersion it saw.
func TestWatchCutMidStreamIsAnError(t *testing.T) {
	hist := history(10)
	for _, preferJSON := range []bool{false, true} {
		t.Run(fmt.Sprint("json=", preferJSON), func(t *testing.T) {
			sent := make(chan struct{})
			release := make(chan struct{})
			fs := newFakeServer(t, nil, hist)
			srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// Half the stream, then the server stalls, mid-event.
				proto := wantsProto(r)
				frames := fs.jsonEvs
				w.Header().Set("Content-Type", "application/json")
				if proto {
					frames = fs.protoEvs
					w.Header().Set("Content-Type", mediaTypeProtobuf+";stream=watch")
				}
				for _, f := range frames[:5] {
					w.Write(f)
				}
				w.Write(frames[5][:10])
				w.(http.Flusher).Flush()
				close(sent)
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}))
			defer close(release)
			px := newProxy(t, srv.Listener.Addr().String())
			c := newTestClient(t, "http://"+px.ln.Addr().String(), func(cfg *Config) { cfg.PreferJSON = preferJSON })
			w, err := NewResource[*corev1.Pod](c, podsGVR, "").Watch(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			for i := range 5 {
				ev, err := w.Next()
				if err != nil || ev.Object.ResourceVersion != hist[i].pod.ResourceVersion {
					t.Fatalf("event %d: %v %v", i, ev.Object, err)
				}
			}
			<-sent
			px.cut()
			_, err = w.Next()
			if err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("cut stream: got %v, want an error other than io.EOF", err)
			}
			if _, again := w.Next(); again == nil {
				t.Fatal("Next after a failure succeeded")
			}
		})
	}
}

// Stop ends a blocked Next with io.EOF.
func TestWatchStopUnblocksNext(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	c := newTestClient(t, srv.URL, nil)
	w, err := NewResource[*corev1.Pod](c, podsGVR, "").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := w.Next()
		done <- err
	}()
	w.Stop()
	if err := <-done; err != io.EOF {
		t.Fatalf("Next after Stop: got %v, want io.EOF", err)
	}
	if _, err := w.Next(); err != io.EOF {
		t.Fatalf("Next after Stop: got %v, want io.EOF", err)
	}
}

func TestStatusErrors(t *testing.T) {
	status := func(code int, reason metav1.StatusReason) string {
		return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":%q,"code":%d}`, reason, code)
	}
	for _, tc := range []struct {
		name   string
		code   int
		body   string
		header map[string]string
		is     func(error) bool
		retry  time.Duration
	}{
		{"not found", 404, status(404, metav1.StatusReasonNotFound), nil, apierrors.IsNotFound, 0},
		{"conflict", 409, status(409, metav1.StatusReasonConflict), nil, apierrors.IsConflict, 0},
		{"already exists", 409, status(409, metav1.StatusReasonAlreadyExists), nil, apierrors.IsAlreadyExists, 0},
		{"expired", 410, status(410, metav1.StatusReasonExpired), nil, apierrors.IsResourceExpired, 0},
		{"gone", 410, status(410, metav1.StatusReasonGone), nil, apierrors.IsGone, 0},
		{"forbidden", 403, status(403, metav1.StatusReasonForbidden), nil, apierrors.IsForbidden, 0},
		{"unauthorized", 401, status(401, metav1.StatusReasonUnauthorized), nil, apierrors.IsUnauthorized, 0},
		{"invalid", 422, status(422, metav1.StatusReasonInvalid), nil, apierrors.IsInvalid, 0},
		{"bad request", 400, status(400, metav1.StatusReasonBadRequest), nil, apierrors.IsBadRequest, 0},
		{"too many requests", 429, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"details":{"retryAfterSeconds":7}}`, nil, apierrors.IsTooManyRequests, 7 * time.Second},
		{"too many requests, header", 429, "slow down", map[string]string{"Retry-After": "3"}, apierrors.IsTooManyRequests, 3 * time.Second},
		{"plain 404", 404, "404 page not found", nil, apierrors.IsNotFound, 0},
		{"plain 410", 410, "", nil, apierrors.IsGone, 0},
		{"plain 403 html", 403, "<html>denied</html>", nil, apierrors.IsForbidden, 0},
		{"plain 401", 401, "Unauthorized", nil, apierrors.IsUnauthorized, 0},
		{"plain 409", 409, "conflict", nil, apierrors.IsConflict, 0},
		{"plain 422", 422, "bad", nil, apierrors.IsInvalid, 0},
		{"plain 500", 500, "boom", nil, apierrors.IsInternalError, 0},
		{"plain 503", 503, "down", map[string]string{"Retry-After": "2"}, apierrors.IsServiceUnavailable, 2 * time.Second},
		{"plain 504", 504, "slow", nil, apierrors.IsTimeout, 0},
		{"protobuf status", 404, "", map[string]string{"Content-Type": mediaTypeProtobuf}, apierrors.IsNotFound, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				body := []byte(tc.body)
				if tc.header["Content-Type"] == mediaTypeProtobuf {
					st := metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: 404, Message: `pods "x" not found`}
					raw, _ := st.Marshal()
					body = wrapEnvelope(raw, "v1", "Status")
				}
				w.WriteHeader(tc.code)
				w.Write(body)
			}))
			// Refusals are seen as the server sent them, not retried
			// (TestRetryAfter covers that).
			c := newTestClient(t, srv.URL, func(c *Config) { c.MaxRetries = -1 })
			_, err := NewResource[*corev1.Pod](c, podsGVR, "default").Get(t.Context(), "x", metav1.GetOptions{})
			if err == nil || !tc.is(err) {
				t.Fatalf("got %v (reason %q), want it recognized", err, apierrors.ReasonForError(err))
			}
			var se *StatusError
			if !errors.As(err, &se) || int(se.ErrStatus.Code) != tc.code {
				t.Fatalf("got %#v, want a StatusError of code %d", err, tc.code)
			}
			if !strings.Contains(err.Error(), "GET ") || !strings.Contains(err.Error(), "/api/v1/namespaces/default/pods/x") {
				t.Fatalf("error %q does not name the request", err)
			}
			if d, ok := se.RetryAfter(); d != tc.retry || ok != (tc.retry > 0) {
				t.Fatalf("RetryAfter = %v, %v; want %v", d, ok, tc.retry)
			}
			if s, ok := apierrors.SuggestsClientDelay(err); tc.retry > 0 && tc.code == 429 && (!ok || time.Duration(s)*time.Second != tc.retry) {
				t.Fatalf("SuggestsClientDelay = %d, %v", s, ok)
			}
		})
	}
}

func TestWritesSendWhatTheServerExpects(t *testing.T) {
	type seen struct{ method, path, query, ctype, body string }
	var got []seen
	var mu sync.Mutex
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(b)})
		mu.Unlock()
		pod := makePod(1, 77)
		if wantsProto(r) {
			raw, _ := pod.Marshal()
			w.Header().Set("Content-Type", mediaTypeProtobuf)
			w.Write(wrapEnvelope(raw, "v1", "Pod"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(jsonPod(t, pod))
	}))
	c := newTestClient(t, srv.URL, nil)
	r := NewResource[*corev1.Pod](c, podsGVR, "team-a")
	ctx := t.Context()
	pod := makePod(1, 5)
	check := func(obj *corev1.Pod, err error) {
		t.Helper()
		if err != nil || obj.ResourceVersion != "77" || obj.Kind != "Pod" {
			t.Fatalf("got %v, %v", obj, err)
		}
	}
	check(r.Create(ctx, pod, metav1.CreateOptions{FieldManager: "me", DryRun: []string{metav1.DryRunAll}}))
	check(r.Update(ctx, pod, metav1.UpdateOptions{}))
	check(r.UpdateStatus(ctx, pod, metav1.UpdateOptions{}))
	check(r.Patch(ctx, "p", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{}))
	check(r.Patch(ctx, "p", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status"))
	check(r.Patch(ctx, "p", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/labels/a"}]`), metav1.PatchOptions{FieldValidation: "Strict"}))
	check(r.Get(ctx, "p", metav1.GetOptions{ResourceVersion: "0"}))
	bg := metav1.DeletePropagationBackground
	uid := types.UID("u-1")
	if err := r.Delete(ctx, "p", metav1.DeleteOptions{PropagationPolicy: &bg, GracePeriodSeconds: ptr(int64(0)),
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: ptr("9")}}); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{r.Delete(ctx, "", metav1.DeleteOptions{}), func() error { _, err := r.Get(ctx, "", metav1.GetOptions{}); return err }()} {
		if !apierrors.IsBadRequest(err) {
			t.Fatalf("empty name: got %v", err)
		}
	}
	base := "/api/v1/namespaces/team-a/pods"
	name := "/" + pod.Name
	want := []seen{
		{"POST", base, "dryRun=All&fieldManager=me", "application/json", ""},
		{"PUT", base + name, "", "application/json", ""},
		{"PUT", base + name + "/status", "", "application/json", ""},
		{"PATCH", base + "/p", "", "application/merge-patch+json", `{"metadata":{"labels":{"a":"b"}}}`},
		{"PATCH", base + "/p/status", "", "application/strategic-merge-patch+json", `{}`},
		{"PATCH", base + "/p", "fieldValidation=Strict", "application/json-patch+json", `[{"op":"remove","path":"/metadata/labels/a"}]`},
		{"GET", base + "/p", "resourceVersion=0", "", ""},
		{"DELETE", base + "/p", "", "application/json", `{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0,"preconditions":{"uid":"u-1","resourceVersion":"9"},"propagationPolicy":"Background"}`},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if w.body == "" && i < 3 {
			w.body = string(jsonPod(t, pod))
			g.body = strings.TrimSpace(g.body)
		}
		if g != w {
			t.Fatalf("request %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func jsonPod(t *testing.T, p *corev1.Pod) []byte {
	b := jsonStream(t, []recordedEvent{{typ: cache.EventAdded, pod: p}})
	// The object of the one-event stream: between `"object":` and `}\n`.
	b = b[strings.Index(string(b), `"object":`)+len(`"object":`):]
	return b[:len(b)-2]
}

func TestWatchCancelledContextEndsIt(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	c := newTestClient(t, srv.URL, nil)
	ctx, cancel := context.WithCancel(t.Context())
	w, err := NewResource[*corev1.Pod](c, podsGVR, "").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cancel()
	if _, err := w.Next(); err == nil {
		t.Fatal("Next after the context ended: no error")
	}
}

func TestWithoutManagedFields(t *testing.T) {
	pods := somePods(3)
	for _, preferJSON := range []bool{false, true} {
		srv := startServer(t, newFakeServer(t, pods, nil))
		c := newTestClient(t, srv.URL, func(cfg *Config) { cfg.PreferJSON = preferJSON })
		r := NewResource[*corev1.Pod](c, podsGVR, "default")
		full, err := r.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lean, err := r.WithoutManagedFields().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods {
			if len(full.Items[i].ManagedFields) == 0 {
				t.Fatalf("json=%v: item %d lost its managedFields", preferJSON, i)
			}
			want := pods[i].DeepCopy()
			want.ManagedFields = nil
			if !apiequality.Semantic.DeepEqual(lean.Items[i], want) {
				t.Fatalf("json=%v: item %d: got %+v", preferJSON, i, lean.Items[i])
			}
		}
	}
}
