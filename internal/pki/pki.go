// Package pki makes the TLS material of a local API server: a self-signed
// certificate authority and a serving certificate it signs, kept in a
// directory so that clients trusting the CA keep working across restarts.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// File names inside the directory given to EnsureServing.
const (
	CACertFile     = "ca.crt"
	CAKeyFile      = "ca.key"
	ServingCert    = "apiserver.crt"
	ServingKeyFile = "apiserver.key"
)

// Lifetimes of generated certificates, and how close to expiry a stored
// certificate may be before it is replaced rather than reused.
const (
	caLifetime      = 10 * 365 * 24 * time.Hour
	servingLifetime = 365 * 24 * time.Hour
	renewBefore     = 30 * 24 * time.Hour
	// backdate absorbs clock skew between this machine and its clients.
	backdate = time.Hour
)

// DefaultHosts are the names a local server is reached by; EnsureServing
// always includes them.
var DefaultHosts = []string{"127.0.0.1", "::1", "localhost"}

// Serving is a serving certificate and the CA PEM clients need to trust it.
type Serving struct {
	// Certificate is the serving certificate chain and its key.
	Certificate tls.Certificate
	// CAPEM is the PEM certificate of the CA that signed Certificate: the
	// certificate-authority-data of a kubeconfig.
	CAPEM []byte
}

// TLSConfig returns a server TLS configuration presenting s.Certificate.
func (s *Serving) TLSConfig() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{s.Certificate},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}
}

// EnsureServing returns a serving certificate for DefaultHosts plus
// extraHosts (IP addresses or DNS names) signed by a self-signed ECDSA P-256
// CA, both stored in dir. Certificates already in dir are reused while they
// parse, chain to the CA, cover every host and are not near expiry; a bad
// CA is replaced with its serving certificate, a bad serving certificate
// alone is re-issued by the existing CA.
func EnsureServing(dir string, extraHosts ...string) (*Serving, error) {
	return ensureServing(dir, time.Now(), extraHosts)
}

func ensureServing(dir string, now time.Time, extraHosts []string) (*Serving, error) {
	ca, caKey, caPEM, err := ensureCA(dir, now)
	if err != nil {
		return nil, err
	}
	l := leaf{certFile: ServingCert, keyFile: ServingKeyFile, commonName: "listwatch-apiserver",
		hosts: hostList(extraHosts), usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	pair, err := l.ensure(dir, ca, caKey, now)
	if err != nil {
		return nil, err
	}
	return &Serving{Certificate: pair, CAPEM: caPEM}, nil
}

// ensureCA returns the CA stored in dir, made (with dir) when there is
// none or it is bad.
func ensureCA(dir string, now time.Time) (*x509.Certificate, crypto.Signer, []byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, nil, fmt.Errorf("pki: %w", err)
	}
	if ca, caKey, caPEM, err := loadCA(dir, now); err == nil {
		return ca, caKey, caPEM, nil
	}
	return newCA(dir, now)
}

// File names inside the directory given to EnsureMutual.
const (
	PeerCertFile   = "peer.crt"
	PeerKeyFile    = "peer.key"
	ClientCertFile = "client.crt"
	ClientKeyFile  = "client.key"
)

// Mutual is the material of TLS connections on which both ends show a
// certificate the same CA signed: files, for servers such as etcd that
// take file names.
type Mutual struct {
	// CAFile is the CA both ends trust, and the only one.
	CAFile string
	// PeerCertFile and PeerKeyFile are a certificate for DefaultHosts
	// usable to serve and to dial (etcd members dial one another).
	PeerCertFile, PeerKeyFile string
	// ClientCertFile and ClientKeyFile are a client certificate.
	ClientCertFile, ClientKeyFile string
}

// EnsureMutual returns the material of mutual TLS between local
// processes, stored in dir (made owner-only), reused as EnsureServing
// reuses its certificates. Nothing without the keys in dir can connect
// to a server that requires its client certificates.
func EnsureMutual(dir string) (*Mutual, error) {
	now := time.Now()
	ca, caKey, _, err := ensureCA(dir, now)
	if err != nil {
		return nil, err
	}
	peer := leaf{certFile: PeerCertFile, keyFile: PeerKeyFile, commonName: "listwatch-peer", hosts: DefaultHosts,
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	client := leaf{certFile: ClientCertFile, keyFile: ClientKeyFile, commonName: "listwatch-client",
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, l := range []leaf{peer, client} {
		if _, err := l.ensure(dir, ca, caKey, now); err != nil {
			return nil, err
		}
	}
	return &Mutual{
		CAFile:         filepath.Join(dir, CACertFile),
		PeerCertFile:   filepath.Join(dir, PeerCertFile),
		PeerKeyFile:    filepath.Join(dir, PeerKeyFile),
		ClientCertFile: filepath.Join(dir, ClientCertFile),
		ClientKeyFile:  filepath.Join(dir, ClientKeyFile),
	}, nil
}

// LoadServing loads a serving certificate and key from PEM files given by the
// operator; CAPEM is the last certificate of the chain in certFile (the CA
// when the file holds a full chain, the leaf itself when self-signed).
func LoadServing(certFile, keyFile string) (*Serving, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("pki: load %s: %w", certFile, err)
	}
	last := cert.Certificate[len(cert.Certificate)-1]
	return &Serving{
		Certificate: cert,
		CAPEM:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: last}),
	}, nil
}

