package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// runningUp is `up` running in-process.
type runningUp struct {
	kubeconfig string
	output     []string
	stop       func() error
}

// startUp runs up with cfg until the returned stop is called, and returns
// once it has printed the kubeconfig path.
func startUp(t *testing.T, cfg upConfig) *runningUp {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, outLines := lines()
	done := make(chan error, 1)
	go func() {
		err := up(ctx, cfg, out, testLogger(t))
		out.Close()
		done <- err
	}()
	r := &runningUp{}
	for line := range outLines {
		r.output = append(r.output, line)
		if path, ok := strings.CutPrefix(line, "kubeconfig: "); ok {
			r.kubeconfig = path
			break
		}
	}
	if r.kubeconfig == "" {
		cancel()
		t.Fatalf("up ended without printing the kubeconfig: %v\n%s", <-done, strings.Join(r.output, "\n"))
	}
	go func() {
		for line := range outLines {
			t.Log("up:", line)
		}
	}()
	r.stop = func() error {
		cancel()
		return <-done
	}
	return r
}

func TestUp(t *testing.T) {
	for _, backend := range testBackends {
		t.Run(backend, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), ".listwatch")
			u := startUp(t, upConfig{Dir: dir, Port: 0, StorageBackend: backend})
			stopped := false
			defer func() {
				if !stopped {
					u.stop()
				}
			}()
			if want := filepath.Join(dir, "kubeconfig"); u.kubeconfig != want {
				t.Errorf("kubeconfig at %s, want %s", u.kubeconfig, want)
			}
			printed := strings.Join(u.output, "\n")
			if !strings.Contains(printed, "listwatch API server ready at https://127.0.0.1:") {
				t.Errorf("output lacks the server URL:\n%s", printed)
			}
			client, host := kubeClient(t, u.kubeconfig)
			anon := anonymousClient(t, u.kubeconfig)
			tests := []struct {
				name, path string
				anonymous  bool
				wantCode   int
				wantBody   string
			}{
				{name: "default namespace", path: "/api/v1/namespaces/default", wantCode: 200, wantBody: `"name":"default"`},
				{name: "kube-system namespace", path: "/api/v1/namespaces/kube-system", wantCode: 200, wantBody: `"name":"kube-system"`},
				{name: "kube-node-lease namespace", path: "/api/v1/namespaces/kube-node-lease", wantCode: 200, wantBody: `"name":"kube-node-lease"`},
				{name: "version", path: "/version", wantCode: 200, wantBody: `"gitVersion"`},
				{name: "readyz", path: "/readyz", anonymous: true, wantCode: 200, wantBody: "ok"},
				{name: "livez verbose", path: "/livez?verbose", anonymous: true, wantCode: 200, wantBody: "[+]ping ok"},
				{name: "healthz", path: "/healthz", anonymous: true, wantCode: 200, wantBody: "ok"},
				{name: "resource without token", path: "/api/v1/namespaces/default", anonymous: true, wantCode: 401, wantBody: `"reason":"Unauthorized"`},
				{name: "metrics without token", path: "/metrics", anonymous: true, wantCode: 401},
				{name: "metrics", path: "/metrics", wantCode: 200, wantBody: `apiserver_request_total{code="200",group="",resource="namespaces",subresource="",verb="GET",version="v1"}`},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					c := client
					if tt.anonymous {
						c = anon
					}
					code, body := do(t, c, "GET", host+tt.path, "")
					if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
						t.Errorf("GET %s: %d %s\nwant %d with %q", tt.path, code, body, tt.wantCode, tt.wantBody)
					}
				})
			}
			stopped = true
			if err := u.stop(); err != nil {
				t.Errorf("up ended with %v, want a clean shutdown", err)
			}
		})
	}
}

