package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/client"
)

// Resources the fakes serve.
var (
	configmapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
	secretsGVR    = corev1.SchemeGroupVersion.WithResource("secrets")
	widgetsGVR    = schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}
	nodesGVR      = corev1.SchemeGroupVersion.WithResource("nodes")
	bindingsGVR   = corev1.SchemeGroupVersion.WithResource("bindings")

	allVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

	servedPods       = client.APIResource{GVR: podsGVR, Kind: "Pod", Namespaced: true, Verbs: allVerbs}
	servedConfigMaps = client.APIResource{GVR: configmapsGVR, Kind: "ConfigMap", Namespaced: true, Verbs: allVerbs}
	servedSecrets    = client.APIResource{GVR: secretsGVR, Kind: "Secret", Namespaced: true, Verbs: allVerbs}
	servedWidgets    = client.APIResource{GVR: widgetsGVR, Kind: "Widget", Namespaced: true, Verbs: allVerbs}
	servedNodes      = client.APIResource{GVR: nodesGVR, Kind: "Node", Verbs: allVerbs}
	// bindings can only be created.
	servedBindings = client.APIResource{GVR: bindingsGVR, Kind: "Binding", Namespaced: true, Verbs: []string{"create"}}
	defaultServed  = []client.APIResource{servedPods, servedConfigMaps, servedSecrets, servedWidgets, servedNodes, servedBindings}
)

// fakeObj is one object of the fake: its metadata and, for pods, what
// their deletion and grace estimate depend on.
type fakeObj struct {
	meta     metav1.ObjectMeta
	nodeName string // a bound pod is deleted gracefully: it stays, deletionTimestamp set
	grace    *int64
	phase    corev1.PodPhase
}

// fakeAPI stands in for the API server: namespaces in a cachetest Source
// (which the informer of the Run tests watches), other objects in maps,
// the server's deletion rules on top, faults on demand, and a record of
// the writes.
type fakeAPI struct {
	namespaces *cachetest.Source[*corev1.Namespace]
	now        func() time.Time

	mu                sync.Mutex
	served            []client.APIResource
	discoveryErr      error
	objs              map[schema.GroupVersionResource]map[string]*fakeObj
	listErr           map[schema.GroupVersionResource]error
	deleteErr         map[schema.GroupVersionResource]error
	finalizeConflicts int  // finalize calls still to answer Conflict
	replaceOnConflict bool // after a Conflict, the namespace is another of the same name
	// calls records the writes: "delete <resource> <ns>/<name>",
	// "status <phase> <n> conditions", "finalize <finalizers>".
	calls []string
	// lastStatus is the status last written.
	lastStatus *corev1.NamespaceStatus
}

func newFakeAPI(now func() time.Time) *fakeAPI {
	return &fakeAPI{
		namespaces: cachetest.New(cachetest.WithResource[*corev1.Namespace](corev1.Resource("namespaces"))),
		now:        now,
		served:     slices.Clone(defaultServed),
		objs:       map[schema.GroupVersionResource]map[string]*fakeObj{},
		listErr:    map[schema.GroupVersionResource]error{},
		deleteErr:  map[schema.GroupVersionResource]error{},
	}
}

func (a *fakeAPI) add(gvr schema.GroupVersionResource, o *fakeObj) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.objs[gvr] == nil {
		a.objs[gvr] = map[string]*fakeObj{}
	}
	a.objs[gvr][o.meta.Namespace+"/"+o.meta.Name] = o
}

// left lists the objects of gvr that remain, as "ns/name".
func (a *fakeAPI) left(gvr schema.GroupVersionResource) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for k := range a.objs[gvr] {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (a *fakeAPI) record(format string, args ...any) {
	a.calls = append(a.calls, fmt.Sprintf(format, args...))
}

func (a *fakeAPI) status() *corev1.NamespaceStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastStatus.DeepCopy()
}

func (a *fakeAPI) writes() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

func (a *fakeAPI) ServerResources(context.Context) ([]client.APIResource, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.discoveryErr != nil {
		return nil, a.discoveryErr
	}
	return slices.Clone(a.served), nil
}

func (a *fakeAPI) GetNamespace(_ context.Context, name string) (*corev1.Namespace, error) {
	ns, ok := a.namespaces.Get("", name)
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	return ns.DeepCopy(), nil
}

