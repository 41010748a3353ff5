// Package kubeconfig writes the kubeconfig file through which kubectl,
// client-go and listwatch's own clients reach a local listwatch server.
package kubeconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/listwatch/listwatch/internal/pki"
)

// DefaultContext is the context (and cluster and user) name Write uses when
// Config.Context is empty.
const DefaultContext = "listwatch"

// Config is the one cluster, user and context a kubeconfig written by Write
// holds.
type Config struct {
	// Server is the API server URL, e.g. https://127.0.0.1:6443.
	Server string
	// CAData is the PEM CA bundle that verifies the server's certificate.
	CAData []byte
	// Token is the bearer token of the user; with a client certificate
	// instead, ClientCertData and ClientKeyData are its PEM certificate and
	// key.
	Token                         string
	ClientCertData, ClientKeyData []byte
	// Context names the context, cluster and user; DefaultContext if empty.
	Context string
	// Namespace is the context's default namespace; none if empty.
	Namespace string
}

// Write writes c to path as a kubeconfig whose current-context is c's
// context, replacing any file there; the file is readable by its owner only
// because it holds a credential.
func Write(path string, c Config) error {
	if c.Server == "" {
		return errors.New("kubeconfig: no server URL")
	}
	name := c.Context
	if name == "" {
		name = DefaultContext
	}
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = c.Server
	cluster.CertificateAuthorityData = c.CAData
	cfg.Clusters[name] = cluster
	user := clientcmdapi.NewAuthInfo()
	user.Token = c.Token
	user.ClientCertificateData = c.ClientCertData
	user.ClientKeyData = c.ClientKeyData
	cfg.AuthInfos[name] = user
	ctx := clientcmdapi.NewContext()
	ctx.Cluster = name
	ctx.AuthInfo = name
	ctx.Namespace = c.Namespace
	cfg.Contexts[name] = ctx
	cfg.CurrentContext = name

	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if err := pki.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	return nil
}