// hostList returns DefaultHosts followed by the extra hosts not already in it.
func hostList(extra []string) []string {
	hosts := slices.Clone(DefaultHosts)
	for _, h := range extra {
		if h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

func loadCA(dir string, now time.Time) (*x509.Certificate, crypto.Signer, []byte, error) {
	certPEM, cert, key, err := readPair(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, nil, err
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, nil, errors.New("pki: stored CA certificate is not a CA")
	}
	if err := fresh(cert, now); err != nil {
		return nil, nil, nil, err
	}
	return cert, key, certPEM, nil
}

// leaf is a certificate the CA signs, kept in dir as certFile and
// keyFile.
type leaf struct {
	certFile, keyFile string
	commonName        string
	// hosts are the IP addresses and DNS names a serving certificate
	// covers.
	hosts  []string
	usages []x509.ExtKeyUsage
	// organizations are the subject's organizations (a client
	// certificate's groups); none for the others.
	organizations []string
}

// ensure returns the certificate stored in dir while it parses, chains to
// ca for its usages, covers its hosts and is not near expiry; else a new
// one.
func (l leaf) ensure(dir string, ca *x509.Certificate, caKey crypto.Signer, now time.Time) (tls.Certificate, error) {
	if pair, err := l.load(dir, ca, now); err == nil {
		return pair, nil
	}
	return l.issue(dir, ca, caKey, now)
}

func (l leaf) load(dir string, ca *x509.Certificate, now time.Time) (tls.Certificate, error) {
	certFile, keyFile := filepath.Join(dir, l.certFile), filepath.Join(dir, l.keyFile)
	_, cert, _, err := readPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := fresh(cert, now); err != nil {
		return tls.Certificate{}, err
	}
	if !l.sameSubject(cert.Subject) {
		return tls.Certificate{}, fmt.Errorf("pki: stored certificate %s names another subject", l.certFile)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	names := l.hosts
	if len(names) == 0 {
		names = []string{""}
	}
	for _, h := range names {
		if _, err := cert.Verify(x509.VerifyOptions{
			DNSName:     h,
			Roots:       roots,
			CurrentTime: now,
			KeyUsages:   l.usages,
		}); err != nil {
			return tls.Certificate{}, fmt.Errorf("pki: stored certificate %s: %w", l.certFile, err)
		}
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: %w", err)
	}
	return pair, nil
}

// fresh reports whether cert is valid now and for a while yet.
func fresh(cert *x509.Certificate, now time.Time) error {
	if now.Before(cert.NotBefore) || now.Add(renewBefore).After(cert.NotAfter) {
		return fmt.Errorf("pki: certificate %q expired or about to expire (%s)", cert.Subject.CommonName, cert.NotAfter)
	}
	return nil
}

// readPair reads a PEM certificate and its PEM private key and checks they
// match.
func readPair(certFile, keyFile string) ([]byte, *x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: %s: %w", certFile, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: %s: %w", certFile, err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, nil, nil, fmt.Errorf("pki: %s: key cannot sign", keyFile)
	}
	return certPEM, cert, key, nil
}

func newCA(dir string, now time.Time) (*x509.Certificate, crypto.Signer, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("listwatch-ca@%d", now.Unix())},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: create CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: %w", err)
	}
	certPEM, err := writePair(dir, CACertFile, CAKeyFile, der, key)
	if err != nil {
		return nil, nil, nil, err
	}
	return cert, key, certPEM, nil
}

func (l leaf) issue(dir string, ca *x509.Certificate, caKey crypto.Signer, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: l.commonName, Organization: l.organizations},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(servingLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  l.usages,
	}
	for _, h := range l.hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: create certificate %s: %w", l.certFile, err)
	}
	certPEM, err := writePair(dir, l.certFile, l.keyFile, der, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, l.keyFile))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: %w", err)
	}
	return pair, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, fmt.Errorf("pki: serial number: %w", err)
	}
	return n, nil
}

// writePair stores a DER certificate and its key as PEM files, the key
// readable by the owner only, and returns the certificate PEM.
func writePair(dir, certName, keyName string, der []byte, key *ecdsa.PrivateKey) ([]byte, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	// Key first: a certificate on disk without its key would be unusable.
	if err := WriteFile(filepath.Join(dir, keyName), keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := WriteFile(filepath.Join(dir, certName), certPEM, 0o644); err != nil {
		return nil, err
	}
	return certPEM, nil
}

// WriteFile writes data to path through a temporary file and a rename, so
// that a reader (or a crash) never sees a half-written credential: keys,
// certificates, tokens and kubeconfigs all go through it.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(perm)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

// CertPool returns a pool holding the certificates of a PEM bundle.
func CertPool(caPEM []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("pki: no certificate in CA bundle")
	}
	return pool, nil
}