func (a *fakeAPI) UpdateNamespaceStatus(_ context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	a.mu.Lock()
	a.record("status %s %d conditions", ns.Status.Phase, len(ns.Status.Conditions))
	a.lastStatus = ns.Status.DeepCopy()
	a.mu.Unlock()
	cur, ok := a.namespaces.Get("", ns.Name)
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), ns.Name)
	}
	next := cur.DeepCopy()
	next.ResourceVersion = ns.ResourceVersion
	next.Status = *ns.Status.DeepCopy()
	return a.namespaces.Update(next)
}

func (a *fakeAPI) FinalizeNamespace(_ context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	a.mu.Lock()
	a.record("finalize %v", ns.Spec.Finalizers)
	if a.finalizeConflicts > 0 {
		a.finalizeConflicts--
		if a.replaceOnConflict {
			cur, _ := a.namespaces.Get("", ns.Name)
			next := cur.DeepCopy()
			next.UID = "replaced"
			if _, err := a.namespaces.Update(next); err != nil {
				a.mu.Unlock()
				return nil, err
			}
		}
		a.mu.Unlock()
		return nil, apierrors.NewConflict(corev1.Resource("namespaces"), ns.Name, errors.New("the object has been modified"))
	}
	a.mu.Unlock()
	cur, ok := a.namespaces.Get("", ns.Name)
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), ns.Name)
	}
	next := cur.DeepCopy()
	next.ResourceVersion = ns.ResourceVersion
	next.Spec.Finalizers = slices.Clone(ns.Spec.Finalizers)
	out, err := a.namespaces.Update(next)
	if err != nil {
		return nil, err
	}
	// As the server: a deleted namespace that nothing holds any more goes.
	if out.DeletionTimestamp != nil && len(out.Spec.Finalizers) == 0 && len(out.Finalizers) == 0 {
		return a.namespaces.Delete("", ns.Name)
	}
	return out, nil
}

func (a *fakeAPI) ListPods(_ context.Context, namespace string) ([]*corev1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.listErr[podsGVR]; err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, o := range a.objs[podsGVR] {
		if o.meta.Namespace == namespace {
			out = append(out, &corev1.Pod{ObjectMeta: *o.meta.DeepCopy(),
				Spec:   corev1.PodSpec{NodeName: o.nodeName, TerminationGracePeriodSeconds: o.grace},
				Status: corev1.PodStatus{Phase: o.phase}})
		}
	}
	return out, nil
}

func (a *fakeAPI) ListMetadata(_ context.Context, gvr schema.GroupVersionResource, namespace string) ([]*metav1.PartialObjectMetadata, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.listErr[gvr]; err != nil {
		return nil, err
	}
	var out []*metav1.PartialObjectMetadata
	for _, o := range a.objs[gvr] {
		if o.meta.Namespace == namespace {
			out = append(out, &metav1.PartialObjectMetadata{ObjectMeta: *o.meta.DeepCopy()})
		}
	}
	return out, nil
}

func (a *fakeAPI) Delete(_ context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.deleteErr[gvr]; err != nil {
		return err
	}
	if p := opts.PropagationPolicy; p == nil || *p != metav1.DeletePropagationBackground {
		return fmt.Errorf("delete of %s %s/%s: propagation %v, want Background", gvr.Resource, namespace, name, p)
	}
	key := namespace + "/" + name
	o, ok := a.objs[gvr][key]
	if !ok {
		return apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	a.record("delete %s %s", gvr.Resource, key)
	if len(o.meta.Finalizers) > 0 || o.nodeName != "" {
		if o.meta.DeletionTimestamp == nil {
			ts := metav1.NewTime(a.now())
			o.meta.DeletionTimestamp = &ts
		}
		return nil
	}
	delete(a.objs[gvr], key)
	return nil
}

// release removes finalizer-held and graceful objects that were deleted,
// as their controllers and node agents would.
func (a *fakeAPI) release(gvr schema.GroupVersionResource, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.objs[gvr], key)
}

// deletingNamespace is a namespace deleted at deletedAt, with spec.finalizers
// fins and phase.
func deletingNamespace(name string, deletedAt time.Time, phase corev1.NamespacePhase, fins ...corev1.FinalizerName) *corev1.Namespace {
	ts := metav1.NewTime(deletedAt)
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), DeletionTimestamp: &ts},
		Spec:       corev1.NamespaceSpec{Finalizers: fins},
		Status:     corev1.NamespaceStatus{Phase: phase},
	}
}

func meta(ns, name string, finalizers ...string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers}
}

func ptr[T any](v T) *T { return &v }
