package envtest

import (
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/internal/pki"
)

// WebhookOptions install admission webhook configurations (and CRD
// conversion webhooks: Conversions) whose webhooks
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
	// in them, and documents that are not objects (kustomize's
	// configuration files), are ignored.
	Paths []string
	// Mutating and Validating are more configurations to install.
	Mutating   []*admissionregistrationv1.MutatingWebhookConfiguration
	Validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	// Conversions name CustomResourceDefinitions (of Options.CRDPaths
	// and CRDs) whose versions the test's webhook server converts at
	// /convert, as controller-runtime's envtest does for the kinds its
	// scheme can convert (a conversion.Hub and its Convertibles, whose
	// handler controller-runtime's webhook server registers there):
	// their spec.conversion becomes the Webhook strategy calling
	// https://Host:Port/convert and trusting the CA. A definition that
	// already asks for conversion by a webhook given by a Service
	// reference (kubebuilder's webhook_in_<kind> patch) is pointed at the
	// server too, as the webhook configurations are.
	Conversions []string
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
	return len(o.Paths) > 0 || len(o.Mutating) > 0 || len(o.Validating) > 0 || len(o.Conversions) > 0
}

// ConvertPath is where the test's webhook server converts custom
// resources (controller-runtime's conversion handler's path).
const ConvertPath = "/convert"

// prepare makes the serving certificate in o.CertDir (dir when unset),
// points the conversion webhooks of the definitions among manifests at
// it (replacing those it changes in manifests with copies), and returns
// the configurations of o pointed at it, as objects to create.
func (o WebhookOptions) prepare(dir string, manifests []*unstructured.Unstructured) (*WebhookServing, []*unstructured.Unstructured, error) {
	configs, err := o.load()
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
	for _, u := range configs {
		if err := pointAt(u, base, s.CAData); err != nil {
			return nil, nil, err
		}
	}
	for i, u := range manifests {
		if u.GroupVersionKind() != crdGVK {
			continue
		}
		converted, err := o.convertAt(u, base, s.CAData)
		if err != nil {
			return nil, nil, err
		}
		manifests[i] = converted
	}
	return s, configs, nil
}

var crdGVK = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")

// convertAt returns the definition u with its conversion served at base:
// a copy with the Webhook strategy calling base+ConvertPath when o names
// it, one whose Service reference is replaced by base and its path when
// it asks for a webhook by a Service; u itself otherwise. Either trusts
// caData.
func (o WebhookOptions) convertAt(u *unstructured.Unstructured, base string, caData []byte) (*unstructured.Unstructured, error) {
	ca := base64.StdEncoding.EncodeToString(caData)
	if slices.Contains(o.Conversions, u.GetName()) {
		u = u.DeepCopy()
		conv := map[string]any{
			"strategy": string(apiextensionsv1.WebhookConverter),
			"webhook": map[string]any{
				"clientConfig":             map[string]any{"url": base + ConvertPath, "caBundle": ca},
				"conversionReviewVersions": []any{"v1", "v1beta1"},
			},
		}
		if err := unstructured.SetNestedMap(u.Object, conv, "spec", "conversion"); err != nil {
			return nil, fmt.Errorf("webhooks: %s: %w", u.GetName(), err)
		}
		return u, nil
	}
	svc, found, err := unstructured.NestedMap(u.Object, "spec", "conversion", "webhook", "clientConfig", "service")
	if err != nil || !found {
		return u, nil // none, or malformed: the server says why
	}
	u = u.DeepCopy()
	url := base
	if path, ok := svc["path"].(string); ok {
		url += "/" + strings.TrimPrefix(path, "/")
	}
	cc := map[string]any{"url": url, "caBundle": ca}
	if err := unstructured.SetNestedMap(u.Object, cc, "spec", "conversion", "webhook", "clientConfig"); err != nil {
		return nil, fmt.Errorf("webhooks: %s: %w", u.GetName(), err)
	}
	return u, nil
}

// load reads the configurations of o.Paths (the objects of other kinds
// in them left out), then adds o's own.
func (o WebhookOptions) load() ([]*unstructured.Unstructured, error) {
	var configs []*unstructured.Unstructured
	for _, p := range o.Paths {
		objs, err := apiserver.ScanManifests(p)
		if err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
		for _, u := range objs {
			if u.GroupVersionKind().Group == admissionregistrationv1.GroupName && (u.GetKind() == mutatingKind || u.GetKind() == validatingKind) {
				configs = append(configs, u)
			}
		}
	}
	mutating, err := asObjects(o.Mutating, mutatingKind)
	if err != nil {
		return nil, err
	}
	validating, err := asObjects(o.Validating, validatingKind)
	if err != nil {
		return nil, err
	}
	return append(append(configs, mutating...), validating...), nil
}

// The kinds of the webhook configurations.
const (
	mutatingKind   = "MutatingWebhookConfiguration"
	validatingKind = "ValidatingWebhookConfiguration"
)

// asObjects returns configs, of kind, as objects to create.
func asObjects[T runtime.Object](configs []T, kind string) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(configs))
	for _, c := range configs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
		if err != nil {
			return nil, fmt.Errorf("webhooks: %s: %w", kind, err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion(admissionregistrationv1.SchemeGroupVersion.String())
		u.SetKind(kind)
		out = append(out, u)
	}
	return out, nil
}

// pointAt has every webhook of the configuration u trust caData and,
// when its clientConfig names a Service, call base with the Service's
// path instead.
func pointAt(u *unstructured.Unstructured, base string, caData []byte) error {
	hooks, _, err := unstructured.NestedSlice(u.Object, "webhooks")
	if err != nil {
		return fmt.Errorf("webhooks: %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	for _, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			continue // the server refuses it, saying why
		}
		cc, ok := hook["clientConfig"].(map[string]any)
		if !ok {
			cc = map[string]any{}
			hook["clientConfig"] = cc
		}
		cc["caBundle"] = base64.StdEncoding.EncodeToString(caData)
		if svc, ok := cc["service"].(map[string]any); ok {
			url := base
			if path, ok := svc["path"].(string); ok {
				url += "/" + strings.TrimPrefix(path, "/")
			}
			cc["url"] = url
			delete(cc, "service")
		}
	}
	return unstructured.SetNestedSlice(u.Object, hooks, "webhooks")
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
