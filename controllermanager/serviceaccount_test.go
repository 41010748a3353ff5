package controllermanager

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllers/rootcacert"
	"github.com/listwatch/listwatch/storage/memory"
)

// TestServiceAccountsAndRootCA runs the service account controller and the
// root CA publisher against an API server that runs kube's ServiceAccount
// admission: a new namespace gets its account "default" and the ConfigMap
// kube-root-ca.crt, and a pod created in it right away is admitted with
// the token volume that reads them.
func TestServiceAccountsAndRootCA(t *testing.T) {
	for _, name := range []string{ServiceAccount, RootCACert} {
		if !slices.Contains(AllControllers(), name) {
			t.Fatalf("AllControllers() = %v lacks %s", AllControllers(), name)
		}
	}
	st := memory.New()
	defer st.Close()
	srv, err := apiserver.New(t.Context(), apiserver.Config{Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer func() {
		hs.CloseClientConnections()
		hs.Close()
		srv.Close()
	}()
	// The server is plain HTTP; the CA the client would trust is what the
	// publisher publishes.
	ca := selfSignedCA(t)
	cc := &client.Config{REST: &rest.Config{Host: hs.URL, TLSClientConfig: rest.TLSClientConfig{CAData: []byte(ca)}}, QPS: -1}
	m, err := New(Config{
		Client:         cc,
		Controllers:    []string{ServiceAccount, RootCACert},
		LeaderElection: LeaderElection{Disabled: true},
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	c, err := client.New(&client.Config{REST: &rest.Config{Host: hs.URL}, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.For[*corev1.Namespace](c, "").Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// ServiceAccount admission waits a moment for the account "default"
	// the controller is creating.
	p, err := client.For[*corev1.Pod](c, "fresh").Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.ServiceAccountName != "default" || len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].Projected == nil {
		t.Errorf("pod spec %+v", p.Spec)
	}
	var cm *corev1.ConfigMap
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if cm, err = client.For[*corev1.ConfigMap](c, "fresh").Get(t.Context(), rootcacert.ConfigMapName, metav1.GetOptions{}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data[rootcacert.DataKey] != ca || cm.Annotations[rootcacert.DescriptionAnnotation] == "" {
		t.Errorf("ConfigMap %+v", cm)
	}
}

// selfSignedCA is the PEM of a new self-signed CA certificate.
func selfSignedCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
