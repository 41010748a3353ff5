package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/internal/pki"
	"github.com/listwatch/listwatch/internal/runtest"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/etcd"
)

// waitTimeout guards every wait of these tests so that a hung server fails
// the test instead of hanging the run; it is never what a test measures.
const waitTimeout = 2 * time.Minute

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// freePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago: etcd cannot listen on port 0 and say which port it got.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		// Held open until all are picked, so that they differ.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// startEtcd starts an etcd cluster of n members on loopback ports, each with
// real peer URLs and a data directory of its own, and stops them when the
// test ends. fsync is off: the tests lose members, not machines, so what
// keeps an acknowledged write is raft's replication to a majority.
func startEtcd(t *testing.T, n int) []*etcd.Embedded {
	t.Helper()
	ports := freePorts(t, 2*n)
	names := make([]string, n)
	peers := make([]string, n)
	clients := make([]string, n)
	initial := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("m%d", i)
		peers[i] = fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		clients[i] = fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		initial[i] = names[i] + "=" + peers[i]
	}
	members := make([]*etcd.Embedded, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		dir := t.TempDir()
		wg.Go(func() {
			members[i], errs[i] = etcd.StartEmbedded(t.Context(), etcd.EmbeddedConfig{
				Dir: dir, Name: names[i], PeerURL: peers[i], ClientURL: clients[i],
				InitialCluster: strings.Join(initial, ","), UnsafeNoFsync: true,
				// Quicker elections keep the test short; generous enough for
				// a loaded machine under the race detector.
				HeartbeatInterval: 50 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
			})
		})
	}
	wg.Wait()
	for _, m := range members {
		if m != nil {
			t.Cleanup(func() {
				if err := m.Close(); err != nil {
					t.Error(err)
				}
			})
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return members
}

// endpoints are the client URLs of members.
func endpoints(members []*etcd.Embedded) []string {
	var eps []string
	for _, m := range members {
		eps = append(eps, m.Endpoints...)
	}
	return eps
}

// openStore connects a storage backend to etcd, closed when the test ends.
func openStore(t *testing.T, eps []string) *etcd.Store {
	t.Helper()
	s, err := etcd.New(t.Context(), etcd.Config{Endpoints: eps, Prefix: "/registry"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// inProcess is an apiserver.Server serving plain HTTP on 127.0.0.1.
type inProcess struct {
	URL string
	api *apiserver.Server
	// stopAPI ends the API server's Run and waits for it.
	stopAPI func()
	http    *http.Server
	done    chan struct{}
	once    sync.Once
}

// startInProcess serves the API over st on a loopback port, with the
// namespace "default" created, and shuts it down when the test ends. wrap,
// when set, wraps the listener (to tune the sockets of some connections).
func startInProcess(t *testing.T, st storage.Interface, wc apiserver.WatchCacheConfig, wrap func(net.Listener) net.Listener) *inProcess {
	t.Helper()
	api, err := apiserver.New(apiserver.Config{Storage: st, WatchCache: wc,
		// No controller-manager makes the default service accounts: as
		// kube's integration tests and envtest, ServiceAccount admission
		// is off on this bare API server.
		DisableAdmissionPlugins: []string{"ServiceAccount"}})
	if err != nil {
		t.Fatal(err)
	}
	stopAPI := runtest.Start(t, api)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	s := &inProcess{URL: "http://" + ln.Addr().String(), api: api, stopAPI: stopAPI, done: make(chan struct{}),
		http: &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(ln)
	}()
	t.Cleanup(s.stop)
	c := newClient(t, s.URL, nil)
	ns := client.NewResource[*corev1.Namespace](c, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "")
	if _, err := ns.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace default: %v", err)
	}
	return s
}

// stop closes the listener and every connection (watches included), then
// the API server's caches; it is idempotent.
func (s *inProcess) stop() {
	s.once.Do(func() {
		// Close, not Shutdown: watches are long-running and Shutdown would
		// wait for them.
		_ = s.http.Close()
		<-s.done
		s.stopAPI()
	})
}

// newClient returns a listwatch client of the server at url with no client
// side rate limit; rc, when set, carries TLS and token settings.
func newClient(t testing.TB, url string, rc *rest.Config) *client.Client {
	t.Helper()
	if rc == nil {
		rc = &rest.Config{}
	}
	rc = rest.CopyConfig(rc)
	rc.Host = url
	c, err := client.New(&client.Config{REST: rc, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func podsOf(c *client.Client) *client.Resource[*corev1.Pod] {
	return client.NewResource[*corev1.Pod](c, podsGVR, "default")
}

// newPod is a small but realistic pod: a container, labels, a node.
func newPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "e2e", "tier": "test"}},
		Spec: corev1.PodSpec{
			NodeName:   "node-1",
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// watchAll follows the pods watch from rv, re-watching from the last
// resourceVersion it received whenever a stream ends (as a Reflector
// does), and calls seen for every event until ctx ends or seen returns
// false. connect chooses the client of each (re)watch, so that a watcher
// can fail over to another server. It returns the number of re-watches.
func watchAll(ctx context.Context, rv string, connect func(attempt int) *client.Resource[*corev1.Pod], seen func(cache.Event[*corev1.Pod]) bool) (rewatches int, err error) {
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return rewatches, nil
		}
		w, err := connect(attempt).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return rewatches, fmt.Errorf("watch from %s: %w", rv, err)
			}
			// The server is gone or not there yet: retry, as a client would.
			select {
			case <-ctx.Done():
				return rewatches, nil
			case <-time.After(50 * time.Millisecond):
			}
			rewatches++
			continue
		}
		for {
			ev, err := w.Next()
			if err != nil {
				break
			}
			if ev.Type == cache.EventError {
				w.Stop()
				return rewatches, fmt.Errorf("watch from %s: %s", rv, ev.Status.Message)
			}
			if ev.Type == cache.EventBookmark {
				rv = ev.Object.ResourceVersion
				continue
			}
			rv = ev.Object.ResourceVersion
			if !seen(ev) {
				w.Stop()
				return rewatches, nil
			}
		}
		w.Stop()
		rewatches++
	}
}

// proc is a `listwatch apiserver` process.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	URL    string
	REST   *rest.Config
	exited chan struct{}
	err    error // the exit status, once exited is closed
}

