package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/listwatch/listwatch/internal/pki"
)

// The probes of a hostile or careless client, run against a
// `listwatch apiserver` process (the test binary run as listwatch, on the
// embedded etcd) so that what is measured is that process alone: its
// memory as the kernel counts it, its answers over TLS.

// probeServer is a running `listwatch apiserver` process.
type probeServer struct {
	pid    int
	url    string
	token  string
	client *http.Client
	tls    *tls.Config
}

// startProbeServer starts `listwatch apiserver` (the test binary run as
// listwatch) with extra flags and stops it at the end of the test.
func startProbeServer(t *testing.T, extra ...string) *probeServer {
	t.Helper()
	return startProbeBinary(t, os.Args[0], []string{execMainEnv + "=1"}, extra...)
}

// startProbeBinary is startProbeServer running bin, with env added to
// the test's environment.
func startProbeBinary(t *testing.T, bin string, env []string, extra ...string) *probeServer {
	t.Helper()
	dir := t.TempDir()
	const token = "probe-token"
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+`,probe,probe-uid,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	certDir := filepath.Join(dir, "pki")
	args := append([]string{"apiserver", "--secure-port=0", "--token-auth-file=" + tokens, "--cert-dir=" + certDir,
		"--data-dir=" + filepath.Join(dir, "etcd"), "--disable-admission-plugins=ServiceAccount"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	urls := make(chan string, 1)
	var logMu sync.Mutex
	var logTail []string
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			logTail = append(logTail, line)
			if len(logTail) > 50 {
				logTail = logTail[1:]
			}
			logMu.Unlock()
			if _, after, ok := strings.Cut(line, "msg=serving url="); ok {
				select {
				case urls <- strings.Fields(after)[0]:
				default:
				}
			}
		}
		exited <- cmd.Wait()
	}()
	tail := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Join(logTail, "\n")
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("listwatch apiserver did not stop on SIGINT:\n%s", tail())
		}
	})
	var u string
	select {
	case u = <-urls:
	case err := <-exited:
		t.Fatalf("listwatch apiserver exited before serving: %v\n%s", err, tail())
	case <-time.After(60 * time.Second):
		t.Fatalf("listwatch apiserver not serving after a minute:\n%s", tail())
	}
	ca, err := os.ReadFile(filepath.Join(certDir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no CA certificate in", certDir)
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	tr := &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 200, MaxConnsPerHost: 0}
	t.Cleanup(tr.CloseIdleConnections)
	ps := &probeServer{pid: cmd.Process.Pid, url: u, token: token, client: &http.Client{Transport: tr, Timeout: time.Minute}, tls: tc}
	// Serving comes before the start-up work (the default namespace);
	// ready after it, as kube-apiserver's /readyz.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body := ps.do(t, "GET", "/readyz", "", "")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listwatch apiserver not ready: %d %s\n%s", code, body, tail())
		}
	}
	return ps
}

// do sends a request with the server's token.
func (p *probeServer) do(t *testing.T, method, path, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, p.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// memoryKB reads field (VmRSS, VmHWM) of the process's /proc status in KiB.
func (p *probeServer) memoryKB(t *testing.T, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("%s: %q: %v", field, line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, p.pid)
	return 0
}

// TestProbeDeepPatches: 100 concurrent merge patches of a pod, each 60 KB
// nested past 10,000 levels (kube-apiserver v1.37 takes 4.8 s and a
// gigabyte on one), are each answered with kube's 400 for a document its
// decoders refuse as too deep (golden crd-bounded-bodies), and the
// process's peak RSS stays under 300 MB. The slowest answer is logged,
// not asserted: a time bound fails on a loaded machine (it did at load
// 20), and the memory bound is what shows the depth is refused before
// the work.
func TestProbeDeepPatches(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server process")
	}
	// The binary users run: under -race the test binary's memory is
	// several times a real server's, and the bound is about the latter.
	p := startProbeBinary(t, buildListwatch(t), nil)
	pod := `{"metadata":{"name":"deep"},"spec":{"containers":[{"name":"c","image":"i"}]}}`
	if code, body := p.do(t, "POST", "/api/v1/namespaces/default/pods", "application/json", pod); code != http.StatusCreated {
		t.Fatalf("create pod: %d %s", code, body)
	}
	const depth, n = 10000, 100
	patch := `{"metadata":{"annotations":` + strings.Repeat(`{"a":`, depth) + `"v"` + strings.Repeat(`}`, depth) + `}}`
	before := p.memoryKB(t, "VmRSS")

	type answer struct {
		code    int
		body    string
		latency time.Duration
	}
	answers := make([]answer, n)
	// The clients connect first: what is timed is the server's answer
	// to a patch, not n TLS handshakes on a shared machine.
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { p.do(t, "GET", "/api/v1/namespaces/default/pods/deep", "", "") })
	}
	wg.Wait()
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			t0 := time.Now()
			code, body := p.do(t, "PATCH", "/api/v1/namespaces/default/pods/deep", "application/merge-patch+json", patch)
			answers[i] = answer{code, body, time.Since(t0)}
		})
	}
	close(start)
	wg.Wait()
	var slowest time.Duration
	for i, a := range answers {
		slowest = max(slowest, a.latency)
		if a.code != http.StatusBadRequest || !strings.Contains(a.body, "invalid JSON patch") {
			t.Errorf("patch %d: %d %.200s, want kube's 400 invalid JSON patch", i, a.code, a.body)
		}
	}
	peak := p.memoryKB(t, "VmHWM")
	t.Logf("%d patches of %d KB nested %d deep: slowest answer %v; RSS %d MB before, peak %d MB",
		n, len(patch)>>10, depth, slowest.Round(time.Millisecond), before>>10, peak>>10)
	if peak >= 300<<10 {
		t.Errorf("peak RSS %d MB, want under 300 MB", peak>>10)
	}
	if code, body := p.do(t, "GET", "/api/v1/namespaces/default/pods/deep", "", ""); code != http.StatusOK || strings.Contains(body, `"a":`) {
		t.Errorf("pod after the refused patches: %d %.200s", code, body)
	}
}

// TestProbeStalledUploads: 200 connections that announce a 100-byte body
// and never send it do not keep a concurrent create from succeeding
// within the request timeout; each of them is answered 408 and closed
// once the timeout has passed.
func TestProbeStalledUploads(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server process")
	}
	const timeout, stalled = 3 * time.Second, 200
	p := startProbeServer(t, "--request-timeout="+timeout.String())
	u, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	head := "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + p.token +
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
	answers := make(chan string, stalled)
	var wg sync.WaitGroup
	for range stalled {
		conn, err := tls.Dial("tcp", u.Host, p.tls.Clone())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_ = conn.SetReadDeadline(time.Now().Add(timeout + 20*time.Second))
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

	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, "POST", p.url+"/api/v1/namespaces/default/configmaps", strings.NewReader(`{"metadata":{"name":"beside"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatalf("create beside %d stalled uploads: %v", stalled, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(t0)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create beside %d stalled uploads: %d %s", stalled, resp.StatusCode, body)
	}
	t.Logf("create beside %d stalled uploads answered 201 in %v (request timeout %v)", stalled, took.Round(time.Millisecond), timeout)

	wg.Wait()
	close(answers)
	for a := range answers {
		if !strings.HasPrefix(a, "408 close=true") || !strings.Contains(a, `"reason":"Timeout"`) {
			t.Errorf("stalled upload answered %.200q, want 408 Timeout and the connection closed", a)
		}
	}
}

// TestProbeWideApplies: eight server-side applies at once of a custom
// resource with 20,000 fields (0.3 MB each), which the field manager
// makes costly (about 2 KiB per field), all succeed, and the server's
// memory budget (--max-request-memory, here 100 MB, about one such
// apply's estimate) makes them take turns: the server's peak RSS grows by
// what about one of them holds, not eight. Under the race detector a
// smaller size only checks that every apply succeeds.
func TestProbeWideApplies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server process")
	}
	const n, budgetMB = 8, 100
	fields := 20000
	if raceEnabled {
		// Each apply takes seconds under the race detector: fewer
		// fields keep the last one's wait for its turn under APF's 15 s.
		fields = 3000
	}
	p := startProbeServer(t, fmt.Sprintf("--max-request-memory=%d", budgetMB<<20))
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"wides.probe.io"},"spec":{"group":"probe.io","scope":"Namespaced","names":{"plural":"wides","singular":"wide","kind":"Wide"},"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
	if code, body := p.do(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", crd); code != http.StatusCreated {
		t.Fatalf("create CRD: %d %s", code, body)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := p.do(t, "GET", "/apis/probe.io/v1/namespaces/default/wides", "", ""); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the CRD is not served")
		}
	}
	var spec strings.Builder
	for i := range fields {
		if i > 0 {
			spec.WriteString(",")
		}
		fmt.Fprintf(&spec, `"k%d":%d`, i, i)
	}
	before := p.memoryKB(t, "VmHWM")
	var wg sync.WaitGroup
	codes := make([]int, n)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("wide-%d", i)
			body := `{"apiVersion":"probe.io/v1","kind":"Wide","metadata":{"name":"` + name + `"},"spec":{` + spec.String() + `}}`
			var resp string
			codes[i], resp = p.do(t, "PATCH", "/apis/probe.io/v1/namespaces/default/wides/"+name+"?fieldManager=probe", "application/apply-patch+yaml", body)
			if codes[i] != http.StatusCreated {
				t.Errorf("apply %d: %d %.300s", i, codes[i], resp)
			}
		})
	}
	wg.Wait()
	peak := p.memoryKB(t, "VmHWM")
	t.Logf("%d applies of %d fields at once: %v; peak RSS %d MB before, %d MB after (+%d MB)",
		n, fields, time.Since(start).Round(time.Millisecond), before>>10, peak>>10, (peak-before)>>10)
	if grown := (peak - before) >> 10; grown > 3*budgetMB/2 && !raceEnabled {
		t.Errorf("peak RSS grew %d MB, want under %d MB: the applies did not take turns", grown, 3*budgetMB/2)
	}
}
