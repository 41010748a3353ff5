package apiserver

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/listwatch/listwatch/apiserver/internal/crd"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/resources"
)

// scheme holds the built-in types this server serves; it is ours, not
// client-go's, so that only what we register is known.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(resources.AddToScheme(scheme))
}

// resource is everything the handlers need to know about one resource.
type resource struct {
	gvk        schema.GroupVersionKind
	plural     string
	singular   string
	shortNames []string
	categories []string
	namespaced bool
	// custom resources are served as unstructured JSON; no strategic merge
	// patch, no protobuf.
	custom bool
	// hasStatus: a /status subresource exists and the main resource's writes
	// keep the stored status.
	hasStatus bool
	// scale: non-nil when a /scale subresource exists.
	scale *scaleSpec
	// unconditionalUpdate allows PUT without metadata.resourceVersion.
	unconditionalUpdate bool
	// createOnUpdate lets PUT create a missing object.
	createOnUpdate bool
	// returnDeleted answers an immediate delete with the deleted object
	// rather than a Status.
	returnDeleted bool
	// orphanByDefault: a delete without a propagation policy orphans
	// dependents (the legacy default of replicationcontrollers).
	orphanByDefault bool
	// graceful: delete of an object bound to a node waits for the node
	// agent (pods).
	graceful bool
	// binding: a /binding subresource assigns the object to a node (pods).
	binding bool
	// fields are the field selector labels beyond metadata.name and
	// metadata.namespace, each a dotted path into the object.
	fields []string
	// def is the registry's entry of a built-in resource; nil for custom
	// resources.
	def *resources.Resource
	// storedAs is the resource whose storage holds this one's objects,
	// another version of them (resources.Resource.StoredAs); nil when the
	// resource is stored as itself.
	storedAs *resource
	// kube holds Kubernetes' own rules of a built-in resource (defaulting,
	// strategies); nil for custom resources, whose rules are above.
	kube *kube.Rules
	// cr holds kube-apiserver's rules of a custom resource served from a
	// CustomResourceDefinition (package crd); nil for built-ins.
	cr *crd.Rules
	// cache is the watch cache of a custom resource (those of built-ins
	// are in Server.caches).
	cache *servedCache
	// crdName is the CustomResourceDefinition a custom resource is
	// served from; terminating is set while it is being deleted (creates
	// are refused).
	crdName     string
	terminating bool
	// crdFingerprint is the installation's crdFingerprint, and crd the
	// definition installed (shared, not to be changed).
	crdFingerprint string
	crd            *apiextensionsv1.CustomResourceDefinition
	// printer is kube's Table form of a built-in resource, made on first
	// use.
	printOnce sync.Once
	printer   *kube.Printer
	printErr  error
}

// scaleSpec says where a resource keeps what autoscaling/v1 Scale shows.
type scaleSpec struct {
	// selector renders the object's selector as a label selector string.
	selector func(obj map[string]any) (string, error)
	// specReplicas and statusReplicas are where the replicas are; nil
	// means spec.replicas (defaulting to 1) and status.replicas.
	specReplicas, statusReplicas []string
}

func (r *resource) gvr() schema.GroupVersionResource {
	return r.gvk.GroupVersion().WithResource(r.plural)
}

func (r *resource) gr() schema.GroupResource {
	return schema.GroupResource{Group: r.gvk.Group, Resource: r.plural}
}

func (r *resource) apiVersion() string { return r.gvk.GroupVersion().String() }

// qualifiedKind names the resource in the errors of kube-apiserver's
// generic store: the kind of a built-in object, the plural of a custom
// resource (which it serves as unstructured objects).
func (r *resource) qualifiedKind() schema.GroupKind {
	if r.cr != nil {
		return schema.GroupKind{Group: r.gvk.Group, Kind: r.plural}
	}
	return r.gvk.GroupKind()
}

// newTyped returns an empty typed object of the resource's kind; nil for
// custom resources.
func (r *resource) newTyped() runtime.Object {
	if r.custom {
		return nil
	}
	obj, err := scheme.New(r.gvk)
	if err != nil {
		return nil
	}
	return obj
}

