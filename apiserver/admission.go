package apiserver

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/loopback"
)

// The server's client of itself, and the admission plugins that read
// through it, as kube-apiserver has them: its loopback client (a
// client-go rest.Config whose transport calls the server's handler
// in-process, authenticated as system:apiserver in system:masters), a
// clientset and an informer factory over it, and kube-apiserver's default
// admission plugins initialised with both (apiserver/internal/kube). The
// informers the plugins registered start with the server (bootstrap.go)
// and stop when Run ends.

// self is the server's loopback client and what is built on it.
type self struct {
	transport *loopback.Transport
	config    *rest.Config
	client    kubernetes.Interface
	informers informers.SharedInformerFactory
	admission *kube.Admission
}

// loopbackUser authenticates the loopback client's token.
type loopbackUser struct{ t *loopback.Transport }

func (l loopbackUser) AuthenticateToken(token string) (filters.User, bool) {
	if !l.t.Authenticates(token) {
		return filters.User{}, false
	}
	return filters.User{Name: loopback.User, Groups: []string{loopback.Group}}, true
}

// initSelf builds the loopback client and the informer factory; New
// calls it once the routes exist. The admission plugins are built by Run
// (initAdmission), since some start goroutines as they are made.
func (s *Server) initSelf() error {
	// Only the routes and the filters a request needs to reach them:
	// its info, authentication, panic recovery, and the end of watches
	// when Run ends. The loopback client is not counted against the in-flight
	// caps (kube-apiserver exempts system:masters from its limits).
	var handler http.Handler
	t, err := loopback.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler.ServeHTTP(w, r)
	}))
	if err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	handler = filters.Chain(s.handler, filters.Options{
		Authenticator:       loopbackUser{t},
		MaxRequestBodyBytes: -1,
		Shutdown:            s.ctx,
	})
	cfg := t.Config()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Close()
		return fmt.Errorf("apiserver: loopback client: %w", err)
	}
	if err := kube.CheckAdmissionPlugins(s.cfg.DisableAdmissionPlugins); err != nil {
		t.Close()
		return fmt.Errorf("apiserver: %w", err)
	}
	s.self = &self{transport: t, config: cfg, client: client, informers: newAdmissionInformers(s.ctx, client)}
	return nil
}

// initAdmission builds the admission plugins, which register the informers
// they read; Run calls it before it starts the informers and before any
// request is served (requests wait for the watch caches Run starts next).
func (s *Server) initAdmission() error {
	adm, err := kube.NewAdmission(kube.AdmissionConfig{
		Client:    s.self.client,
		Informers: s.self.informers,
		Served: func(gvr schema.GroupVersionResource) bool {
			return s.reg.Lookup(gvr.GroupVersion(), gvr.Resource) != nil
		},
		Disabled: s.cfg.DisableAdmissionPlugins,
		Stop:     s.ctx.Done(),
		Fresh:    s.fresh,
	})
	if err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	s.self.admission = adm
	return nil
}

// closeSelf stops the informers and ends the loopback client's requests;
// Run calls it once the server's context has ended.
func (s *Server) closeSelf() {
	if s.self == nil {
		return
	}
	s.self.informers.Shutdown()
	s.self.transport.Close()
}

// LoopbackConfig returns a client-go configuration for a client of the
// server in the same process, authenticated as kube-apiserver's own
// requests are (system:apiserver in system:masters). Its requests end
// when the server closes.
func (s *Server) LoopbackConfig() *rest.Config {
	return rest.CopyConfig(s.self.config)
}

// admissionChain is the admission the server's writes run.
func (s *Server) admissionChain() *kube.Admission {
	if s.self == nil {
		return nil
	}
	return s.self.admission
}

// Ensure the informer factory wrapper satisfies client-go's interface.
var _ informers.SharedInformerFactory = admissionInformers{}

// newAdmissionInformers is the informer factory the plugins are given:
// client-go's over the loopback client, except that a pod lister is
// answered by the API rather than by an informer (admissionInformers).
func newAdmissionInformers(ctx context.Context, client kubernetes.Interface) informers.SharedInformerFactory {
	return admissionInformers{
		SharedInformerFactory: informers.NewSharedInformerFactory(client, 0),
		pods:                  podLister{ctx: ctx, client: client},
	}
}
