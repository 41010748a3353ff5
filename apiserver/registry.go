package apiserver

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// scheme holds the built-in types this server serves; it is ours, not
// client-go's, so that only what we register is known.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(appsv1.AddToScheme(scheme))
	utilruntime.Must(coordinationv1.AddToScheme(scheme))
	utilruntime.Must(autoscalingv1.AddToScheme(scheme))
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
	// kube-apiserver does; set when hasStatus is.
	statusUpdate func(cur, desired *unstructured.Unstructured)
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
	if r.hasStatus != (r.statusUpdate != nil) {
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

// keepSpec takes spec from cur and the rest from the write, metadata
// included (labels, annotations, finalizers, ownerReferences):
// namespaces, replicationcontrollers and services.
func keepSpec(cur, desired *unstructured.Unstructured) {
	keepField(cur, desired, "spec")
}

// podStatusUpdate is keepSpec with cur's ownerReferences: pods/status may
// not touch them (deletionTimestamp, which it may not touch either, is
// cur's for every update).
func podStatusUpdate(cur, desired *unstructured.Unstructured) {
	keepSpec(cur, desired)
	keepField(cur, desired, "metadata", "ownerReferences")
}

// deploymentStatusUpdate is keepSpec with cur's labels; annotations and
// the rest of the metadata are the write's.
func deploymentStatusUpdate(cur, desired *unstructured.Unstructured) {
	keepSpec(cur, desired)
	keepField(cur, desired, "metadata", "labels")
}

// keepField sets the field at path in desired to a copy of cur's, or
// removes it when cur has none.
func keepField(cur, desired *unstructured.Unstructured, path ...string) {
	v, ok, err := unstructured.NestedFieldNoCopy(cur.Object, path...)
	if !ok || err != nil {
		unstructured.RemoveNestedField(desired.Object, path...)
		return
	}
	// SetNestedField copies v. Only a metadata that is not an object
	// fails, and decoding refused that already.
	_ = unstructured.SetNestedField(desired.Object, v, path...)
}

func builtins() []*resource {
	core := func(kind string) schema.GroupVersionKind { return corev1.SchemeGroupVersion.WithKind(kind) }
	return []*resource{
		{
			gvk: core("Namespace"), plural: "namespaces", singular: "namespace", shortNames: []string{"ns"},
			hasStatus: true, unconditionalUpdate: true, returnDeleted: true,
			fields:    []string{"status.phase"},
			validName: apivalidation.ValidateNamespaceName,
			prepareCreate: func(obj map[string]any) {
				obj["status"] = map[string]any{"phase": string(corev1.NamespaceActive)}
			},
			statusUpdate: keepSpec,
		},
		{
			gvk: core("Pod"), plural: "pods", singular: "pod", shortNames: []string{"po"}, categories: []string{"all"},
			namespaced: true, hasStatus: true, unconditionalUpdate: true, returnDeleted: true, graceful: true, binding: true,
			fields:    []string{"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"},
			validName: apivalidation.NameIsDNSSubdomain,
			prepareCreate: func(obj map[string]any) {
				obj["status"] = map[string]any{"phase": string(corev1.PodPending)}
			},
			statusUpdate: podStatusUpdate,
		},
		{
			gvk: core("ReplicationController"), plural: "replicationcontrollers", singular: "replicationcontroller",
			shortNames: []string{"rc"}, categories: []string{"all"},
			namespaced: true, hasStatus: true, generation: true, unconditionalUpdate: true, orphanByDefault: true,
			scale:         &scaleSpec{selector: mapSelector},
			fields:        []string{"status.replicas"},
			validName:     apivalidation.NameIsDNSSubdomain,
			prepareCreate: prepareScalable,
			statusUpdate:  keepSpec,
		},
		{
			gvk: core("Service"), plural: "services", singular: "service", shortNames: []string{"svc"}, categories: []string{"all"},
			namespaced: true, hasStatus: true, unconditionalUpdate: true,
			validName:     apivalidation.NameIsDNS1035Label,
			prepareCreate: dropStatus,
			statusUpdate:  keepSpec,
		},
		{
			gvk: core("Endpoints"), plural: "endpoints", singular: "endpoints", shortNames: []string{"ep"},
			namespaced: true, unconditionalUpdate: true, createOnUpdate: true,
			validName: apivalidation.NameIsDNSSubdomain,
		},
		{
			gvk: core("Event"), plural: "events", singular: "event", shortNames: []string{"ev"},
			namespaced: true, unconditionalUpdate: true, createOnUpdate: true,
			fields: []string{
				"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
				"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
				"reason", "reportingComponent", "source", "type",
			},
			validName: apivalidation.NameIsDNSSubdomain,
		},
		{
			gvk: coordinationv1.SchemeGroupVersion.WithKind("Lease"), plural: "leases", singular: "lease",
			namespaced: true, unconditionalUpdate: true,
			validName: apivalidation.NameIsDNSSubdomain,
		},
		{
			gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"), plural: "deployments", singular: "deployment",
			shortNames: []string{"deploy"}, categories: []string{"all"},
			namespaced: true, hasStatus: true, generation: true, unconditionalUpdate: true,
			scale:         &scaleSpec{selector: labelSelectorSelector},
			validName:     apivalidation.NameIsDNSSubdomain,
			prepareCreate: prepareScalable,
			statusUpdate:  deploymentStatusUpdate,
		},
	}
}
