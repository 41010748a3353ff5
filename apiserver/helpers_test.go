package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/internal/testbackends"
	"github.com/listwatch/listwatch/storage"
)

func TestMain(m *testing.M) {
	os.Exit(testbackends.Run(m))
}

// backends are the storage backends the suite runs on.
var backends = testbackends.All("apiserver")

// forEachBackend runs test against a fresh server on every backend.
func forEachBackend(t *testing.T, test func(t *testing.T, c *client)) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			test(t, newClient(t, b.New(t)))
		})
	}
}

// fooResource is the Foo custom resource every test server serves, from
// fooCRD: any field kept, a status subresource.
var fooResource = struct{ Group, Version, Kind, Plural string }{"samplecontroller.k8s.io", "v1alpha1", "Foo", "foos"}

const fooCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: foos.samplecontroller.k8s.io
  annotations:
    api-approved.kubernetes.io: unapproved, testing only
spec:
  group: samplecontroller.k8s.io
  scope: Namespaced
  names: {kind: Foo, plural: foos}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
    subresources: {status: {}}
`

// client talks to a real server on 127.0.0.1.
type client struct {
	t    testing.TB
	base string
	srv  *Server
	st   storage.Interface
}

func newClient(t testing.TB, st storage.Interface) *client {
	t.Helper()
	return newClientWith(t, st, WatchCacheConfig{BookmarkInterval: 100 * time.Millisecond})
}

func newClientWith(t testing.TB, st storage.Interface, wc WatchCacheConfig) *client {
	t.Helper()
	return newClientConfig(t, st, func(cfg *Config) { cfg.WatchCache = wc })
}

// newClientConfig is newClient with the server's Config changed by mod.
func newClientConfig(t testing.TB, st storage.Interface, mod func(*Config)) *client {
	t.Helper()
	cfg := Config{
		Storage:    st,
		WatchCache: WatchCacheConfig{BookmarkInterval: 100 * time.Millisecond},
		// No controller-manager makes the namespaces' default service
		// accounts here: without it kube's own integration tests and
		// envtest run kube-apiserver with ServiceAccount admission off,
		// and so do these (admission_test.go tests it on).
		DisableAdmissionPlugins: []string{"ServiceAccount"},
	}
	mod(&cfg)
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ParseManifests([]byte(fooCRD))
	if err != nil {
		t.Fatal(err)
	}
	stop := runtest.Start(t, srv)
	if err := srv.Apply(t.Context(), objs); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		stop()
	})
	c := &client{t: t, base: hs.URL, srv: srv, st: st}
	if r := c.do("POST", "/api/v1/namespaces", "", `{"metadata":{"name":"default"}}`); r.code != http.StatusCreated && r.code != http.StatusConflict {
		t.Fatalf("create namespace default: %d %s", r.code, r.body)
	}
	return c
}

// response is what a request returned.
type response struct {
	code int
	body []byte
	hdr  http.Header
}

func (r response) obj(t testing.TB) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response %q: %v", r.body, err)
	}
	return m
}

func (r response) status(t testing.TB) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("not a Status: %q (%v)", r.body, err)
	}
	return st
}

func (c *client) do(method, path, contentType, body string, hdr ...string) response {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType == "" && body != "" {
		contentType = "application/json"
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{code: resp.StatusCode, body: b, hdr: resp.Header}
}

func (c *client) mustDo(method, path, contentType, body string, code int) map[string]any {
	c.t.Helper()
	r := c.do(method, path, contentType, body)
	if r.code != code {
		c.t.Fatalf("%s %s: got %d %s, want %d", method, path, r.code, r.body, code)
	}
	if len(bytes.TrimSpace(r.body)) == 0 {
		return nil
	}
	return r.obj(c.t)
}

// field reads a nested value by dotted path.
func nested(m map[string]any, path string) any {
	var v any = m
	for _, p := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func str(m map[string]any, path string) string {
	s, _ := nested(m, path).(string)
	return s
}

// watchStream is an open watch.
type watchStream struct {
	t    testing.TB
	dec  *json.Decoder
	body io.Closer
	hdr  http.Header
}

func (c *client) watch(path string) *watchStream {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), "GET", c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.t.Fatalf("watch %s: %d %s", path, resp.StatusCode, b)
	}
	c.t.Cleanup(func() { resp.Body.Close() })
	return &watchStream{t: c.t, dec: json.NewDecoder(resp.Body), body: resp.Body, hdr: resp.Header}
}

type event struct {
	Type   string         `json:"type"`
	Object map[string]any `json:"object"`
}

// next returns the next event that is not a periodic bookmark; ok is false
// when the stream ended.
func (w *watchStream) next() (event, bool) {
	w.t.Helper()
	for {
		var ev event
		if err := w.dec.Decode(&ev); err != nil {
			return ev, false
		}
		if ev.Type == "BOOKMARK" {
			ann, _ := nested(ev.Object, "metadata.annotations").(map[string]any)
			if _, end := ann["k8s.io/initial-events-end"]; !end {
				continue
			}
		}
		return ev, true
	}
}

func (w *watchStream) expect(typ, name string) event {
	w.t.Helper()
	ev, ok := w.next()
	if !ok {
		w.t.Fatalf("watch ended, want %s %s", typ, name)
	}
	if ev.Type != typ || (name != "" && str(ev.Object, "metadata.name") != name) {
		w.t.Fatalf("got %s %s, want %s %s", ev.Type, str(ev.Object, "metadata.name"), typ, name)
	}
	return ev
}

// The bodies below are objects Kubernetes' validation accepts, for the
// tests that need one but are not about its spec. extra, when not "",
// holds more members of the spec (`"nodeName":"n1"`), placed first.

// testContainers are the containers of the pods the tests make.
const testContainers = `"containers":[{"name":"c","image":"i"}]`

// specWith is a spec object of extra's members and then rest's.
func specWith(extra, rest string) string {
	if extra == "" {
		return "{" + rest + "}"
	}
	return "{" + extra + "," + rest + "}"
}

// podBody is a pod with metadata meta (a JSON object) and one container.
func podBody(meta, extra string) string {
	return fmt.Sprintf(`{"metadata":%s,"spec":%s}`, meta, specWith(extra, testContainers))
}

// rcSpec is a replication controller's spec: selector a=b and a pod
// template with those labels.
func rcSpec(extra string) string {
	return specWith(extra, `"selector":{"a":"b"},"template":{"metadata":{"labels":{"a":"b"}},"spec":{`+testContainers+`}}`)
}

// rcBody is replication controller name with replicas replicas and rcSpec.
func rcBody(name string, replicas int) string {
	return fmt.Sprintf(`{"metadata":{"name":%q},"spec":%s}`, name, rcSpec(fmt.Sprintf(`"replicas":%d`, replicas)))
}

// deploymentSpec is a Deployment's spec selecting app=app, with a pod
// template of that label.
func deploymentSpec(app, extra string) string {
	return specWith(extra, fmt.Sprintf(`"selector":{"matchLabels":{"app":%q}},"template":{"metadata":{"labels":{"app":%q}},"spec":{%s}}`, app, app, testContainers))
}
