// Package resources is listwatch's resource registry: every resource it
// knows, stated once — Go type, group/version/kind, plural and singular
// names, short names, categories, scope, subresources and selectable
// fields. The server serves what the registry holds, the client and the
// informer factory find a resource from its Go type alone, and the garbage
// collector, namespace controller and CLI read the same table.
//
// The package is light on purpose: it imports only k8s.io/api and
// k8s.io/apimachinery, so that a program using the client side links
// nothing of the server. Kubernetes' rules for a resource (defaulting,
// validation, strategies) live with the server, keyed by the resource's
// GroupResource.
//
// A Registry holds the built-in resources and, at run time, custom ones;
// Builtin is the shared read-only registry of the built-in ones.
package resources

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Subresource names that the server gives behaviour to.
const (
	Status   = "status"
	Scale    = "scale"
	Binding  = "binding"
	Eviction = "eviction"
	Finalize = "finalize"
	Approval = "approval"
)

// Resource is one served resource: the facts about it that do not depend
// on the code serving it.
type Resource struct {
	GVK        schema.GroupVersionKind
	Plural     string
	Singular   string
	ShortNames []string
	Categories []string
	Namespaced bool
	// Subresources are the names after the object's path (status, scale,
	// binding, …) that discovery lists.
	Subresources []string
	// Fields are the field-selector labels beyond metadata.name and
	// metadata.namespace, each a dotted path into the object.
	Fields []string
	// Verbs the resource answers, as discovery lists them; nil means every
	// verb of a stored resource (Verbs).
	Verbs []string
	// Custom resources are served as unstructured objects.
	Custom bool
	// StoredAs is the kind whose storage holds the objects, for a resource
	// that is another version of a resource stored once (events.k8s.io/v1
	// events are core/v1 events, autoscaling/v1 horizontal pod autoscalers
	// are autoscaling/v2's): the server converts them on the way in and
	// out. Zero for a resource stored as itself.
	StoredAs schema.GroupVersionKind
	// goType is the Go type of an object (a pointer to a struct); nil for
	// custom resources.
	goType reflect.Type
}

// AllVerbs are the verbs of a stored resource in discovery's order.
var AllVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// GVR returns the resource's group, version and plural.
func (r *Resource) GVR() schema.GroupVersionResource {
	return r.GVK.GroupVersion().WithResource(r.Plural)
}

// GroupResource returns the resource's group and plural.
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.GVK.Group, Resource: r.Plural}
}

// APIVersion is "group/version", or "v1" for the core group.
func (r *Resource) APIVersion() string { return r.GVK.GroupVersion().String() }

// HasSubresource reports whether name is one of the resource's
// subresources.
func (r *Resource) HasSubresource(name string) bool { return slices.Contains(r.Subresources, name) }

// DiscoveryVerbs returns the verbs discovery lists for the resource.
func (r *Resource) DiscoveryVerbs() []string {
	if r.Verbs != nil {
		return r.Verbs
	}
	return AllVerbs
}

// GoType returns the Go type of the resource's objects (a pointer to a
// struct), nil for a custom resource.
func (r *Resource) GoType() reflect.Type { return r.goType }

// New returns an empty object of the resource's Go type with its apiVersion
// and kind set; nil for a custom resource.
func (r *Resource) New() runtime.Object {
	if r.goType == nil {
		return nil
	}
	obj := reflect.New(r.goType.Elem()).Interface().(runtime.Object)
	obj.GetObjectKind().SetGroupVersionKind(r.GVK)
	return obj
}

// Registry indexes resources by GroupVersionResource, kind and Go type. Its
// zero value is an empty registry ready for use; it is safe for concurrent
// use.
type Registry struct {
	mu     sync.RWMutex
	byGVR  map[schema.GroupVersionResource]*Resource
	byGVK  map[schema.GroupVersionKind]*Resource
	byType map[reflect.Type]*Resource
}

// NewRegistry returns a registry holding the built-in resources, to which
// custom ones may be added.
func NewRegistry() *Registry {
	g := &Registry{}
	for _, r := range builtins {
		if err := g.Add(r); err != nil {
			panic(fmt.Sprintf("resources: built-in table: %v", err))
		}
	}
	return g
}

// Builtin is the registry of the built-in resources; nothing is added to
// it (a server adds custom resources to a registry of its own).
var Builtin = NewRegistry()

// Add registers r; a resource or a kind already registered in its
// group/version is an error.
func (g *Registry) Add(r *Resource) error {
	if r.Plural == "" || r.GVK.Kind == "" || r.GVK.Version == "" {
		return fmt.Errorf("resources: %v: plural, kind and version are required", r.GVR())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byGVR == nil {
		g.byGVR = map[schema.GroupVersionResource]*Resource{}
		g.byGVK = map[schema.GroupVersionKind]*Resource{}
		g.byType = map[reflect.Type]*Resource{}
	}
	if _, dup := g.byGVR[r.GVR()]; dup {
		return fmt.Errorf("resources: %v declared twice", r.GVR())
	}
	if _, dup := g.byGVK[r.GVK]; dup {
		return fmt.Errorf("resources: kind %v declared twice", r.GVK)
	}
	g.byGVR[r.GVR()] = r
	g.byGVK[r.GVK] = r
	if r.goType != nil {
		// The first registration of a type is the one a type finds (a
		// type served at several versions is found at its first).
		if _, ok := g.byType[r.goType]; !ok {
			g.byType[r.goType] = r
		}
	}
	return nil
}

// Remove unregisters the resource gvr, reporting whether it was there.
func (g *Registry) Remove(gvr schema.GroupVersionResource) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.byGVR[gvr]
	if !ok {
		return false
	}
	delete(g.byGVR, gvr)
	delete(g.byGVK, r.GVK)
	if r.goType != nil && g.byType[r.goType] == r {
		delete(g.byType, r.goType)
	}
	return true
}

// Lookup returns the resource gvr.
func (g *Registry) Lookup(gvr schema.GroupVersionResource) (*Resource, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	r, ok := g.byGVR[gvr]
	return r, ok
}

// ForKind returns the resource whose objects are of kind gvk.
func (g *Registry) ForKind(gvk schema.GroupVersionKind) (*Resource, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	r, ok := g.byGVK[gvk]
	return r, ok
}

// ForType returns the resource whose objects have Go type t.
func (g *Registry) ForType(t reflect.Type) (*Resource, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	r, ok := g.byType[t]
	return r, ok
}

// All returns every resource, ordered by group, version and plural.
func (g *Registry) All() []*Resource {
	g.mu.RLock()
	out := make([]*Resource, 0, len(g.byGVR))
	for _, r := range g.byGVR {
		out = append(out, r)
	}
	g.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].GVR(), out[j].GVR()
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Resource < b.Resource
	})
	return out
}

// For returns the built-in resource whose objects are of type T, such as
// *corev1.Pod.
func For[T runtime.Object]() (*Resource, bool) {
	return Builtin.ForType(reflect.TypeFor[T]())
}

// Lookup returns the built-in resource gvr.
func Lookup(gvr schema.GroupVersionResource) (*Resource, bool) { return Builtin.Lookup(gvr) }

// IsClusterScoped reports whether gvr is a built-in resource that lives
// outside namespaces.
func IsClusterScoped(gvr schema.GroupVersionResource) bool {
	r, ok := Lookup(gvr)
	return ok && !r.Namespaced
}

// AddToScheme registers the Go types of every built-in resource (and their
// lists) in s, under their group/versions.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range schemeBuilders {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}
