// Package endpointslicemirroring is kube-controller-manager's
// endpointslice-mirroring controller: the Endpoints of a Service without a
// selector (written by hand or by another controller) are mirrored into
// EndpointSlices managed by endpointslicemirroring-controller.k8s.io, at
// most MaxEndpointsPerSubset endpoints a slice; Endpoints labelled
// endpointslice.kubernetes.io/skip-mirror=true, or holding a leader
// election record, are not mirrored.
//
// Kube publishes this controller whole and keeps its reconciler
// unexported, so it is kube's own controller
// (k8s.io/kubernetes/pkg/controller/endpointslicemirroring) that runs
// here, with its own queue and workers, on listwatch's shared informers
// of Services, Endpoints and EndpointSlices.
package endpointslicemirroring

//lint:file-ignore SA1019 core/v1 Endpoints are what this controller mirrors.

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	kubemirroring "k8s.io/kubernetes/pkg/controller/endpointslicemirroring"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/internal/kubeadapt"
)

// ControllerName is the value of the endpointslice.kubernetes.io/managed-by
// label of the slices this controller mirrors, kube's.
const ControllerName = kubemirroring.ControllerName

// Defaults, kube-controller-manager's.
const (
	// DefaultWorkers is --mirroring-concurrent-service-endpoint-syncs'.
	DefaultWorkers = 5
	// DefaultMaxEndpointsPerSubset is
	// --mirroring-max-endpoints-per-subset's.
	DefaultMaxEndpointsPerSubset = 1000
)

// Informers are the caches the controller reads.
type Informers struct {
	Services       cache.Informer[*corev1.Service]
	Endpoints      cache.Informer[*corev1.Endpoints]
	EndpointSlices cache.Informer[*discoveryv1.EndpointSlice]
}

// Options tune the controller.
type Options struct {
	// Workers syncing Endpoints; DefaultWorkers when not positive.
	Workers int
	// MaxEndpointsPerSubset bounds the endpoints mirrored from one subset;
	// DefaultMaxEndpointsPerSubset when not positive.
	MaxEndpointsPerSubset int32
	// UpdatesBatchPeriod delays the sync a slice change queues
	// (--mirroring-endpointslice-updates-batch-period; none by default).
	UpdatesBatchPeriod time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Controller mirrors Endpoints into EndpointSlices.
type Controller struct {
	kube    *kubemirroring.Controller
	workers int
	logger  logr.Logger
}

// New returns the controller over inf, writing slices and its events
// (component endpoint-slice-mirroring-controller) through client. Kube's
// controller registers its handlers on the informers now; they stay
// registered for as long as the informers run, which in the controller
// manager is one term of leadership, as the controller.
func New(ctx context.Context, inf Informers, client kubernetes.Interface, opts Options) (*Controller, error) {
	if inf.Services == nil || inf.Endpoints == nil || inf.EndpointSlices == nil || client == nil {
		return nil, errors.New("endpointslicemirroring: New needs three informers and a client")
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	perSubset := opts.MaxEndpointsPerSubset
	if perSubset <= 0 {
		perSubset = DefaultMaxEndpointsPerSubset
	}
	logger := logr.FromSlogHandler(cmp.Or(opts.Logger, slog.Default()).With("controller", "endpointslice-mirroring").Handler())
	kube := kubemirroring.NewController(klog.NewContext(ctx, logger),
		kubeadapt.EndpointsInformer{Inf: inf.Endpoints},
		kubeadapt.EndpointSliceInformer{Inf: inf.EndpointSlices},
		kubeadapt.ServiceInformer{Inf: inf.Services},
		perSubset, client, opts.UpdatesBatchPeriod)
	return &Controller{kube: kube, workers: workers, logger: logger}, nil
}

// Run runs the workers, once the caches have synced, until ctx ends, and
// returns once they have stopped.
func (c *Controller) Run(ctx context.Context) error {
	c.kube.Run(klog.NewContext(ctx, c.logger), c.workers)
	return nil
}
