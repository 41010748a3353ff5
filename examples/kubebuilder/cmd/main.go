// Command guestbook runs the Guestbook controller against the cluster of
// the current kubeconfig.
package main

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	webappv1 "example.com/guestbook/api/v1"
	webappv2 "example.com/guestbook/api/v2"
	"example.com/guestbook/internal/controller"
	webhookwebappv1 "example.com/guestbook/internal/webhook/v1"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "guestbook:", err)
		os.Exit(1)
	}
}

func run() error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := webappv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := webappv2.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := (&controller.GuestbookReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := webhookwebappv1.SetupGuestbookWebhookWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
