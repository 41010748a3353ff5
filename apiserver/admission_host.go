package apiserver

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/apiserver/admission"
	"github.com/listwatch/listwatch/apiserver/internal/crd"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
)

// self is the server's client of itself and the admission plugins on it
// (package admission), with the two parts the rest of the server reads.
type self struct {
	*admission.Loopback
	client    kubernetes.Interface
	informers informers.SharedInformerFactory
}

// initSelf builds the loopback client and the informer factory; New
// calls it once the routes exist.
func (s *Server) initSelf() error {
	l, err := admission.NewLoopback(s.ctx, s.handler, s.cfg.DisableAdmissionPlugins, s.writes)
	if err != nil {
		return err
	}
	s.self = &self{Loopback: l, client: l.Client, informers: l.Informers}
	return nil
}

// initAdmission builds the admission plugins; Run calls it before it
// starts the informers and before any request is served (requests wait
// for the watch caches Run starts next).
// It makes the converters of custom resources too, whose webhooks are
// resolved and called as the admission webhooks are.
func (s *Server) initAdmission() error {
	err := s.self.InitAdmission(func(gvr schema.GroupVersionResource) bool {
		return s.reg.Lookup(gvr.GroupVersion(), gvr.Resource) != nil
	}, s.fresh, s.Authorizer())
	if err != nil {
		return err
	}
	services, auth, err := kube.WebhookResolvers(s.self.informers, s.self.Config())
	if err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	if s.converters, err = crd.NewConverters(services, auth); err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	return nil
}

// closeSelf stops the informers and ends the loopback client's requests;
// Run calls it once the server's context has ended.
func (s *Server) closeSelf() {
	if s.self != nil {
		s.self.Close()
	}
}

// LoopbackConfig returns a client-go configuration for a client of the
// server in the same process, authenticated as kube-apiserver's own
// requests are (system:apiserver in system:masters). Its requests end
// when the server closes.
func (s *Server) LoopbackConfig() *rest.Config {
	return s.self.Config()
}

// admissionChain is the admission the server's writes run.
func (s *Server) admissionChain() *kube.Admission {
	if s.self == nil {
		return nil
	}
	return s.self.Admission()
}

// fresh waits, briefly, until the admission informers hold every write
// stored so far (admission.Writes).
func (s *Server) fresh(ctx context.Context) { s.writes.Fresh(ctx) }

// syncInformers waits for the admission plugins' informers, then has the
// writes of their resources counted.
func (s *Server) syncInformers(ctx context.Context) error {
	return s.writes.Sync(ctx, s.self.informers, func(gvr schema.GroupVersionResource) string {
		res := s.reg.Lookup(gvr.GroupVersion(), gvr.Resource)
		if res == nil {
			return ""
		}
		return registry.PrefixFor(res, "")
	})
}
