package apiserver

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/storage"
)

// namespacesResource is the namespaces resource, for the namespace
// lifecycle admission of creates (namespaceExists) and the keys of
// namespaces.
var namespacesResource = func() *resource {
	for _, r := range registry.Builtins() {
		if r.Plural == "namespaces" {
			return r
		}
	}
	panic("no namespaces resource")
}()

// namespacePhaseField is the selectable field of a namespace's phase.
const namespacePhaseField = "status.phase"

// namespacesPrefix is the storage prefix of namespaces.
var namespacesPrefix = registry.PrefixFor(namespacesResource, "")

// namespaceExists is kube-apiserver's namespace lifecycle admission of a
// create: 404 NotFound for a missing namespace, 403 Forbidden (with the
// NamespaceTerminating cause) for one being deleted.
//
// As kube's plugin reads its namespace informer and looks the namespace up
// in storage only when the informer does not have it, this reads the
// namespaces' watch cache, and storage when the cache does not have the
// namespace or has not yet seen this server's last namespace write (so
// that a namespace this server made or marked Terminating counts at once).
// The storage read it saves is a round trip and a decode per create.
func (s *Server) namespaceExists(ctx context.Context, res *resource, ns, name string) error {
	key := registry.KeyFor(namespacesResource, "", ns)
	phase, found := "", false
	// The cache is the one of the server's own namespaces resource:
	// namespacesResource is a copy of it that no cache is kept for. The
	// phase is one of a namespace's selectable fields, which the cache
	// holds without decoding the namespace: this runs on every create.
	nsRes := s.reg.Lookup(namespacesResource.GVK.GroupVersion(), namespacesResource.Plural)
	if nsRes != nil {
		if c := s.cacheFor(nsRes); c != nil && c.ResourceVersion() >= s.writes.Namespaces() {
			if it, ok := c.Item(key); ok {
				phase, found = it.Field(namespacePhaseField)
			}
		}
	}
	if !found {
		kv, err := s.cfg.Storage.Get(ctx, key)
		if errors.Is(err, storage.ErrNotFound) {
			return apierrors.NewNotFound(namespacesResource.GR(), ns)
		}
		if err != nil {
			return err
		}
		nsObj, err := registry.DecodeKV(kv)
		if err != nil {
			return err
		}
		phase = registry.NestedString(nsObj.Object, registry.FieldPath(namespacesResource, namespacePhaseField)...)
	}
	if phase != string(corev1.NamespaceTerminating) {
		return nil
	}
	if name == "" {
		name = "Unknown"
	}
	err := apierrors.NewForbidden(res.GR(), name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	var st *apierrors.StatusError
	if errors.As(err, &st) {
		st.ErrStatus.Details.Causes = append(st.ErrStatus.Details.Causes, metav1.StatusCause{
			Type:    corev1.NamespaceTerminatingCause,
			Message: fmt.Sprintf("namespace %s is being terminated", ns),
			Field:   "metadata.namespace",
		})
	}
	return err
}
