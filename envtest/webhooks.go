package envtest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/internal/pki"
)

// WebhookOptions install admission webhook configurations whose webhooks
// a server in the test's own process serves, as controller-runtime's
// envtest does with WebhookInstallOptions: Start makes a serving
// certificate for that server (Environment.Webhook), and points every
// webhook of the configurations at it: a webhook given by a Service
// reference is called at https://Host:Port/<its path>, one given by URL
// keeps its URL, and each trusts the certificate's CA.
type WebhookOptions struct {
	// Paths are files or directories of MutatingWebhookConfigurations and
	// ValidatingWebhookConfigurations in YAML or JSON (what
	// `controller-gen webhook` writes to config/webhook); other objects
	// in them are ignored.
	Paths []string
	// Mutating and Validating are more configurations to install.
	Mutating   []*admissionregistrationv1.MutatingWebhookConfiguration
	Validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	// Host is the address the test's webhook server listens on; default
	// 127.0.0.1.
	Host string
	// Port is the port it listens on; default a free one.
	Port int
	// CertDir is where its serving certificate is written, as tls.crt and
	// tls.key (controller-runtime's webhook.Options.CertDir); default a
	// directory of the test's.
	CertDir string
}

// WebhookServing is where the test's webhook server must listen, and the
// certificate it serves with: controller-runtime's
// webhook.Options{Host, Port, CertDir} take them as they are.
type WebhookServing struct {
	Host    string
	Port    int
	CertDir string
	// CAData is the PEM certificate of the CA that signed the serving
	// certificate, which the installed webhooks trust.
	CAData []byte
}

// Serving certificate and key files in WebhookServing.CertDir.
const (
	WebhookCertFile = "tls.crt"
	WebhookKeyFile  = "tls.key"
)

// enabled reports whether o installs anything.
func (o WebhookOptions) enabled() bool {
	return len(o.Paths) > 0 || len(o.Mutating) > 0 || len(o.Validating) > 0
}

// prepare makes the serving certificate in o.CertDir (dir when unset) and
// returns the configurations of o pointed at it, as objects to create.
func (o WebhookOptions) prepare(dir string) (*WebhookServing, []*unstructured.Unstructured, error) {
	mutating, validating, err := o.load()
	if err != nil {
		return nil, nil, err
	}
	s := &WebhookServing{Host: o.Host, Port: o.Port, CertDir: o.CertDir}
	if s.Host == "" {
		s.Host = "127.0.0.1"
	}
	if s.CertDir == "" {
		s.CertDir = dir
	}
	if s.Port == 0 {
		if s.Port, err = freePort(s.Host); err != nil {
			return nil, nil, err
		}
	}
	if s.CAData, err = webhookCertificate(s.CertDir, s.Host); err != nil {
		return nil, nil, err
	}
	base := "https://" + net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	var configs []runtime.Object
	for _, m := range mutating {
		m = m.DeepCopy()
		m.Kind = "MutatingWebhookConfiguration"
		for i := range m.Webhooks {
			pointAt(&m.Webhooks[i].ClientConfig, base, s.CAData)
		}
		configs = append(configs, m)
	}
	for _, v := range validating {
		v = v.DeepCopy()
		v.Kind = "ValidatingWebhookConfiguration"
		for i := range v.Webhooks {
			pointAt(&v.Webhooks[i].ClientConfig, base, s.CAData)
		}
		configs = append(configs, v)
	}
	objs := make([]*unstructured.Unstructured, 0, len(configs))
	for _, c := range configs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
		if err != nil {
			return nil, nil, fmt.Errorf("webhooks: %w", err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion(admissionregistrationv1.SchemeGroupVersion.String())
		objs = append(objs, u)
	}
	return s, objs, nil
}

// load reads the configurations of o.Paths, then adds o's own.
func (o WebhookOptions) load() ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	mutating, validating := o.Mutating, o.Validating
	for _, p := range o.Paths {
		objs, err := apiserver.LoadManifests(p)
		if err != nil {
			return nil, nil, fmt.Errorf("webhooks: %w", err)
		}
		for _, u := range objs {
			if u.GroupVersionKind().Group != admissionregistrationv1.GroupName {
				continue
			}
			switch u.GetKind() {
			case "MutatingWebhookConfiguration":
				m := &admissionregistrationv1.MutatingWebhookConfiguration{}
				if err := fromUnstructured(u, m); err != nil {
					return nil, nil, err
				}
				mutating = append(mutating, m)
			case "ValidatingWebhookConfiguration":
				v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
				if err := fromUnstructured(u, v); err != nil {
					return nil, nil, err
				}
				validating = append(validating, v)
			}
		}
	}
	return mutating, validating, nil
}

// pointAt has cc trust caData and, when it names a Service, call base
// with the Service's path instead.
func pointAt(cc *admissionregistrationv1.WebhookClientConfig, base string, caData []byte) {
	cc.CABundle = caData
	if cc.Service == nil {
		return
	}
	u := base
	if cc.Service.Path != nil {
		u += "/" + strings.TrimPrefix(*cc.Service.Path, "/")
	}
	cc.URL, cc.Service = &u, nil
}

// webhookCertificate writes a serving certificate for host (and
// localhost) and its CA to dir, the certificate and key also as tls.crt
// and tls.key, and returns the CA's PEM.
func webhookCertificate(dir, host string) ([]byte, error) {
	s, err := pki.EnsureServing(dir, host)
	if err != nil {
		return nil, fmt.Errorf("webhook serving certificate: %w", err)
	}
	for from, to := range map[string]string{pki.ServingCert: WebhookCertFile, pki.ServingKeyFile: WebhookKeyFile} {
		data, err := os.ReadFile(filepath.Join(dir, from))
		if err != nil {
			return nil, fmt.Errorf("webhook serving certificate: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), data, 0o600); err != nil {
			return nil, fmt.Errorf("webhook serving certificate: %w", err)
		}
	}
	return s.CAPEM, nil
}

// freePort is a port of host nothing listens on: one the system gave
// and took back.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("webhook port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("webhook port: %w", err)
	}
	return port, nil
}

func fromUnstructured(u *unstructured.Unstructured, out any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return fmt.Errorf("webhooks: %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}
