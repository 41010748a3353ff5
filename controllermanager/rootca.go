package controllermanager

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/controllers/rootcacert"
	"github.com/listwatch/listwatch/informers"
)

// newRootCACert makes the root CA publisher. It publishes the CA the
// client trusts the server with, as kube-controller-manager does without
// --root-ca-file. A client that trusts no CA of its own (plain HTTP, or
// the system's roots) has none to publish: the publisher then does
// nothing.
func newRootCACert(_ context.Context, d deps) (runner, error) {
	ca, err := rootCA(d.m.cfg.Client.REST)
	if err != nil {
		return nil, err
	}
	if len(ca) == 0 {
		d.m.log.Warn("the client trusts no CA of its own: no root CA to publish", "controller", RootCACert)
		return idle{}, nil
	}
	return rootcacert.New(informers.For[*corev1.Namespace](d.factory), informers.For[*corev1.ConfigMap](d.factory),
		rootcacert.NewClient(d.clientOf(RootCACert)), ca, rootcacert.Options{Controller: d.options("root-ca-cert-publisher", controller.Options{})})
}

// rootCA is the CA bundle cfg trusts the server with, if any.
func rootCA(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CAData) > 0 {
		return cfg.CAData, nil
	}
	if cfg.CAFile == "" {
		return nil, nil
	}
	ca, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("reading the root CA: %w", err)
	}
	return ca, nil
}

// idle is a controller that does nothing until it is stopped.
type idle struct{}

func (idle) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
