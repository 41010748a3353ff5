package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/listwatch/listwatch/internal/pki"
)

// TestEmbeddedIsClosed: a member started with its default URLs answers
// only a client holding the certificate made in its data directory. Any
// other local process (no TLS, TLS without a certificate, a certificate of
// another CA) is refused on the client and the peer port, and the keys are
// readable by their owner only.
func TestEmbeddedIsClosed(t *testing.T) {
	dir := t.TempDir()
	e, err := StartEmbedded(t.Context(), EmbeddedConfig{Dir: dir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })

	cfg := e.ClientConfig()
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("the server's own client: %v", err)
	}
	if _, err := s.Create(t.Context(), "/secret", []byte("v")); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()

	other, err := pki.EnsureMutual(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	otherTLS, err := mutualClientTLS(other)
	if err != nil {
		t.Fatal(err)
	}
	// A certificate of another CA, trusting this member's CA so that only
	// the member's check of the client is tested.
	foreign := otherTLS.Clone()
	foreign.RootCAs = cfg.TLS.RootCAs
	for _, tc := range []struct {
		name      string
		endpoints []string
		tls       *tls.Config
	}{
		{"plain", []string{"http://" + hostOf(t, e.Endpoints[0])}, nil},
		{"no client certificate", e.Endpoints, &tls.Config{RootCAs: cfg.TLS.RootCAs, MinVersion: tls.VersionTLS12}},
		{"certificate of another CA", e.Endpoints, foreign},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, err := clientv3.New(clientv3.Config{Endpoints: tc.endpoints, TLS: tc.tls, DialTimeout: time.Second, Logger: zap.NewNop()})
			if err != nil {
				return // refused while connecting
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			if resp, err := cli.Get(ctx, "/secret"); err == nil {
				t.Fatalf("read %d keys without the member's client certificate", len(resp.Kvs))
			}
		})
	}

	t.Run("peer port", func(t *testing.T) {
		for _, c := range []*tls.Config{
			{RootCAs: cfg.TLS.RootCAs, MinVersion: tls.VersionTLS12},
			foreign,
		} {
			hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: c}}
			resp, err := hc.Get(e.PeerURL + "/members")
			if err == nil {
				resp.Body.Close()
				t.Fatalf("peer port answered %s without the member's certificate", resp.Status)
			}
			hc.CloseIdleConnections()
		}
		resp, err := http.Get("http://" + hostOf(t, e.PeerURL) + "/members")
		if err == nil {
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatal("peer port answered plain HTTP")
			}
		}
	})

	t.Run("key files", func(t *testing.T) {
		pkiDir := filepath.Join(dir, "pki")
		st, err := os.Stat(pkiDir)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v, want owner-only", pkiDir, st.Mode().Perm())
		}
		err = filepath.WalkDir(pkiDir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Ext(path) != ".key" {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if info.Mode().Perm()&0o077 != 0 {
				return errors.New(path + " is readable by others: " + info.Mode().Perm().String())
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
}

// hostOf is the host:port of a URL.
func hostOf(t *testing.T, u string) string {
	t.Helper()
	for _, p := range []string{"https://", "http://"} {
		if len(u) > len(p) && u[:len(p)] == p {
			return u[len(p):]
		}
	}
	t.Fatalf("not a URL: %q", u)
	return ""
}
