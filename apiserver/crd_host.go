package apiserver

import (
	"context"
	"errors"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/apiserver/crdcontroller"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watchcache"
)

// startCRDController runs the CRD controller (package crdcontroller)
// until the server's context ends, then closes the custom resources'
// watch caches.
func (s *Server) startCRDController() {
	res := s.crdResource()
	if res == nil {
		return
	}
	c := crdcontroller.New(crdHost{s: s, res: res}, s.log)
	s.wg.Go(func() {
		c.Run(s.ctx)
		s.closeCustomCaches()
	})
}

// crdHost is the server as the CRD controller reaches it; res is the
// registry's entry of CustomResourceDefinitions.
type crdHost struct {
	s   *Server
	res *resource
}

var _ crdcontroller.Server = crdHost{}

func (h crdHost) Definition(name string) (*unstructured.Unstructured, bool) {
	return h.s.cacheFor(h.res).Get(registry.KeyFor(h.res, "", name))
}

func (h crdHost) Definitions(ctx context.Context, group string) ([]*unstructured.Unstructured, error) {
	list, err := h.s.cacheFor(h.res).List(ctx, watchcache.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, it := range list.Items {
		if name, _ := it.Field("metadata.name"); strings.HasSuffix(name, "."+group) {
			out = append(out, it.Object())
		}
	}
	return out, nil
}

func (h crdHost) WatchDefinitions(ctx context.Context) (*watchcache.Watcher[*unstructured.Unstructured], error) {
	return h.s.cacheFor(h.res).Watch(ctx, watchcache.WatchOptions{ResourceVersion: "0"})
}

func (h crdHost) Served() []string {
	byCRD := h.s.reg.CustomResources().ByCRD
	names := make([]string, 0, len(byCRD))
	for name := range byCRD {
		names = append(names, name)
	}
	return names
}

func (h crdHost) Prepare(def *apiextensionsv1.CustomResourceDefinition) (crdcontroller.Installation, error) {
	in, err := h.s.prepareCRD(def)
	if in == nil {
		return nil, err
	}
	return hostInstallation{s: h.s, in: in}, err
}

func (h crdHost) Uninstall(name string) { h.s.uninstallCRD(name) }

func (h crdHost) AwaitDeletes(ctx context.Context, name string, timeout time.Duration) {
	h.s.awaitCustomDeletes(ctx, name, timeout)
}

func (h crdHost) UpdateDefinition(ctx context.Context, name, sub string, change func(*unstructured.Unstructured) (*unstructured.Unstructured, error)) error {
	req := request{res: h.res, name: name, sub: sub, manage: &fieldManagement{manager: "kube-apiserver"}}
	_, err := h.s.update(ctx, req, func(cur object) (object, error) {
		u, err := h.res.AsMap(cur)
		if err != nil {
			return nil, err
		}
		return change(u)
	})
	return err
}

// CustomResources returns the objects it could decode, and the errors of
// those it could not.
func (h crdHost) CustomResources(ctx context.Context, name string) ([]*unstructured.Unstructured, error) {
	rs := h.s.reg.CustomResources().ByCRD[name]
	if len(rs) == 0 {
		return nil, nil
	}
	list, err := h.s.cfg.Storage.List(ctx, registry.PrefixFor(rs[0], ""), storage.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(list.Items))
	var errs []error
	for _, kv := range list.Items {
		u, err := registry.DecodeKV(kv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, u)
	}
	return out, errors.Join(errs...)
}

func (h crdHost) DeleteCustomResource(ctx context.Context, crdName, namespace, name string) (bool, error) {
	rs := h.s.reg.CustomResources().ByCRD[crdName]
	if len(rs) == 0 {
		return true, nil
	}
	req := request{res: rs[0], namespace: namespace, name: name}
	_, gone, err := h.s.delete(ctx, req, metav1.DeleteOptions{})
	return gone, err
}

// hostInstallation is what prepareCRD made, for the controller to commit
// or abort.
type hostInstallation struct {
	s  *Server
	in *crdInstallation
}

func (i hostInstallation) Commit() { i.s.commitCRD(i.in) }
func (i hostInstallation) Abort()  { i.in.abort() }
