package main

import (
	"bufio"
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/listwatch/listwatch/internal/kubeconfig"
	"github.com/listwatch/listwatch/internal/pki"
)

func parseServerFlags(t *testing.T, args ...string) (serverConfig, error) {
	t.Helper()
	fs := flag.NewFlagSet("apiserver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cfg serverConfig
	cfg.addFlags(fs)
	return cfg, fs.Parse(args)
}

func TestAPIServerFlags(t *testing.T) {
	defaults := serverConfig{
		BindAddress: "127.0.0.1",
		SecurePort:  6443,
		Storage: storageConfig{
			Backend:            backendEtcd,
			DataDir:            "./.listwatch/etcd",
			CompactionInterval: 5 * time.Minute,
		},
		CertDir:                     "./.listwatch/pki",
		MaxRequestsInFlight:         400,
		MaxMutatingRequestsInFlight: 200,
		PriorityAndFairness:         true,
		MaxRequestMemory:            512 << 20,
		MaxRequestBodyBytes:         3 << 20,
		RequestTimeout:              time.Minute,
		Profiling:                   true,
	}
	tests := []struct {
		name    string
		args    []string
		change  func(c *serverConfig)
		wantErr bool
	}{
		{name: "defaults", change: func(*serverConfig) {}},
		{name: "external etcd", args: []string{"--etcd-servers", "https://a:2379, https://b:2379", "--etcd-cafile", "ca", "--etcd-certfile", "c", "--etcd-keyfile", "k"},
			change: func(c *serverConfig) {
				c.Storage.EtcdServers = []string{"https://a:2379", "https://b:2379"}
				c.Storage.EtcdCAFile, c.Storage.EtcdCertFile, c.Storage.EtcdKeyFile = "ca", "c", "k"
			}},
		{name: "everything else", args: []string{"--bind-address=0.0.0.0", "--secure-port=0", "--data-dir=/d", "--storage-backend=memory",
			"--compaction-interval=1m", "--token-auth-file=/t", "--tls-cert-file=/c", "--tls-private-key-file=/k", "--cert-dir=/p",
			"--custom-resources=/cr.yaml", "--max-requests-inflight=1", "--max-mutating-requests-inflight=2", "--max-request-body-bytes=3",
			"--max-request-memory=4", "--request-timeout=30s", "--enable-priority-and-fairness=false", "--profiling=false"},
			change: func(c *serverConfig) {
				c.BindAddress, c.SecurePort = "0.0.0.0", 0
				c.Storage.DataDir, c.Storage.Backend, c.Storage.CompactionInterval = "/d", backendMemory, time.Minute
				c.TokenAuthFile, c.TLSCertFile, c.TLSKeyFile, c.CertDir = "/t", "/c", "/k", "/p"
				c.CustomResourcesFile = "/cr.yaml"
				c.MaxRequestsInFlight, c.MaxMutatingRequestsInFlight, c.MaxRequestBodyBytes = 1, 2, 3
				c.RequestTimeout = 30 * time.Second
				c.PriorityAndFairness = false
				c.MaxRequestMemory = 4
				c.Profiling = false
			}},
		{name: "bad duration", args: []string{"--compaction-interval=soon"}, wantErr: true},
		{name: "feature gates off", args: []string{"--feature-gates=WatchList=false,ShardedListAndWatch=false"},
			change: func(c *serverConfig) { c.DisableWatchList, c.DisableShardedListAndWatch = true, true }},
		{name: "feature gates on", args: []string{"--feature-gates=ShardedListAndWatch=true"}, change: func(*serverConfig) {}},
		{name: "unknown feature gate", args: []string{"--feature-gates=Sharded=true"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseServerFlags(t, tt.args...)
			if tt.wantErr {
				if err == nil {
					t.Fatal("want a parse error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := defaults
			tt.change(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestUnknownBackend(t *testing.T) {
	cfg, err := parseServerFlags(t, "--storage-backend=cassandra", "--secure-port=0", "--cert-dir="+t.TempDir(), "--anonymous-auth")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startServer(context.Background(), cfg, testLogger(t)); err == nil || !strings.Contains(err.Error(), "cassandra") {
		t.Fatalf("startServer: %v, want an unknown backend error", err)
	}
}

// TestAPIServer starts the server as `listwatch apiserver` flags configure
// it — a token file, given certificate files, a small body cap — and checks
// authentication, the cap, and that shutdown ends an open watch.
func TestAPIServer(t *testing.T) {
	for _, backend := range testBackends {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			// Certificates made elsewhere, handed over as files.
			serving, err := pki.EnsureServing(filepath.Join(dir, "given"))
			if err != nil {
				t.Fatal(err)
			}
			// A chain file: the server's CA is its last certificate.
			given := filepath.Join(dir, "given")
			leafPEM, err := os.ReadFile(filepath.Join(given, pki.ServingCert))
			if err != nil {
				t.Fatal(err)
			}
			chainFile := filepath.Join(given, "chain.crt")
			if err := os.WriteFile(chainFile, append(leafPEM, serving.CAPEM...), 0o600); err != nil {
				t.Fatal(err)
			}
			tokenFile := filepath.Join(dir, "tokens.csv")
			if err := os.WriteFile(tokenFile, []byte("tok-alice,alice,1,\"system:masters\"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := parseServerFlags(t, "--secure-port=0", "--storage-backend="+backend,
				"--data-dir="+filepath.Join(dir, "etcd"), "--cert-dir="+filepath.Join(dir, "unused"),
				"--token-auth-file="+tokenFile,
				"--tls-cert-file="+chainFile,
				"--tls-private-key-file="+filepath.Join(given, pki.ServingKeyFile),
				"--max-request-body-bytes=1024")
			if err != nil {
				t.Fatal(err)
			}
			srv, err := startServer(context.Background(), cfg, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if !stopped {
					srv.shutdown()
				}
			}()
			if err := srv.waitReady(context.Background()); err != nil {
				t.Fatal(err)
			}
			if string(srv.CAPEM) != string(serving.CAPEM) {
				t.Error("server CA is not the given one's")
			}
			if _, err := os.Stat(filepath.Join(dir, "unused")); !os.IsNotExist(err) {
				t.Errorf("certificates generated despite --tls-cert-file: %v", err)
			}
			kc := filepath.Join(dir, "kubeconfig")
			if err := kubeconfig.Write(kc, kubeconfig.Config{Server: srv.URL, CAData: srv.CAPEM, Token: "tok-alice"}); err != nil {
				t.Fatal(err)
			}
			client, host := kubeClient(t, kc)
			anon := anonymousClient(t, kc)

			big := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"big","annotations":{"a":"` + strings.Repeat("x", 2048) + `"}}}`
			tests := []struct {
				name, method, path, body string
				anonymous                bool
				wantCode                 int
				wantBody                 string
			}{
				{name: "get with token", method: "GET", path: "/api/v1/namespaces/default", wantCode: 200, wantBody: `"name":"default"`},
				{name: "no token", method: "GET", path: "/api/v1/namespaces", anonymous: true, wantCode: 401, wantBody: `"kind":"Status"`},
				{name: "create", method: "POST", path: "/api/v1/namespaces", body: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"small"}}`, wantCode: 201},
				{name: "body over the cap", method: "POST", path: "/api/v1/namespaces", body: big, wantCode: 413, wantBody: `"reason":"RequestEntityTooLarge"`},
				{name: "readyz", method: "GET", path: "/readyz?verbose", anonymous: true, wantCode: 200, wantBody: "[+]poststarthook/bootstrap-controller ok"},
				{name: "one readyz check", method: "GET", path: "/readyz/ping", wantCode: 200, wantBody: "ok"},
				{name: "unknown readyz check", method: "GET", path: "/readyz/nope", wantCode: 404},
				// RBAC's system:public-info-viewer, as in kube, grants
				// anonymous users /readyz but not its checks.
				{name: "one readyz check anonymously", method: "GET", path: "/readyz/ping", anonymous: true, wantCode: 403,
					wantBody: `"message":"forbidden: User \"system:anonymous\" cannot get path \"/readyz/ping\""`},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					c := client
					if tt.anonymous {
						c = anon
					}
					code, body := do(t, c, tt.method, host+tt.path, tt.body)
					if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
						t.Errorf("%s %s: %d %s\nwant %d with %q", tt.method, tt.path, code, body, tt.wantCode, tt.wantBody)
					}
				})
			}

			// An open watch does not hold up the shutdown: it is ended.
			req, err := http.NewRequest("GET", host+"/api/v1/namespaces?watch=true", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("watch: %d", resp.StatusCode)
			}
			// The initial ADDED events prove the watch is being served.
			if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			stopped = true
			// A watch left open would make the graceful shutdown time out
			// and report it.
			if err := srv.shutdown(); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Logf("watch ended with %v", err)
			}
		})
	}
}
