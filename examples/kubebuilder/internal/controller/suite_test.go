package controller

// The suite, as kubebuilder scaffolds it, on listwatch's envtest instead
// of controller-runtime's: no kube-apiserver or etcd binaries to download,
// and the controller-manager's controllers run, so the Deployment gets
// pods and deleting a Guestbook garbage-collects its Deployment.

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

	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/envtest"

	webappv1 "example.com/guestbook/api/v1"
)

var (
	testEnv   *envtest.Environment
	k8sClient client.Client
)

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

// runSuite is BeforeSuite, the tests, and AfterSuite.
func runSuite(m *testing.M) int {
	var err error
	testEnv, err = envtest.New(envtest.Options{
		CRDPaths:    []string{filepath.Join("..", "..", "config", "crd", "bases")},
		Controllers: controllermanager.AllControllers(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testEnv.Stop()

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := webappv1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if k8sClient, err = client.New(testEnv.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := ctrl.NewManager(testEnv.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err == nil {
		err = (&GuestbookReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	})
	defer func() { cancel(); wg.Wait() }()
	return m.Run()
}

// eventually polls cond until it holds, as Gomega's Eventually.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
