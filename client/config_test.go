package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// certs is a CA with a server certificate for 127.0.0.1 and a client
// certificate for user alice, PEM encoded.
type certs struct {
	caPEM, serverCert, serverKey, clientCert, clientKey []byte
	pool                                                *x509.CertPool
}

func newCerts(t *testing.T) *certs {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	}
	c := &certs{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pool: x509.NewCertPool()}
	c.pool.AddCert(ca)
	c.serverCert, c.serverKey = leaf(2, "apiserver", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	c.clientCert, c.clientKey = leaf(3, "alice", x509.ExtKeyUsageClientAuth, nil)
	return c
}

// startTLSServer serves an empty pod list to requests that authenticate
// with the token or a client certificate of the CA, and 401 to others.
func startTLSServer(t *testing.T, c *certs, token string) *httptest.Server {
	cert, err := tls.X509KeyPair(c.serverCert, c.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := ""
		if r.Header.Get("Authorization") == "Bearer "+token {
			user = "token-user"
		} else if len(r.TLS.PeerCertificates) > 0 {
			user = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		if user == "" {
			writeStatus(w, metav1.Status{Status: metav1.StatusFailure, Code: 401, Reason: metav1.StatusReasonUnauthorized, Message: "Unauthorized"})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":%q},"items":[]}`, user)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: c.pool}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func writeKubeconfig(t *testing.T, server string, c *certs, token string) string {
	t.Helper()
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: with-token
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: token
  user:
    token: %s
- name: alice
  user:
    client-certificate-data: %s
    client-key-data: %s
- name: nobody
  user: {}
contexts:
- name: with-token
  context: {cluster: test, user: token, namespace: team-a}
- name: with-cert
  context: {cluster: test, user: alice}
- name: anonymous
  context: {cluster: test, user: nobody}
`, server, b64(c.caPEM), token, b64(c.clientCert), b64(c.clientKey))
	return writeKubeconfigFile(t, cfg)
}

// writeKubeconfigFile writes cfg to a kubeconfig file of the test's and
// returns its path.
func writeKubeconfigFile(t *testing.T, cfg string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestKubeconfigAuthenticates(t *testing.T) {
	c := newCerts(t)
	srv := startTLSServer(t, c, "s3cret")
	path := writeKubeconfig(t, srv.URL, c, "s3cret")
	for _, tc := range []struct {
		name, context, env string
		wantUser, wantNS   string
		wantUnauthorized   bool
	}{
		{name: "explicit path, current context, token", wantUser: "token-user", wantNS: "team-a"},
		{name: "context override, client certificate", context: "with-cert", wantUser: "alice", wantNS: "default"},
		{name: "KUBECONFIG", env: path, context: "with-cert", wantUser: "alice", wantNS: "default"},
		{name: "no credentials", context: "anonymous", wantUnauthorized: true, wantNS: "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := LoadOptions{Kubeconfig: path, Context: tc.context}
			if tc.env != "" {
				t.Setenv("KUBECONFIG", tc.env)
				opts.Kubeconfig = ""
			}
			cfg, err := LoadConfig(opts)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Namespace != tc.wantNS {
				t.Fatalf("namespace %q, want %q", cfg.Namespace, tc.wantNS)
			}
			cl, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.hc.CloseIdleConnections()
			l, err := NewResource[*corev1.Pod](cl, podsGVR, "").List(t.Context(), metav1.ListOptions{})
			if tc.wantUnauthorized {
				if !apierrors.IsUnauthorized(err) {
					t.Fatalf("got %v, want Unauthorized", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.ResourceVersion != tc.wantUser {
				t.Fatalf("authenticated as %q, want %q", l.ResourceVersion, tc.wantUser)
			}
		})
	}
}

func TestKubeconfigErrors(t *testing.T) {
	if _, err := LoadConfig(LoadOptions{Kubeconfig: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Fatal("missing kubeconfig: no error")
	}
	c := newCerts(t)
	path := writeKubeconfig(t, "https://127.0.0.1:1", c, "x")
	if _, err := LoadConfig(LoadOptions{Kubeconfig: path, Context: "no-such-context"}); err == nil {
		t.Fatal("unknown context: no error")
	}
	if _, err := New(&Config{}); err == nil {
		t.Fatal("empty config: no error")
	}
}

func TestDefaultUserAgent(t *testing.T) {
	ua := DefaultUserAgent()
	version, platform, ok := strings.Cut(strings.TrimPrefix(ua, "listwatch/"), " ")
	if !strings.HasPrefix(ua, "listwatch/") || !ok || version == "" || platform != "("+runtime.GOOS+"/"+runtime.GOARCH+")" {
		t.Fatalf("user agent %q, want listwatch/<version> (%s/%s)", ua, runtime.GOOS, runtime.GOARCH)
	}
}

func TestInClusterConfig(t *testing.T) {
	c := newCerts(t)
	srv := startTLSServer(t, c, "s3cret")
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ca := string(c.caPEM)
	inPod := map[string]string{"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := maps.Clone(m)
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		files map[string]string // in the service account directory
		env   map[string]string
		// offline cases only check the config: there is no server at
		// their address.
		offline  bool
		wantHost string
		wantNS   string
		// wantErr is matched with errors.Is, wantErrText as a substring.
		wantErr     error
		wantErrText string
	}{
		{name: "namespace file", files: map[string]string{"token": "s3cret\n", "ca.crt": ca, "namespace": "team-b\n"},
			env: inPod, wantNS: "team-b"},
		{name: "POD_NAMESPACE overrides the file", files: map[string]string{"token": "s3cret", "ca.crt": ca, "namespace": "team-b"},
			env: with(inPod, "POD_NAMESPACE", "team-c"), wantNS: "team-c"},
		{name: "no namespace: default", files: map[string]string{"token": "s3cret", "ca.crt": ca},
			env: inPod, wantNS: "default"},
		{name: "empty namespace file: default", files: map[string]string{"token": "s3cret", "ca.crt": ca, "namespace": "\n"},
			env: inPod, wantNS: "default"},
		{name: "IPv6 host", files: map[string]string{"token": "s3cret", "ca.crt": ca},
			env:     map[string]string{"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"},
			offline: true, wantHost: "https://[fd00::1]:443", wantNS: "default"},
		{name: "not in a pod", files: map[string]string{"token": "s3cret", "ca.crt": ca},
			env: map[string]string{}, wantErr: ErrNotInCluster, wantErrText: "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT not set"},
		{name: "no port", files: map[string]string{"token": "s3cret", "ca.crt": ca},
			env: map[string]string{"KUBERNETES_SERVICE_HOST": "127.0.0.1"}, wantErr: ErrNotInCluster, wantErrText: "KUBERNETES_SERVICE_PORT not set"},
		{name: "missing token", files: map[string]string{"ca.crt": ca},
			env: inPod, wantErr: fs.ErrNotExist, wantErrText: "service account token"},
		{name: "empty token", files: map[string]string{"token": " \n", "ca.crt": ca},
			env: inPod, wantErrText: "is empty"},
		{name: "missing CA", files: map[string]string{"token": "s3cret"},
			env: inPod, wantErr: fs.ErrNotExist, wantErrText: "service account CA"},
		{name: "garbage CA", files: map[string]string{"token": "s3cret", "ca.crt": "not a certificate\n"},
			env: inPod, wantErrText: "holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			getenv := func(k string) string { return tc.env[k] }
			cfg, err := inClusterConfig(dir, getenv)
			if tc.wantErr != nil || tc.wantErrText != "" {
				if err == nil {
					t.Fatal("no error")
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("error %q does not wrap %v", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErrText) {
					t.Errorf("error %q does not mention %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantHost := tc.wantHost
			if wantHost == "" {
				wantHost = "https://127.0.0.1:" + port
			}
			rc := cfg.REST
			if rc.Host != wantHost {
				t.Errorf("host %q, want %q", rc.Host, wantHost)
			}
			if rc.BearerToken != "s3cret" || rc.BearerTokenFile != filepath.Join(dir, "token") {
				t.Errorf("token %q from %q, want s3cret from %s", rc.BearerToken, rc.BearerTokenFile, filepath.Join(dir, "token"))
			}
			if rc.TLSClientConfig.CAFile != filepath.Join(dir, "ca.crt") {
				t.Errorf("CA file %q, want %s", rc.TLSClientConfig.CAFile, filepath.Join(dir, "ca.crt"))
			}
			if cfg.Namespace != tc.wantNS {
				t.Errorf("namespace %q, want %q", cfg.Namespace, tc.wantNS)
			}
			if tc.offline {
				return
			}
			cl, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.hc.CloseIdleConnections()
			if cl.Namespace() != tc.wantNS {
				t.Errorf("client namespace %q, want %q", cl.Namespace(), tc.wantNS)
			}
			l, err := NewResource[*corev1.Pod](cl, podsGVR, cl.Namespace()).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if l.ResourceVersion != "token-user" {
				t.Fatalf("authenticated as %q, want token-user", l.ResourceVersion)
			}
		})
	}
}

// writeExecKubeconfig writes a kubeconfig whose user gets its credentials
// from an exec plugin: the test binary itself, told by env (name, value
// pairs) how to act (see execPlugin in main_test.go).
func writeExecKubeconfig(t *testing.T, server string, c *certs, env ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// JSON strings are YAML double-quoted strings.
	q := func(s string) string {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// A race-enabled binary sleeps a second before a successful exit
	// unless told not to.
	env = append([]string{"GORACE", "atexit_sleep_ms=0"}, env...)
	var envYAML strings.Builder
	for i := 0; i+1 < len(env); i += 2 {
		fmt.Fprintf(&envYAML, "      - name: %s\n        value: %s\n", q(env[i]), q(env[i+1]))
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: exec
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: plugin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: %s
      interactiveMode: Never
      env:
%scontexts:
- name: exec
  context: {cluster: test, user: plugin, namespace: team-e}
`, q(server), base64.StdEncoding.EncodeToString(c.caPEM), q(self), envYAML.String())
	return writeKubeconfigFile(t, cfg)
}

func TestExecPluginAuthenticates(t *testing.T) {
	c := newCerts(t)
	srv := startTLSServer(t, c, "s3cret")
	for _, tc := range []struct {
		name string
		env  []string // of the plugin, name and value pairs
		// One of: the user the server sees, a 401, or an error before
		// any request is sent, holding all of wantErrText.
		wantUser         string
		wantUnauthorized bool
		wantErrText      []string
	}{
		{name: "token", env: []string{execPluginTokenEnv, "s3cret"}, wantUser: "token-user"},
		{name: "wrong token", env: []string{execPluginTokenEnv, "not-the-token"}, wantUnauthorized: true},
		// client-go passes the plugin's stderr through to the process's
		// and reports only its exit status.
		{name: "plugin fails", env: []string{execPluginFailEnv, "exec plugin: refusing on purpose (test)"},
			wantErrText: []string{"getting credentials: exec: executable", "failed with exit code 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeExecKubeconfig(t, srv.URL, c, tc.env...)
			cfg, err := LoadConfig(LoadOptions{Kubeconfig: path})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.REST.ExecProvider == nil || cfg.REST.ExecProvider.InteractiveMode != "Never" {
				t.Fatalf("exec provider %+v, want one with interactiveMode Never", cfg.REST.ExecProvider)
			}
			if cfg.Namespace != "team-e" {
				t.Fatalf("namespace %q, want team-e", cfg.Namespace)
			}
			cl, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.hc.CloseIdleConnections()
			l, err := NewResource[*corev1.Pod](cl, podsGVR, "").List(t.Context(), metav1.ListOptions{})
			switch {
			case tc.wantUnauthorized:
				if !apierrors.IsUnauthorized(err) {
					t.Fatalf("got %v, want Unauthorized", err)
				}
			case tc.wantErrText != nil:
				if err == nil {
					t.Fatal("no error")
				}
				t.Logf("reported as: %v", err)
				if apierrors.IsUnauthorized(err) {
					t.Fatalf("got %v, want the plugin's failure before any request", err)
				}
				for _, s := range tc.wantErrText {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if l.ResourceVersion != tc.wantUser {
					t.Fatalf("authenticated as %q, want %q", l.ResourceVersion, tc.wantUser)
				}
			}
		})
	}
}
