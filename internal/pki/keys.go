package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// ServiceAccountKeyFile is the service account signing key's file name in
// the directory given to EnsureServiceAccountKey.
const ServiceAccountKeyFile = "sa.key"

// EnsureServiceAccountKey returns the key that signs service account
// tokens, stored in dir as a PKCS#8 PEM readable by its owner only; a new
// ECDSA P-256 key is made when there is none, so that tokens issued before
// a restart stay valid after it. A file that does not hold a signing key
// is an error rather than replaced: tokens signed by it would silently
// stop working.
func EnsureServiceAccountKey(dir string) (crypto.Signer, error) {
	path := filepath.Join(dir, ServiceAccountKeyFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		return parseSigner(path, data)
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("pki: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	if err := WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	return key, nil
}

// LoadSigner reads a PEM private key file (PKCS#8, or the EC and RSA forms
// openssl writes) that can sign.
func LoadSigner(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return parseSigner(path, data)
}

// parseSigner reads a PEM private key (PKCS#8, or the EC and RSA forms
// openssl writes).
func parseSigner(path string, data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("pki: %s: no PEM block", path)
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", path, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("pki: %s: %T cannot sign", path, key)
	}
	return signer, nil
}

// Client is a client certificate and its key, as PEM files.
type Client struct {
	CertFile, KeyFile string
}

// EnsureClient returns a client certificate for user in groups (the
// subject's common name and organizations, which kube-apiserver's client
// certificate authentication reads), signed by the CA in dir and stored
// there as name.crt and name.key; one already there is reused while it
// chains to the CA, names the same user and groups and is not near
// expiry.
func EnsureClient(dir, name, user string, groups []string) (*Client, error) {
	now := time.Now()
	ca, caKey, _, err := ensureCA(dir, now)
	if err != nil {
		return nil, err
	}
	l := leaf{certFile: name + ".crt", keyFile: name + ".key", commonName: user, organizations: groups,
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := l.ensure(dir, ca, caKey, now); err != nil {
		return nil, err
	}
	return &Client{CertFile: filepath.Join(dir, l.certFile), KeyFile: filepath.Join(dir, l.keyFile)}, nil
}

// sameSubject reports whether cert names the leaf's common name and
// organizations.
func (l leaf) sameSubject(subject pkix.Name) bool {
	return subject.CommonName == l.commonName && slices.Equal(subject.Organization, l.organizations)
}
