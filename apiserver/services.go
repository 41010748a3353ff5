package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/watchcache"
)

// Services get their cluster IPs and node ports here, as kube-apiserver's
// service storage gives them: kube.ServiceAllocator runs its hooks on
// Kubernetes' allocators, and this file ties them to the server's writes.
//
//   - create: after admission, before the strategy (as kube's BeginCreate
//     runs), the service gets what it needs; given back if it is not
//     stored, kept once it is.
//   - update (main resource, not /status): the same before the strategy's
//     update, on every attempt of the GuaranteedUpdate (each attempt gives
//     back what the one before took); what the update frees is released
//     once it is stored.
//   - delete: once a service is removed from storage, what it held is
//     released.
//
// The allocators live in memory. Before the first allocation they are
// filled from the services stored, listed through the watch cache (as
// kube's repair controllers reconcile theirs), so that a restarted server
// never hands out an IP or port a stored service holds. The fill starts
// with the server and every write waits for it.

// The defaults of Config.ServiceClusterIPRange and ServiceNodePortRange.
const (
	DefaultServiceClusterIPRange = kube.DefaultServiceClusterIPRange
	DefaultServiceNodePortRange  = kube.DefaultServiceNodePortRange
)

// CheckServiceRanges reports whether New accepts clusterIPRange and
// nodePortRange as Config.ServiceClusterIPRange and ServiceNodePortRange.
func CheckServiceRanges(clusterIPRange, nodePortRange string) error {
	if _, err := kube.ParseServiceClusterIPRange(clusterIPRange); err != nil {
		return err
	}
	_, err := kube.ParseServiceNodePortRange(nodePortRange)
	return err
}

// serviceAllocations is the server's allocation state of services.
type serviceAllocations struct {
	alloc *kube.ServiceAllocator
	res   *resource
	// fill is held while the allocators are filled from storage.
	fill  chan struct{}
	ready atomic.Bool
	// rev is the revision of the listing the allocators were filled from,
	// set before ready: a service deleted at or before it was not in it.
	rev int64
}

// initServices sets up the allocation of services for New; Run fills it
// from storage (fillServices).
func (s *Server) initServices() error {
	alloc, err := kube.NewServiceAllocator(s.cfg.ServiceClusterIPRange, s.cfg.ServiceNodePortRange)
	if err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	res := s.reg.Lookup(schema.GroupVersion{Version: "v1"}, "services")
	if res == nil || s.caches[res] == nil {
		return errors.New("apiserver: no services resource")
	}
	s.services = &serviceAllocations{alloc: alloc, res: res, fill: make(chan struct{}, 1)}
	return nil
}

// fillServices fills the allocators from storage as Run starts, so that
// the first write of a service need not.
func (s *Server) fillServices() {
	if err := s.servicesReady(s.ctx); err != nil && s.ctx.Err() == nil {
		s.log.Warn("filling the service IP and port allocators; will retry on the first write", "err", err)
	}
}

// KubernetesServiceIP is the first IP of the primary service cluster IP
// range: the cluster IP kube-apiserver gives the "kubernetes" service in
// the default namespace.
func (s *Server) KubernetesServiceIP() net.IP {
	return s.services.alloc.APIServerServiceIP()
}

// isServices reports whether writes of res allocate.
func (s *Server) isServices(res *resource) bool {
	return s.services != nil && res == s.services.res
}

// servicesReady fills the allocators from the services stored, once.
func (s *Server) servicesReady(ctx context.Context) error {
	sa := s.services
	if sa.ready.Load() {
		return nil
	}
	select {
	case sa.fill <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-sa.fill }()
	if sa.ready.Load() {
		return nil
	}
	// A consistent read: every service stored before now is listed.
	list, err := s.caches[sa.res].List(ctx, watchcache.ListOptions{})
	if err != nil {
		return err
	}
	for _, u := range list.Items {
		for _, err := range sa.alloc.Reserve(u) {
			// kube's repair controllers report these as events; the
			// service keeps what it has.
			s.log.Warn("service holds what the allocators cannot give it", "namespace", u.GetNamespace(), "name", u.GetName(), "err", err)
		}
	}
	sa.rev = list.ResourceVersion
	sa.ready.Store(true)
	return nil
}

// serviceWrite is what one create or update of a service has allocated.
type serviceWrite struct {
	finish kube.Finish
}

type serviceWriteKey struct{}

// serviceWrite returns ctx carrying the allocation state of a write of
// req's resource, for the hooks below; nil (a no-op) when the resource is
// not services.
func (s *Server) serviceWrite(ctx context.Context, req request) (context.Context, *serviceWrite) {
	if !s.isServices(req.res) {
		return ctx, nil
	}
	w := &serviceWrite{}
	return context.WithValue(ctx, serviceWriteKey{}, w), w
}

// begin replaces what an earlier attempt of the write allocated.
func (w *serviceWrite) begin(f kube.Finish) {
	w.finish.Done(false)
	w.finish = f
}

// done ends the write: what it took is kept (stored) or given back.
func (w *serviceWrite) done(stored bool) {
	if w == nil {
		return
	}
	w.finish.Done(stored)
	w.finish = nil
}

// allocateServiceCreate gives obj, a service being created, its cluster
// IPs and node ports; the write in ctx (serviceWrite) keeps them until it
// is done.
func (s *Server) allocateServiceCreate(ctx context.Context, req request, obj runtime.Object) error {
	w, _ := ctx.Value(serviceWriteKey{}).(*serviceWrite)
	if w == nil || !s.isServices(req.res) {
		return nil
	}
	if err := s.servicesReady(ctx); err != nil {
		return err
	}
	f, err := s.services.alloc.BeginCreate(ctx, obj, req.dryRun)
	if err != nil {
		return err
	}
	w.begin(f)
	return nil
}

// allocateServiceUpdate allocates and releases what the update of cur to
// desired needs; the write in ctx keeps it until it is done.
func (s *Server) allocateServiceUpdate(ctx context.Context, req request, desired, cur *unstructured.Unstructured) error {
	w, _ := ctx.Value(serviceWriteKey{}).(*serviceWrite)
	if w == nil || !s.isServices(req.res) || req.sub != "" {
		return nil
	}
	// This attempt starts afresh.
	w.begin(nil)
	if err := s.servicesReady(ctx); err != nil {
		return err
	}
	f, err := s.services.alloc.BeginUpdate(ctx, desired, cur, req.dryRun)
	if err != nil {
		return err
	}
	w.begin(f)
	return nil
}

// decorateService gives a service the strategy has made ready to store
// the form kube-apiserver's service storage returns it in
// (kube.ServiceAllocator.Decorate).
func (s *Server) decorateService(req request, obj runtime.Object) {
	if s.isServices(req.res) && req.sub == "" {
		s.services.alloc.Decorate(obj)
	}
}

// serviceDeleted releases what obj, a service just removed from storage,
// held; its resourceVersion is the revision of the removal.
func (s *Server) serviceDeleted(ctx context.Context, res *resource, obj object) {
	if !s.isServices(res) {
		return
	}
	u, err := res.AsMap(obj)
	if err != nil {
		return
	}
	rev, err := parseRV(u.GetResourceVersion())
	if err != nil {
		return
	}
	if err := s.servicesReady(ctx); err != nil {
		// The fill still to come lists storage without the service.
		return
	}
	if rev <= s.services.rev {
		// The allocators were filled after the removal.
		return
	}
	s.services.alloc.Release(u)
}
