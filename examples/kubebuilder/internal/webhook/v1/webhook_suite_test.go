package v1

// The webhook suite, as kubebuilder scaffolds it, on listwatch's envtest
// instead of controller-runtime's: the webhook configurations of
// config/webhook are installed pointed at the manager's webhook server
// in the test's process (WebhookOptions.Paths, controller-runtime's
// WebhookInstallOptions.Paths), and the CRD of config/crd/bases is
// served with its conversion pointed there too
// (WebhookOptions.Conversions, what controller-runtime's envtest does
// for the kinds its scheme can convert).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/listwatch/listwatch/envtest"

	webappv1 "example.com/guestbook/api/v1"
	webappv2 "example.com/guestbook/api/v2"
)

var (
	testEnv   *envtest.Environment
	k8sClient client.Client
)

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

// runSuite is BeforeSuite, the tests, and AfterSuite.
func runSuite(m *testing.M) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var err error
	testEnv, err = envtest.New(envtest.Options{
		CRDPaths: []string{filepath.Join("..", "..", "..", "config", "crd", "bases")},
		Webhooks: envtest.WebhookOptions{
			Paths:       []string{filepath.Join("..", "..", "..", "config", "webhook")},
			Conversions: []string{"guestbooks.webapp.example.com"},
		},
	})
	if err != nil {
		return fail(err)
	}
	defer testEnv.Stop()

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, webappv1.AddToScheme, webappv2.AddToScheme} {
		if err := add(scheme); err != nil {
			return fail(err)
		}
	}
	if k8sClient, err = client.New(testEnv.Config, client.Options{Scheme: scheme}); err != nil {
		return fail(err)
	}
	mgr, err := ctrl.NewManager(testEnv.Config, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: testEnv.Webhook.Host, Port: testEnv.Webhook.Port, CertDir: testEnv.Webhook.CertDir,
		}),
	})
	if err == nil {
		err = SetupGuestbookWebhookWithManager(mgr)
	}
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	})
	defer func() { cancel(); wg.Wait() }()
	// As the kubebuilder suite does: wait until the webhook server
	// answers.
	check := mgr.GetWebhookServer().StartedChecker()
	for deadline := time.Now().Add(30 * time.Second); check(nil) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("the webhook server did not start: %w", check(nil)))
		}
	}
	return m.Run()
}
