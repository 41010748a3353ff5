package apiserver

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/apiserver/bootstrap"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
)

// ReadyCheck is a readiness check of the server, named as
// kube-apiserver's /readyz names it.
type ReadyCheck = bootstrap.ReadyCheck

// policyTemplates are the bootstrap RBAC policy's templates of the
// process: tests start many servers.
var policyTemplates = new(bootstrap.Templates)

// initStartup lists the start-up tasks (package bootstrap); New calls it,
// before the informers start.
func (s *Server) initStartup() {
	s.startup = bootstrap.New(bootstrap.Config{
		Client:           s.self.client,
		Informers:        s.self.informers,
		AdvertiseAddress: s.cfg.AdvertiseAddress,
		ServiceIP:        s.KubernetesServiceIP(),
		SyncInformers:    s.syncInformers,
		Store:            s.storePolicyObject,
		Templates:        policyTemplates,
		Log:              s.log,
	})
}

// start starts the admission informers and runs the start-up tasks in
// the background; Run calls it.
func (s *Server) start() {
	s.self.informers.Start(s.ctx.Done())
	s.wg.Go(func() { s.startup.Run(s.ctx) })
}

// ReadyChecks returns the server's readiness checks beyond storage: one
// per start-up task, failing until it is done.
func (s *Server) ReadyChecks() []ReadyCheck { return s.startup.ReadyChecks() }

// WaitReady blocks until the start-up tasks are done (nil), ctx ends, or
// Run has ended before them.
func (s *Server) WaitReady(ctx context.Context) error {
	return s.startup.WaitReady(ctx, s.ctx.Done())
}

// storePolicyObject stores obj, an object of the bootstrap RBAC policy,
// with a new uid, creationTimestamp ts and ts as the time of its
// managedFields: what a create of it through the write path would store.
func (s *Server) storePolicyObject(ctx context.Context, plural string, obj bootstrap.Object, ts metav1.Time) error {
	res := s.reg.Lookup(rbacv1.SchemeGroupVersion, plural)
	if res == nil {
		return fmt.Errorf("no resource %s of %s", plural, rbacv1.SchemeGroupVersion)
	}
	obj.SetUID(types.UID(newUID()))
	obj.SetCreationTimestamp(ts)
	mf := obj.GetManagedFields()
	for i := range mf {
		mf[i].Time = &ts
	}
	obj.SetManagedFields(mf)
	value, err := registry.EncodeStored(obj)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Storage.Create(ctx, registry.KeyFor(res, obj.GetNamespace(), obj.GetName()), value); err != nil {
		return fmt.Errorf("store %s %s: %w", plural, obj.GetName(), err)
	}
	return nil
}
