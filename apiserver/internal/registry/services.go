package registry

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/apiserver/internal/kube"
)

// ServiceRules are the rules of services: BuiltinRules with the cluster
// IPs and node ports kube-apiserver's service storage gives them
// (kube.ServiceAllocator runs its hooks on Kubernetes' allocators).
//
//   - Create: after admission, before the strategy (as kube's BeginCreate
//     runs), the service gets what it needs; its Finish keeps it once the
//     service is stored and gives it back otherwise.
//   - Update of the main resource (not /status): the same before the
//     strategy's update, on every attempt of the write (the handler gives
//     up each attempt's Finish before the next); what the update frees is
//     released once it is stored.
//   - Deleted: what the service held is released.
//
// The allocators live in memory. Before the first allocation they are
// filled from the services stored, listed through the watch cache (as
// kube's repair controllers reconcile theirs), so that a restarted server
// never hands out an IP or port a stored service holds.
type ServiceRules struct {
	BuiltinRules
	alloc *kube.ServiceAllocator
	list  func(context.Context) ([]*unstructured.Unstructured, int64, error)
	log   *slog.Logger
	// fill is held while the allocators are filled.
	fill  chan struct{}
	ready atomic.Bool
	// rev is the revision of the listing the allocators were filled from,
	// set before ready: a service deleted at or before it was not in it.
	rev int64
}

// NewServiceRules returns the rules of services over k, allocating from
// alloc, filled on first use from what list returns (the services stored
// and the revision of the listing).
func NewServiceRules(k *kube.Rules, alloc *kube.ServiceAllocator, list func(context.Context) ([]*unstructured.Unstructured, int64, error), log *slog.Logger) *ServiceRules {
	return &ServiceRules{BuiltinRules: BuiltinRules{k}, alloc: alloc, list: list, log: log, fill: make(chan struct{}, 1)}
}

// APIServerServiceIP is the cluster IP of the "kubernetes" service.
func (s *ServiceRules) APIServerServiceIP() net.IP { return s.alloc.APIServerServiceIP() }

// Ready fills the allocators from the services stored, once; every write
// waits for it.
func (s *ServiceRules) Ready(ctx context.Context) error {
	if s.ready.Load() {
		return nil
	}
	select {
	case s.fill <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.fill }()
	if s.ready.Load() {
		return nil
	}
	items, rev, err := s.list(ctx)
	if err != nil {
		return err
	}
	for _, u := range items {
		for _, err := range s.alloc.Reserve(u) {
			// kube's repair controllers report these as events; the
			// service keeps what it has.
			s.log.Warn("service holds what the allocators cannot give it", "namespace", u.GetNamespace(), "name", u.GetName(), "err", err)
		}
	}
	s.rev = rev
	s.ready.Store(true)
	return nil
}

// Create allocates what obj needs, then runs the strategy, and gives the
// result the form kube's service storage returns it in (Decorate).
func (s *ServiceRules) Create(ctx context.Context, w Write, obj Object) (Object, Finish, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, nil, err
	}
	finish, err := s.alloc.BeginCreate(ctx, obj, w.DryRun)
	if err != nil {
		return nil, nil, err
	}
	out, _, err := s.BuiltinRules.Create(ctx, w, obj)
	if err != nil {
		finish.Done(false)
		return nil, nil, err
	}
	s.alloc.Decorate(out)
	return out, finish, nil
}

// Update allocates and releases what an update of the main resource
// needs, then runs the strategy.
func (s *ServiceRules) Update(ctx context.Context, w Write, obj, cur Object) (Object, Finish, error) {
	if w.Subresource != "" {
		return s.BuiltinRules.Update(ctx, w, obj, cur)
	}
	if err := s.Ready(ctx); err != nil {
		return nil, nil, err
	}
	finish, err := s.alloc.BeginUpdate(ctx, obj, cur, w.DryRun)
	if err != nil {
		return nil, nil, err
	}
	out, _, err := s.BuiltinRules.Update(ctx, w, obj, cur)
	if err != nil {
		finish.Done(false)
		return nil, nil, err
	}
	s.alloc.Decorate(out)
	return out, finish, nil
}

// Deleted releases what obj held, unless the allocators were filled from
// a listing made after its removal.
func (s *ServiceRules) Deleted(ctx context.Context, obj Object) {
	u, err := AsMapWith(s.Kube, obj)
	if err != nil {
		return
	}
	rev, err := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	if err := s.Ready(ctx); err != nil {
		// The fill still to come lists storage without the service.
		return
	}
	if rev <= s.rev {
		return
	}
	s.alloc.Release(u)
}
