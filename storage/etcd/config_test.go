package etcd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate and its key as PEM files.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "listwatch test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	given := &tls.Config{ServerName: "given"}
	tests := []struct {
		name      string
		cfg       Config
		wantNil   bool
		wantErr   bool
		wantCerts int
		wantRoots bool
	}{
		{name: "no TLS", wantNil: true},
		{name: "given config wins", cfg: Config{TLS: given, CAFile: garbage}},
		{name: "client cert and CA", cfg: Config{CertFile: cert, KeyFile: key, CAFile: cert}, wantCerts: 1, wantRoots: true},
		{name: "CA only", cfg: Config{CAFile: cert}, wantRoots: true},
		{name: "missing key", cfg: Config{CertFile: cert, KeyFile: filepath.Join(dir, "none")}, wantErr: true},
		{name: "CA without certificates", cfg: Config{CAFile: garbage}, wantErr: true},
		{name: "missing CA", cfg: Config{CAFile: filepath.Join(dir, "none")}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cfg.tlsConfig()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			switch {
			case tc.wantErr:
			case tc.wantNil:
				if got != nil {
					t.Errorf("got %+v, want nil", got)
				}
			case tc.cfg.TLS != nil:
				if got != tc.cfg.TLS {
					t.Errorf("got %p, want the given config %p", got, tc.cfg.TLS)
				}
			default:
				if len(got.Certificates) != tc.wantCerts || (got.RootCAs != nil) != tc.wantRoots {
					t.Errorf("%d certificates, roots %v; want %d, %v", len(got.Certificates), got.RootCAs != nil, tc.wantCerts, tc.wantRoots)
				}
			}
		})
	}
}

func TestNewFailsFast(t *testing.T) {
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no endpoints", Config{}},
		{"nobody listening", Config{Endpoints: []string{fmt.Sprintf("http://127.0.0.1:%d", ports[0])}, DialTimeout: 200 * time.Millisecond}},
		{"bad CA", Config{Endpoints: []string{"http://127.0.0.1:1"}, CAFile: "/nonexistent"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := New(t.Context(), tc.cfg); err == nil {
				s.Close()
				t.Fatal("New succeeded")
			}
		})
	}
}