// anonymousClient returns a client trusting the CA of a kubeconfig but
// sending no token.
func anonymousClient(t *testing.T, kubeconfig string) *http.Client {
	t.Helper()
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range raw.AuthInfos {
		u.Token = ""
		u.ClientCertificateData, u.ClientKeyData = nil, nil
	}
	path := filepath.Join(t.TempDir(), "anonymous")
	if err := clientcmd.WriteToFile(*raw, path); err != nil {
		t.Fatal(err)
	}
	c, _ := kubeClient(t, path)
	return c
}

// TestUpRestartKeepsCredentials restarts up on the same directory: the
// token and CA are reused, so a kubeconfig handed out before still works.
func TestUpRestartKeepsCredentials(t *testing.T) {
	dir := t.TempDir()
	first := startUp(t, upConfig{Dir: dir, StorageBackend: backendMemory})
	before, err := clientcmd.LoadFromFile(first.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(t.TempDir(), "old-kubeconfig")
	if err := clientcmd.WriteToFile(*before, saved); err != nil {
		t.Fatal(err)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	second := startUp(t, upConfig{Dir: dir, StorageBackend: backendMemory})
	defer second.stop()
	after, err := clientcmd.LoadFromFile(second.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	b, a := before.Contexts[before.CurrentContext], after.Contexts[after.CurrentContext]
	if string(before.AuthInfos[b.AuthInfo].ClientCertificateData) != string(after.AuthInfos[a.AuthInfo].ClientCertificateData) {
		t.Error("client certificate changed across restart")
	}
	if string(before.Clusters[b.Cluster].CertificateAuthorityData) != string(after.Clusters[a.Cluster].CertificateAuthorityData) {
		t.Error("CA changed across restart")
	}
	// The old kubeconfig, pointed at the new address, still authenticates
	// and verifies the server.
	before.Clusters[b.Cluster].Server = after.Clusters[a.Cluster].Server
	if err := clientcmd.WriteToFile(*before, saved); err != nil {
		t.Fatal(err)
	}
	client, host := kubeClient(t, saved)
	if code, body := do(t, client, "GET", host+"/api/v1/namespaces/default", ""); code != 200 {
		t.Errorf("old kubeconfig: %d %s", code, body)
	}
	token, err := os.ReadFile(filepath.Join(dir, upTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(filepath.Join(dir, upTokenFile)); info.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %o", info.Mode().Perm())
	}
	// The token of kubeconfigs written before the client certificate
	// still authenticates.
	tokenClient := anonymousClient(t, saved)
	req, err := http.NewRequest("GET", host+"/api/v1/namespaces/default", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := tokenClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the stored token: %d", resp.StatusCode)
	}
}

// TestUpPortBusy occupies the port up asks for: up serves on another.
func TestUpPortBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	u := startUp(t, upConfig{Dir: t.TempDir(), Port: port, StorageBackend: backendMemory})
	defer u.stop()
	printed := strings.Join(u.output, "\n")
	if !strings.Contains(printed, fmt.Sprintf("port %d is busy", port)) {
		t.Errorf("output does not say the port is busy:\n%s", printed)
	}
	client, host := kubeClient(t, u.kubeconfig)
	if strings.HasSuffix(host, fmt.Sprintf(":%d", port)) {
		t.Fatalf("serving on the busy port %d: %s", port, host)
	}
	if code, body := do(t, client, "GET", host+"/readyz", ""); code != 200 {
		t.Errorf("readyz: %d %s", code, body)
	}
}

// TestUpDirInUse starts a second up on the directory of a running one: it
// fails at once rather than waiting on etcd's database lock.
func TestUpDirInUse(t *testing.T) {
	dir := t.TempDir()
	first := startUp(t, upConfig{Dir: dir, StorageBackend: backendEtcd})
	defer first.stop()
	var out strings.Builder
	err := up(context.Background(), upConfig{Dir: dir, StorageBackend: backendEtcd}, &out, testLogger(t))
	if err == nil || !strings.Contains(err.Error(), "in use by another listwatch process") {
		t.Fatalf("second up: %v, want the directory in use", err)
	}
	if out.Len() != 0 {
		t.Errorf("second up printed %q", out.String())
	}
}
