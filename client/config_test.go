package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
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
