// Command samplecontroller is k8s.io/sample-controller written with
// listwatch (seed 002 describes it): for every Foo
// (samplecontroller.k8s.io/v1alpha1), a Deployment of spec.replicas nginx
// pods named spec.deploymentName, and the Deployment's available replicas
// in the Foo's status.
//
// The pattern is client-go's: informer handlers (controller.For,
// controller.Owns) put Foo keys on a rate-limited workqueue, and workers
// hand them to syncHandler. Against a server that serves Foos (crd.yaml),
// with the kubeconfig of -kubeconfig, or else $KUBECONFIG or
// ~/.kube/config, as kubectl reads them:
//
//	go run ./examples/samplecontroller -kubeconfig .listwatch/kubeconfig
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/record"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "samplecontroller:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	kubeconfig := flag.String("kubeconfig", "", "path of a kubeconfig (default: $KUBECONFIG, then ~/.kube/config)")
	flag.Parse()
	cfg, err := client.LoadConfig(client.LoadOptions{Kubeconfig: *kubeconfig})
	if err != nil {
		return err
	}
	c, err := client.New(cfg)
	if err != nil {
		return err
	}
	return runController(ctx, c, slog.Default())
}

// runController runs the sample controller against the server c reaches
// until ctx ends.
func runController(ctx context.Context, c *client.Client, log *slog.Logger) error {
	events := record.NewBroadcaster(record.ClientSink(c), record.Options{Logger: log})
	var wg sync.WaitGroup
	defer wg.Wait() // the events recorded before ctx ended are written
	wg.Go(func() { events.Run(ctx) })
	factory := informers.NewSharedInformerFactory(c, informers.Options{})
	defer factory.Shutdown()
	ctrl, err := New(informers.InformerFor[*Foo](factory, fooGVR), informers.For[*appsv1.Deployment](factory),
		restClient{c}, events.NewRecorder("sample-controller"), controller.Options{Workers: 2, Logger: log})
	if err != nil {
		return err
	}
	factory.Start(ctx)
	return ctrl.Run(ctx)
}

// restClient is the Client over the REST client.
type restClient struct{ c *client.Client }

func (r restClient) CreateDeployment(ctx context.Context, d *appsv1.Deployment) error {
	_, err := client.For[*appsv1.Deployment](r.c, d.Namespace).Create(ctx, d, metav1.CreateOptions{})
	return err
}

func (r restClient) UpdateDeployment(ctx context.Context, d *appsv1.Deployment) error {
	_, err := client.For[*appsv1.Deployment](r.c, d.Namespace).Update(ctx, d, metav1.UpdateOptions{})
	return err
}

func (r restClient) UpdateFooStatus(ctx context.Context, foo *Foo) error {
	_, err := client.NewResource[*Foo](r.c, fooGVR, foo.Namespace).UpdateStatus(ctx, foo, metav1.UpdateOptions{})
	return err
}