// servingLine is the log line of a server that listens.
var servingLine = regexp.MustCompile(`msg=serving url=(\S+)`)

// procDirs are the files a process needs: a token file and a certificate
// directory, shared by the processes of one test so that one CA and one
// token serve them all.
type procDirs struct {
	certDir, tokenFile, token string
}

func newProcDirs(t *testing.T) procDirs {
	t.Helper()
	dir := t.TempDir()
	d := procDirs{certDir: filepath.Join(dir, "pki"), tokenFile: filepath.Join(dir, "tokens.csv"), token: "e2e-secret-token"}
	if err := os.WriteFile(d.tokenFile, []byte(d.token+`,e2e,e2e-uid,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}

// startProc runs `listwatch apiserver` on a free port with args added, waits
// until it is ready, and kills it when the test ends if it still runs.
func startProc(t *testing.T, d procDirs, args ...string) *proc {
	t.Helper()
	// No controller-manager makes the default service accounts: as kube's
	// integration tests and envtest, ServiceAccount admission is off.
	all := append([]string{"apiserver", "--secure-port", "0", "--cert-dir", d.certDir, "--token-auth-file", d.tokenFile,
		"--disable-admission-plugins=ServiceAccount"}, args...)
	cmd := exec.Command(listwatchBin, all...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, exited: make(chan struct{})}
	urls := make(chan string, 1)
	var logs sync.WaitGroup
	logs.Go(func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
			if strings.Contains(sc.Text(), "level=ERROR") || strings.Contains(sc.Text(), "level=WARN") {
				t.Logf("listwatch[%d]: %s", cmd.Process.Pid, sc.Text())
			}
		}
	})
	go func() {
		logs.Wait() // Wait closes the pipe: read it all first
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	select {
	case p.URL = <-urls:
	case <-p.exited:
		t.Fatalf("listwatch %v exited before serving: %v", all, p.err)
	case <-time.After(waitTimeout):
		t.Fatalf("listwatch %v not serving within %v", all, waitTimeout)
	}
	ca, err := os.ReadFile(filepath.Join(d.certDir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	p.REST = &rest.Config{Host: p.URL, BearerToken: d.token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	p.waitReady()
	return p
}

// waitReady polls /readyz until the server says it is ready (the default
// namespace exists, etcd answers).
func (p *proc) waitReady() {
	p.t.Helper()
	hc, err := rest.HTTPClientFor(p.REST)
	if err != nil {
		p.t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(waitTimeout)
	for {
		resp, err := hc.Get(p.URL + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s not ready within %v: %v", p.URL, waitTimeout, err)
		}
		select {
		case <-p.exited:
			p.t.Fatalf("%s exited before it was ready: %v", p.URL, p.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop sends sig and waits for the process to exit; a SIGTERM must end it
// cleanly.
func (p *proc) stop(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(waitTimeout):
		p.t.Fatalf("listwatch did not exit within %v of %v", waitTimeout, sig)
	}
	if sig != syscall.SIGKILL && p.err != nil {
		p.t.Errorf("listwatch exited with %v after %v, want a clean exit", p.err, sig)
	}
}
