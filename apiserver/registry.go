package apiserver

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

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
	// generation is set to 1 on create and bumped when spec changes.
	generation bool
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
	// validName checks metadata.name.
	validName apivalidation.ValidateNameFunc
	// prepareCreate resets what a client may not set on create (status).
	prepareCreate func(obj map[string]any)
	// statusUpdate turns the object a /status write sent (desired) into
	// what it may change of cur, as the resource's status strategy in
	// kube-apiserver does; set when hasStatus is, for custom resources.
	statusUpdate func(cur, desired *unstructured.Unstructured)
	// def is the registry's entry of a built-in resource; nil for custom
	// resources.
	def *resources.Resource
	// kube holds Kubernetes' own rules of a built-in resource (defaulting,
	// strategies); nil for custom resources, whose rules are above.
	kube *kube.Rules
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
}

func (r *resource) gvr() schema.GroupVersionResource {
	return r.gvk.GroupVersion().WithResource(r.plural)
}

func (r *resource) gr() schema.GroupResource {
	return schema.GroupResource{Group: r.gvk.Group, Resource: r.plural}
}

func (r *resource) apiVersion() string { return r.gvk.GroupVersion().String() }

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
}

func (g *registry) lookup(gv schema.GroupVersion, plural string) *resource {
	return g.byGV[gv.String()][plural]
}

func (g *registry) add(r *resource) error {
	if r.kube == nil && r.hasStatus != (r.statusUpdate != nil) {
		return fmt.Errorf("apiserver: resource %s: a status subresource needs its status update rule, and only it", r.gvr())
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
	sort.Slice(out, func(i, j int) bool { return out[i].plural < out[j].plural })
	return out
}

func newRegistry(crs []CustomResource) (*registry, error) {
	g := &registry{byGV: map[string]map[string]*resource{}, versions: map[string][]string{}}
	for _, r := range builtins() {
		if err := g.add(r); err != nil {
			return nil, err
		}
	}
	if err := validateCustomResources(crs); err != nil {
		return nil, err
	}
	for _, cr := range crs {
		singular := cr.Singular
		if singular == "" {
			singular = strings.ToLower(cr.Kind)
		}
		r := &resource{
			gvk:        schema.GroupVersionKind{Group: cr.Group, Version: cr.Version, Kind: cr.Kind},
			plural:     cr.Plural,
			singular:   singular,
			shortNames: cr.ShortNames,
			namespaced: cr.Namespaced,
			custom:     true,
			hasStatus:  true,
			generation: true,
			// kube-apiserver requires resourceVersion on updates of custom
			// resources and returns them when deleted.
			returnDeleted: true,
			validName:     apivalidation.NameIsDNSSubdomain,
			prepareCreate: dropStatus,
			statusUpdate:  statusOnly,
		}
		if err := g.add(r); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func validateCustomResources(crs []CustomResource) error {
	var errs []error
	for i, cr := range crs {
		switch {
		case cr.Group == "" || cr.Version == "" || cr.Kind == "" || cr.Plural == "":
			errs = append(errs, fmt.Errorf("custom resource %d: group, version, kind and plural are required", i))
		case len(apivalidation.NameIsDNSSubdomain(cr.Group, false)) > 0 || !strings.Contains(cr.Group, "."):
			errs = append(errs, fmt.Errorf("custom resource %d: group %q must be a DNS subdomain with a dot", i, cr.Group))
		case len(apivalidation.NameIsDNSLabel(cr.Plural, false)) > 0 || cr.Plural != strings.ToLower(cr.Plural):
			errs = append(errs, fmt.Errorf("custom resource %d: plural %q must be a lowercase DNS label", i, cr.Plural))
		case len(apivalidation.NameIsDNSLabel(cr.Version, false)) > 0:
			errs = append(errs, fmt.Errorf("custom resource %d: version %q must be a DNS label", i, cr.Version))
		}
	}
	return errors.Join(errs...)
}

func dropStatus(obj map[string]any) { delete(obj, "status") }

// The rules of /status writes, after kube-apiserver's status strategies
// (their PrepareForUpdate). Whatever they leave of the write's metadata
// then goes through the rules every update shares (prepareUpdate): the
// server's own fields come from cur, and the rest is validated.

// statusOnly keeps cur but for status: custom resources, whose status
// strategy copies the stored object over the write but for status (and
// managedFields, which this server does not keep).
func statusOnly(cur, desired *unstructured.Unstructured) {
	status, hasStatus := desired.Object["status"]
	desired.Object = deepCopy(cur).Object
	if hasStatus {
		desired.Object["status"] = status
	} else {
		delete(desired.Object, "status")
	}
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
	return out
}
