package kubeconfig

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/listwatch/listwatch/internal/pki"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWriteLoadsWithClientcmd writes a kubeconfig for a real HTTPS server
// on 127.0.0.1 that checks the bearer token, loads it the way kubectl does
// and calls /version through the resulting rest.Config.
func TestWriteLoadsWithClientcmd(t *testing.T) {
	serving, err := pki.EnsureServing(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const token = "s3cret-token"
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"major":"1","minor":"37","gitVersion":"v1.37.0-listwatch"}`)
	}))
	srv.TLS = serving.TLSConfig()
	srv.StartTLS()
	defer srv.Close()

	tests := []struct {
		name, context, namespace string
		wantContext, wantNS      string
	}{
		{name: "defaults", wantContext: DefaultContext, wantNS: "default"},
		{name: "named context and namespace", context: "dev", namespace: "team-a", wantContext: "dev", wantNS: "team-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "kubeconfig")
			if err := Write(path, Config{Server: srv.URL, CAData: serving.CAPEM, Token: token, Context: tt.context, Namespace: tt.namespace}); err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if perm := info.Mode().Perm(); perm != 0o600 {
				t.Errorf("mode %o, want 600", perm)
			}

			raw, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if raw.CurrentContext != tt.wantContext {
				t.Errorf("current-context %q, want %q", raw.CurrentContext, tt.wantContext)
			}
			if c := raw.Clusters[tt.wantContext]; c == nil || !bytes.Equal(c.CertificateAuthorityData, serving.CAPEM) {
				t.Errorf("cluster %q lacks the CA data", tt.wantContext)
			}

			loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
				&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{})
			ns, _, err := loader.Namespace()
			if err != nil {
				t.Fatal(err)
			}
			if ns != tt.wantNS {
				t.Errorf("namespace %q, want %q", ns, tt.wantNS)
			}
			restCfg, err := loader.ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			if restCfg.Host != srv.URL || restCfg.BearerToken != token {
				t.Errorf("rest.Config host %q token %q", restCfg.Host, restCfg.BearerToken)
			}
			client, err := rest.HTTPClientFor(restCfg)
			if err != nil {
				t.Fatal(err)
			}
			defer client.CloseIdleConnections()
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, restCfg.Host+"/version", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("v1.37.0-listwatch")) {
				t.Errorf("GET /version: %d %s", resp.StatusCode, body)
			}
		})
	}
}

func TestWriteRejectsMissingServer(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "kubeconfig"), Config{Token: "x"}); err == nil {
		t.Fatal("Write without a server succeeded")
	}
}
