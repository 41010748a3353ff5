package admission

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/loopback"
)

// Loopback is the server's client of itself and what is built on it: a
// clientset, the informer factory the admission plugins register their
// informers in, and, once InitAdmission has built them, the plugins.
// The informers start with the server's start-up and stop on Close.
type Loopback struct {
	transport *loopback.Transport
	config    *rest.Config
	shutdown  context.Context
	disabled  []string
	admission *kube.Admission

	// Client is the loopback clientset.
	Client kubernetes.Interface
	// Informers is the informer factory of the admission plugins.
	Informers informers.SharedInformerFactory
}

// loopbackUser authenticates the loopback client's token.
type loopbackUser struct{ t *loopback.Transport }

func (l loopbackUser) AuthenticateToken(token string) (filters.User, bool) {
	if !l.t.Authenticates(token) {
		return filters.User{}, false
	}
	return filters.User{Name: loopback.User, Groups: []string{loopback.Group}}, true
}

// NewLoopback builds the loopback client of handler, the server's routes,
// and the informer factory on it; its requests end with shutdown, the
// server's lifetime. disabled names the admission plugins turned off; an
// unknown name is an error. The admission plugins are built by
// InitAdmission, since some start goroutines as they are made.
//
// writes, when not nil, is told when the webhook plugins have taken a
// change of their configurations (handlers.go).
func NewLoopback(shutdown context.Context, handler http.Handler, disabled []string, writes *Writes) (*Loopback, error) {
	// Only the routes and the filters a request needs to reach them:
	// its info, authentication, panic recovery, and the end of watches
	// when the server closes. The loopback client is not counted against
	// the in-flight caps (kube-apiserver exempts system:masters from its
	// limits).
	var chain http.Handler
	t, err := loopback.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chain.ServeHTTP(w, r)
	}))
	if err != nil {
		return nil, fmt.Errorf("apiserver: %w", err)
	}
	chain = filters.Chain(handler, filters.Options{
		Authenticator:       loopbackUser{t},
		MaxRequestBodyBytes: -1,
		Shutdown:            shutdown,
	})
	cfg := t.Config()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("apiserver: loopback client: %w", err)
	}
	if err := kube.CheckAdmissionPlugins(disabled); err != nil {
		t.Close()
		return nil, fmt.Errorf("apiserver: %w", err)
	}
	return &Loopback{
		transport: t, config: cfg, shutdown: shutdown, disabled: disabled,
		Client: client, Informers: newInformers(shutdown, client, writes),
	}, nil
}

// InitAdmission builds the admission plugins, which register the
// informers they read; served reports whether the server serves a
// resource, and fresh waits until the informers hold the writes stored so
// far (Writes.Fresh); authz is the server's authorizer (nil for none),
// which webhooks' matchConditions may ask. Call it before the informers
// start and before any request is served.
func (l *Loopback) InitAdmission(served func(schema.GroupVersionResource) bool, fresh func(context.Context), authz authorizer.Authorizer) error {
	adm, err := kube.NewAdmission(kube.AdmissionConfig{
		Client:     l.Client,
		Informers:  l.Informers,
		Served:     served,
		Disabled:   l.disabled,
		Stop:       l.shutdown.Done(),
		Fresh:      fresh,
		Loopback:   l.Config(),
		Authorizer: authz,
	})
	if err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	l.admission = adm
	return nil
}

// Close stops the informers and ends the loopback client's requests.
func (l *Loopback) Close() {
	l.Informers.Shutdown()
	l.transport.Close()
}

// Config returns a copy of the loopback client's configuration.
func (l *Loopback) Config() *rest.Config {
	return rest.CopyConfig(l.config)
}

// Admission is the admission the server's writes run; nil before
// InitAdmission, or on a nil l.
func (l *Loopback) Admission() *kube.Admission {
	if l == nil {
		return nil
	}
	return l.admission
}

// Ensure the informer factory wrapper satisfies client-go's interface.
var _ informers.SharedInformerFactory = admissionInformers{}

// newInformers is the informer factory the plugins are given: client-go's
// over the loopback client, except that a pod lister is answered by the
// API rather than by an informer (admissionInformers), and that the
// webhook configurations' handlers tell writes what they have taken.
func newInformers(ctx context.Context, client kubernetes.Interface, writes *Writes) informers.SharedInformerFactory {
	return admissionInformers{
		SharedInformerFactory: informers.NewSharedInformerFactory(client, 0),
		pods:                  podLister{ctx: ctx, client: client},
		writes:                writes,
	}
}
