package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/watchcache"
)

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

// initServices gives services their rules (registry.ServiceRules), whose
// allocators are filled from the services in the watch cache; Run starts
// the fill (fillServices).
func (s *Server) initServices() error {
	alloc, err := kube.NewServiceAllocator(s.cfg.ServiceClusterIPRange, s.cfg.ServiceNodePortRange)
	if err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	res := s.reg.Lookup(schema.GroupVersion{Version: "v1"}, "services")
	if res == nil || s.caches[res] == nil {
		return errors.New("apiserver: no services resource")
	}
	c := s.caches[res]
	list := func(ctx context.Context) ([]*unstructured.Unstructured, int64, error) {
		// A consistent read: every service stored before now is listed.
		l, err := c.List(ctx, watchcache.ListOptions{})
		if err != nil {
			return nil, 0, err
		}
		return l.Objects(), l.ResourceVersion, nil
	}
	s.services = registry.NewServiceRules(res.Kube, alloc, list, s.log)
	res.Rules = s.services
	return nil
}

// fillServices fills the allocators from storage as Run starts, so that
// the first write of a service need not.
func (s *Server) fillServices() {
	if err := s.services.Ready(s.ctx); err != nil && s.ctx.Err() == nil {
		s.log.Warn("filling the service IP and port allocators; will retry on the first write", "err", err)
	}
}

// KubernetesServiceIP is the first IP of the primary service cluster IP
// range: the cluster IP kube-apiserver gives the "kubernetes" service in
// the default namespace.
func (s *Server) KubernetesServiceIP() net.IP {
	return s.services.APIServerServiceIP()
}
