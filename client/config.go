package client

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Default client-side rate limits. client-go's are 5 requests per second
// with bursts of 10, which throttles even a small controller manager that
// starts a few dozen informers at once; kubectl moved to 50 and a burst of
// 300 for the same reason. An informer makes one request per relist or
// re-watch, so these limits only bite a client that writes a lot.
const (
	DefaultQPS   = 50
	DefaultBurst = 100
)

// Config says how to reach and authenticate to an API server.
type Config struct {
	// REST holds the server's address, TLS settings and credentials
	// (tokens, client certificates, exec plugins). Only its transport
	// settings are used: its rate limits, timeout and codecs are not.
	REST *rest.Config
	// Namespace is the default namespace of the kubeconfig context, or
	// "default".
	Namespace string
	// QPS and Burst limit the rate of requests; DefaultQPS and DefaultBurst
	// when 0, no limit when QPS is negative.
	QPS   float32
	Burst int
	// UserAgent is sent with every request; DefaultUserAgent() when empty.
	UserAgent string
	// PreferJSON makes the client ask for JSON even for built-in types,
	// which it otherwise reads as protobuf.
	PreferJSON bool
	// KeepManagedFields keeps metadata.managedFields in the objects of
	// the client's ListerWatchers (its informers.Source side), which
	// otherwise leave them out. Set it with the factory's own
	// KeepManagedFields.
	KeepManagedFields bool
	// MaxEventBytes caps the size of one watch event or protobuf list
	// body; DefaultMaxEventBytes when 0.
	MaxEventBytes int
	// MaxRetries bounds how often a request the server refused with a
	// Retry-After (429 Too Many Requests, or a 5xx) is sent again after
	// the delay asked for; DefaultMaxRetries when 0, never when negative.
	MaxRetries int
}

// DefaultMaxRetries is client-go's default number of retries of a request
// the server asked to retry later.
const DefaultMaxRetries = 10

// DefaultMaxEventBytes bounds a single watch event: an object in etcd is at
// most a few MiB, so anything far larger is a broken stream, and is refused
// before it is buffered.
const DefaultMaxEventBytes = 64 << 20

// LoadOptions select a kubeconfig and a context in it.
type LoadOptions struct {
	// Kubeconfig is the path of the file to read. When empty, the files of
	// $KUBECONFIG, or ~/.kube/config, are merged, and when there are none
	// the in-cluster service account is used.
	Kubeconfig string
	// Context overrides the file's current-context.
	Context string
	// Namespace overrides the context's namespace.
	Namespace string
}

// LoadConfig reads a kubeconfig the way kubectl does.
func LoadConfig(opts LoadOptions) (*Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = opts.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: opts.Context}
	overrides.Context.Namespace = opts.Namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("client: loading kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("client: kubeconfig namespace: %w", err)
	}
	if ns == "" {
		ns = "default"
	}
	return &Config{REST: rc, Namespace: ns}, nil
}

// serviceAccountDir is where the kubelet mounts a pod's service account
// credentials: its token, the cluster's CA and the pod's namespace.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// ErrNotInCluster is returned, wrapped, by InClusterConfig when the
// environment a pod is given (KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT) is missing.
var ErrNotInCluster = errors.New("not running in a Kubernetes pod")

// InClusterConfig is the configuration of a process in a pod: the API
// server at $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT over HTTPS,
// authenticated with the service account's token (re-read from its file as
// the kubelet rotates it) and verified with the service account's CA, and
// the namespace $POD_NAMESPACE, else that of the service account's
// namespace file, else "default". Outside a pod its error wraps
// ErrNotInCluster.
func InClusterConfig() (*Config, error) {
	return inClusterConfig(serviceAccountDir, os.Getenv)
}

// inClusterConfig is InClusterConfig with the service account's files in
// dir and the environment read with getenv.
func inClusterConfig(dir string, getenv func(string) string) (*Config, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	var missing []string
	if host == "" {
		missing = append(missing, "KUBERNETES_SERVICE_HOST")
	}
	if port == "" {
		missing = append(missing, "KUBERNETES_SERVICE_PORT")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("client: in-cluster config: %w: %s not set", ErrNotInCluster, strings.Join(missing, " and "))
	}

	tokenFile := filepath.Join(dir, "token")
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("client: in-cluster config: service account token: %w", err)
	}
	// client-go trims the token it re-reads from the file: trim the first
	// one alike.
	token := strings.TrimSpace(string(b))
	if token == "" {
		return nil, fmt.Errorf("client: in-cluster config: service account token %s is empty", tokenFile)
	}

	caFile := filepath.Join(dir, "ca.crt")
	b, err = os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("client: in-cluster config: service account CA: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("client: in-cluster config: service account CA %s holds no PEM certificate", caFile)
	}

	ns, err := podNamespace(dir, getenv)
	if err != nil {
		return nil, err
	}
	rc := &rest.Config{
		Host:        "https://" + net.JoinHostPort(host, port),
		BearerToken: token,
		// With the file set, client-go's transport reads the token again
		// from time to time, so that a rotated one replaces the first.
		BearerTokenFile: tokenFile,
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile},
	}
	return &Config{REST: rc, Namespace: ns}, nil
}

// podNamespace is $POD_NAMESPACE, else the content of the service
// account's namespace file, else "default" when there is no such file.
func podNamespace(dir string, getenv func(string) string) (string, error) {
	if ns := strings.TrimSpace(getenv("POD_NAMESPACE")); ns != "" {
		return ns, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "namespace"))
	if errors.Is(err, fs.ErrNotExist) {
		return "default", nil
	}
	if err != nil {
		return "", fmt.Errorf("client: in-cluster config: service account namespace: %w", err)
	}
	if ns := strings.TrimSpace(string(b)); ns != "" {
		return ns, nil
	}
	return "default", nil
}

// DefaultUserAgent is "listwatch/<version> (<os>/<arch>)", the version being
// that of the module in the running binary.
func DefaultUserAgent() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == "github.com/listwatch/listwatch" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		} else {
			for _, d := range bi.Deps {
				if d.Path == "github.com/listwatch/listwatch" {
					v = d.Version
				}
			}
		}
	}
	return fmt.Sprintf("listwatch/%s (%s/%s)", v, runtime.GOOS, runtime.GOARCH)
}

// baseURL is the server's root URL: rest.Config's Host may lack a scheme,
// and carries a path prefix when the server sits behind a proxy.
func baseURL(rc *rest.Config) (*url.URL, error) {
	host := rc.Host
	if host == "" {
		return nil, errors.New("client: no server host in config")
	}
	if !strings.Contains(host, "://") {
		scheme := "https"
		tls := rc.TLSClientConfig
		if !tls.Insecure && len(tls.CAData) == 0 && tls.CAFile == "" && len(tls.CertData) == 0 && tls.CertFile == "" {
			// A bare host:port with no TLS settings is what a local,
			// plain-HTTP server is given.
			scheme = "http"
		}
		host = scheme + "://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("client: server host %q: %w", rc.Host, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("client: server host %q: scheme must be http or https", rc.Host)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}
