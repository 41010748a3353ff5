package apiserver

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/listwatch/listwatch/apiserver/internal/crd"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/watchcache"
)

// Custom resources are served from CustomResourceDefinitions: the CRD
// controller (package crdcontroller) installs the served versions of an
// accepted definition here, with a watch cache each, and removes them when
// it goes. The set of custom resources is replaced whole on every change,
// so that a request reads it with one atomic load.

// cacheFor returns the watch cache of r.
func (s *Server) cacheFor(r *resource) *registry.Cache {
	if r.Cache != nil {
		return r.Cache
	}
	return s.caches[r]
}

// crdResource is the registry's entry of CustomResourceDefinitions.
func (s *Server) crdResource() *resource {
	return s.reg.Lookup(apiextensionsv1.SchemeGroupVersion, "customresourcedefinitions")
}

// crdInstallation is a definition's resources made ready to serve.
type crdInstallation struct {
	crd *apiextensionsv1.CustomResourceDefinition
	rs  []*resource
	// made are the watch caches made for it, old those of the
	// installation it replaces that it does not keep.
	made, old []*registry.Cache
}

// abort closes what prepareCRD made; in may be nil.
func (in *crdInstallation) abort() {
	if in == nil {
		return
	}
	for _, c := range in.made {
		c.Close()
	}
}

// commitCRD serves what prepareCRD made; in may be nil (nothing changed).
func (s *Server) commitCRD(in *crdInstallation) {
	if in == nil {
		return
	}
	if !s.publishCRD(in.crd.Name, in.rs) {
		// The OpenAPI documents, not made yet, will have it.
		for _, c := range in.old {
			c.Close()
		}
		return
	}
	for _, c := range in.old {
		c.Close()
	}
	if err := s.SetCustomResourceOpenAPI(in.crd); err != nil {
		// Served all the same, as kube-apiserver serves a definition
		// whose OpenAPI it cannot build.
		s.log.Warn("crd: OpenAPI", "crd", in.crd.Name, "err", err)
	}
}

// prepareCRD makes the resources of crd's served versions and their
// watch caches, without serving them; nil when what is served is already
// that.
func (s *Server) prepareCRD(crdObj *apiextensionsv1.CustomResourceDefinition) (*crdInstallation, error) {
	fp := registry.Fingerprint(crdObj)
	if rs := s.reg.CustomResources().ByCRD[crdObj.Name]; len(rs) > 0 && rs[0].CRDFingerprint == fp {
		return nil, nil
	}
	structural, err := crd.Structural(crdObj)
	if err != nil {
		return nil, err
	}
	old := map[string]*resource{}
	for _, r := range s.reg.CustomResources().ByCRD[crdObj.Name] {
		old[r.GVK.Version] = r
	}
	in := &crdInstallation{crd: crdObj.DeepCopy()}
	fail := func(err error) (*crdInstallation, error) {
		in.abort()
		return nil, err
	}
	for _, v := range crdObj.Spec.Versions {
		if !v.Served {
			continue
		}
		r, err := registry.NewCustom(in.crd, v.Name, structural, fp, s.converters)
		if err != nil {
			return fail(err)
		}
		if o := old[v.Name]; o != nil && o.Plural == r.Plural && o.Namespaced == r.Namespaced && o.GVK.Kind == r.GVK.Kind {
			r.Cache = o.Cache
			delete(old, v.Name)
		} else {
			c, err := s.newCustomCache(r)
			if err != nil {
				return fail(fmt.Errorf("apiserver: watch cache of %s: %w", r.GVR(), err))
			}
			r.Cache = c
			in.made = append(in.made, c)
		}
		in.rs = append(in.rs, r)
	}
	for _, o := range old {
		in.old = append(in.old, o.Cache)
	}
	return in, nil
}

// uninstallCRD stops serving the custom resources of the definition name.
func (s *Server) uninstallCRD(name string) {
	rs := s.reg.CustomResources().ByCRD[name]
	if rs == nil {
		return
	}
	openAPI := s.publishCRD(name, nil)
	for _, r := range rs {
		r.Cache.Close()
	}
	if openAPI {
		s.RemoveCustomResourceOpenAPI(name)
	}
}

// awaitCustomDeletes waits, up to timeout, until the watch caches of the
// definition name hold no object: its custom resources were deleted from
// storage, and each cache's watchers get their DELETED events before it
// closes (uninstallCRD), as kube-apiserver's watches see them while its
// storage of the resource stays.
func (s *Server) awaitCustomDeletes(ctx context.Context, name string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for _, r := range s.reg.CustomResources().ByCRD[name] {
		for time.Now().Before(deadline) && ctx.Err() == nil {
			l, err := r.Cache.List(ctx, watchcache.ListOptions{ResourceVersion: "0", Limit: 1})
			if err != nil || len(l.Items) == 0 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// publishCRD replaces the resources of the definition name (none: it is
// no longer served). It reports whether the OpenAPI documents were made
// before (the caller then changes them), so that they, made on first use,
// miss no definition.
func (s *Server) publishCRD(name string, rs []*resource) bool {
	s.crdPublish.Lock()
	defer s.crdPublish.Unlock()
	byCRD := map[string][]*resource{}
	for k, v := range s.reg.CustomResources().ByCRD {
		byCRD[k] = v
	}
	if rs == nil {
		delete(byCRD, name)
	} else {
		byCRD[name] = rs
	}
	s.reg.Custom.Store(registry.NewCustomSet(byCRD))
	return s.crdOpenAPI
}

// openAPICRDs returns the definitions served, for the OpenAPI documents
// being made, and has the later changes of what is served made in them.
func (s *Server) openAPICRDs() []*apiextensionsv1.CustomResourceDefinition {
	s.crdPublish.Lock()
	defer s.crdPublish.Unlock()
	s.crdOpenAPI = true
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, rs := range s.reg.CustomResources().ByCRD {
		if len(rs) > 0 && rs[0].CRD != nil {
			out = append(out, rs[0].CRD)
		}
	}
	return out
}

// closeCustomCaches closes the watch caches of every custom resource.
func (s *Server) closeCustomCaches() {
	s.crdPublish.Lock()
	defer s.crdPublish.Unlock()
	for _, rs := range s.reg.CustomResources().ByCRD {
		for _, r := range rs {
			r.Cache.Close()
		}
	}
	s.reg.Custom.Store(nil)
}

// newCustomCache runs the watch cache of a custom resource r, whose
// objects are decoded as kube-apiserver's storage decodes custom resources
// for r's version (conversion, pruning, defaults), and returns it once it
// holds its first list (or the server stops).
func (s *Server) newCustomCache(r *resource) (*registry.Cache, error) {
	c, err := s.newCache(r, r.DecodeListItem)
	if err != nil {
		return nil, err
	}
	s.runCache(c)
	<-c.Ready()
	return c, nil
}

// crdGVK is the kind of CustomResourceDefinitions.
var crdGVK = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")