// registry indexes resources by group/version and plural.
type registry struct {
	// byGV maps "group/version" ("v1" for core) to plural to resource.
	byGV map[string]map[string]*resource
	// groups in discovery order, core excluded.
	groups []string
	// versions of each group.
	versions map[string][]string
	// custom are the custom resources served from
	// CustomResourceDefinitions, replaced whole on every change so that
	// requests read them without a lock (crd.go).
	custom atomic.Pointer[customSet]
}

func (g *registry) lookup(gv schema.GroupVersion, plural string) *resource {
	if r := g.byGV[gv.String()][plural]; r != nil {
		return r
	}
	if cs := g.custom.Load(); cs != nil {
		return cs.byGV[gv.String()][plural]
	}
	return nil
}

func (g *registry) add(r *resource) error {
	if r.kube == nil {
		// Custom resources come from CustomResourceDefinitions (crd.go),
		// with their own rules, not through the registry.
		return fmt.Errorf("apiserver: resource %s has no Kubernetes rules", r.gvr())
	}
	gv := r.gvk.GroupVersion()
	m := g.byGV[gv.String()]
	if m == nil {
		m = map[string]*resource{}
		g.byGV[gv.String()] = m
		if r.gvk.Group != "" {
			if _, ok := g.versions[r.gvk.Group]; !ok {
				g.groups = append(g.groups, r.gvk.Group)
			}
			g.versions[r.gvk.Group] = append(g.versions[r.gvk.Group], gv.Version)
		}
	}
	if _, dup := m[r.plural]; dup {
		return fmt.Errorf("apiserver: resource %s declared twice", r.gvr())
	}
	for _, other := range m {
		if other.gvk.Kind == r.gvk.Kind {
			return fmt.Errorf("apiserver: kind %s declared twice in %s", r.gvk.Kind, gv)
		}
	}
	m[r.plural] = r
	return nil
}

func (g *registry) resources(gv string) []*resource {
	var out []*resource
	for _, r := range g.byGV[gv] {
		out = append(out, r)
	}
	if cs := g.custom.Load(); cs != nil {
		for plural, r := range cs.byGV[gv] {
			if g.byGV[gv][plural] == nil {
				out = append(out, r)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].plural < out[j].plural })
	return out
}

func newRegistry() (*registry, error) {
	g := &registry{byGV: map[string]map[string]*resource{}, versions: map[string][]string{}}
	for _, r := range builtins() {
		if err := g.add(r); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// builtins are the resources of the registry's table (package resources),
// each with kube-apiserver's own rules for it (package kube): what the
// table states about a resource is read from there, and how its writes
// behave from Kubernetes' strategies.
func builtins() []*resource {
	var out []*resource
	for _, def := range resources.Builtin.All() {
		rules, ok := kube.For(def.GVR(), def.GVK)
		if !ok {
			panic(fmt.Sprintf("apiserver: no Kubernetes strategy for built-in resource %v", def.GVR()))
		}
		r := &resource{
			gvk:                 def.GVK,
			plural:              def.Plural,
			singular:            def.Singular,
			shortNames:          def.ShortNames,
			categories:          def.Categories,
			namespaced:          def.Namespaced,
			def:                 def,
			kube:                rules,
			hasStatus:           def.HasSubresource(resources.Status),
			binding:             def.HasSubresource(resources.Binding),
			unconditionalUpdate: rules.AllowUnconditionalUpdate(),
			createOnUpdate:      rules.AllowCreateOnUpdate(),
			returnDeleted:       rules.ReturnDeleted(),
			orphanByDefault:     rules.OrphanByDefault(),
			graceful:            rules.Graceful(),
			fields:              def.Fields,
		}
		if def.HasSubresource(resources.Scale) {
			r.scale = &scaleSpec{selector: labelSelectorSelector}
			if def.GVK.Group == "" {
				// core/v1's replication controllers keep a map selector.
				r.scale.selector = mapSelector
			}
		}
		out = append(out, r)
	}
	for _, r := range out {
		if r.def.StoredAs.Empty() {
			continue
		}
		for _, other := range out {
			if other.gvk == r.def.StoredAs {
				r.storedAs = other
			}
		}
		if r.storedAs == nil {
			panic(fmt.Sprintf("apiserver: %v is stored as %v, which is not served", r.gvk, r.def.StoredAs))
		}
	}
	return out
}
