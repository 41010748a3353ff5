package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func servingLeaf(t *testing.T, s *Serving) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(s.Certificate.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEnsureServingVerifiesForLocalHosts(t *testing.T) {
	dir := t.TempDir()
	s, err := EnsureServing(dir, "example.test", "10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := CertPool(s.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	cert := servingLeaf(t, s)
	for _, host := range []string{"127.0.0.1", "::1", "localhost", "example.test", "10.1.2.3"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("verify for %s: %v", host, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: pool}); err == nil {
		t.Error("certificate verified for a host it was not issued for")
	}
	ca, err := x509.ParseCertificate(mustDecode(t, s.CAPEM))
	if err != nil {
		t.Fatal(err)
	}
	if !ca.IsCA || ca.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("CA: IsCA=%v algorithm=%v, want a ECDSA CA", ca.IsCA, ca.PublicKeyAlgorithm)
	}
	info, err := os.Stat(filepath.Join(dir, CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("CA key mode %o, want 600", perm)
	}
}

// TestEnsureServingTLSHandshake serves HTTPS with the certificate on
// 127.0.0.1 and connects with a client trusting only the CA.
func TestEnsureServingTLSHandshake(t *testing.T) {
	s, err := EnsureServing(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	srv.TLS = s.TLSConfig()
	srv.StartTLS()
	defer srv.Close()

	pool, err := CertPool(s.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL) // https://127.0.0.1:port
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "hello" {
		t.Errorf("body %q", body)
	}
}

func mustDecode(t *testing.T, pemBytes []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatal("no PEM block")
	}
	return block.Bytes
}

func TestEnsureServingReuse(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		// change alters the stored state between the two calls.
		change     func(t *testing.T, dir string)
		secondNow  time.Time
		extraHosts []string
		wantSameCA bool
		wantSameSv bool
	}{
		{name: "unchanged", change: func(*testing.T, string) {}, secondNow: now, wantSameCA: true, wantSameSv: true},
		{name: "new host reissues serving only", change: func(*testing.T, string) {}, secondNow: now, extraHosts: []string{"new.test"}, wantSameCA: true},
		{name: "serving near expiry reissued", change: func(*testing.T, string) {}, secondNow: now.Add(servingLifetime - renewBefore/2), wantSameCA: true},
		{name: "CA near expiry replaced", change: func(*testing.T, string) {}, secondNow: now.Add(caLifetime - renewBefore/2)},
		{name: "corrupt serving key", change: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, ServingKeyFile), []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, secondNow: now, wantSameCA: true},
		{name: "missing CA key", change: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, CAKeyFile)); err != nil {
				t.Fatal(err)
			}
		}, secondNow: now},
		{name: "CA swapped: serving reissued by the stored CA", change: func(t *testing.T, dir string) {
			other := t.TempDir()
			if _, err := ensureServing(other, now, nil); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{CACertFile, CAKeyFile} {
				if err := os.WriteFile(filepath.Join(dir, f), readFile(t, other, f), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}, secondNow: now, wantSameCA: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			first, err := ensureServing(dir, now, nil)
			if err != nil {
				t.Fatal(err)
			}
			firstCert := readFile(t, dir, ServingCert)
			tt.change(t, dir)
			caBefore := readFile(t, dir, CACertFile)
			second, err := ensureServing(dir, tt.secondNow, tt.extraHosts)
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Equal(caBefore, second.CAPEM); got != tt.wantSameCA {
				t.Errorf("CA reused = %v, want %v", got, tt.wantSameCA)
			}
			if got := bytes.Equal(first.Certificate.Certificate[0], second.Certificate.Certificate[0]); got != tt.wantSameSv {
				t.Errorf("serving certificate reused = %v, want %v", got, tt.wantSameSv)
			}
			if !bytes.Equal(readFile(t, dir, CACertFile), second.CAPEM) {
				t.Error("CA on disk differs from the CA returned")
			}
			if !tt.wantSameSv && bytes.Equal(firstCert, readFile(t, dir, ServingCert)) {
				t.Error("serving certificate on disk was not replaced")
			}
			// Whatever happened, the result verifies against its CA.
			pool, err := CertPool(second.CAPEM)
			if err != nil {
				t.Fatal(err)
			}
			hosts := append([]string{"127.0.0.1"}, tt.extraHosts...)
			for _, h := range hosts {
				if _, err := servingLeaf(t, second).Verify(x509.VerifyOptions{DNSName: h, Roots: pool, CurrentTime: tt.secondNow}); err != nil {
					t.Errorf("verify %s: %v", h, err)
				}
			}
		})
	}
}

func TestLoadServing(t *testing.T) {
	dir := t.TempDir()
	s, err := EnsureServing(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A chain file (leaf + CA) yields the CA as CAPEM.
	chain := append(readFile(t, dir, ServingCert), s.CAPEM...)
	chainFile := filepath.Join(dir, "chain.crt")
	if err := os.WriteFile(chainFile, chain, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, cert, key string
		wantCA          []byte
		wantErr         bool
	}{
		{name: "chain", cert: chainFile, key: filepath.Join(dir, ServingKeyFile), wantCA: s.CAPEM},
		{name: "leaf only", cert: filepath.Join(dir, ServingCert), key: filepath.Join(dir, ServingKeyFile), wantCA: readFile(t, dir, ServingCert)},
		{name: "mismatched key", cert: filepath.Join(dir, ServingCert), key: filepath.Join(dir, CAKeyFile), wantErr: true},
		{name: "missing", cert: filepath.Join(dir, "nope.crt"), key: filepath.Join(dir, ServingKeyFile), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadServing(tt.cert, tt.key)
			if tt.wantErr {
				if err == nil {
					t.Fatal("want error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.CAPEM, tt.wantCA) {
				t.Errorf("CAPEM = %s, want %s", got.CAPEM, tt.wantCA)
			}
		})
	}
}

func TestHostList(t *testing.T) {
	got := hostList([]string{"localhost", "", "a.test", "a.test", net.IPv6loopback.String()})
	want := []string{"127.0.0.1", "::1", "localhost", "a.test"}
	if len(got) != len(want) {
		t.Fatalf("hostList = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("hostList = %v, want %v", got, want)
		}
	}
}
