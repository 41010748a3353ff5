package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Stand-in storage for k8s.io/apiserver's endpoint installer. The installer
// derives a resource's routes (and so its OpenAPI paths, operations and
// parameters) from the rest interfaces its storage implements; these types
// implement the interfaces of what this server answers for each resource
// and subresource, and nothing else. Their methods only fail: the routes
// are read by the OpenAPI builders, never served.

var errStub = errors.New("kube: OpenAPI route stand-in called")

// stub is what every storage states: its object, scope and singular name,
// and whether delete answers with the deleted object (kube's
// ReturnDeletedObject, which makes the delete operation return the kind
// rather than a Status).
type stub struct {
	newObj        func() runtime.Object
	namespaced    bool
	singular      string
	returnDeleted bool
}

func (s stub) New() runtime.Object              { return s.newObj() }
func (stub) Destroy()                           {}
func (s stub) NamespaceScoped() bool            { return s.namespaced }
func (s stub) GetSingularName() string          { return s.singular }
func (s stub) DeleteReturnsDeletedObject() bool { return s.returnDeleted }

type getter struct{}

func (getter) Get(context.Context, string, *metav1.GetOptions) (runtime.Object, error) {
	return nil, errStub
}

type lister struct{ newList func() runtime.Object }

func (l lister) NewList() runtime.Object { return l.newList() }
func (lister) List(context.Context, *metainternalversion.ListOptions) (runtime.Object, error) {
	return nil, errStub
}
func (lister) ConvertToTable(context.Context, runtime.Object, runtime.Object) (*metav1.Table, error) {
	return nil, errStub
}

type creater struct{}

func (creater) Create(context.Context, runtime.Object, rest.ValidateObjectFunc, *metav1.CreateOptions) (runtime.Object, error) {
	return nil, errStub
}

type namedCreater struct{}

func (namedCreater) Create(context.Context, string, runtime.Object, rest.ValidateObjectFunc, *metav1.CreateOptions) (runtime.Object, error) {
	return nil, errStub
}

type updater struct{}

func (updater) Update(context.Context, string, rest.UpdatedObjectInfo, rest.ValidateObjectFunc, rest.ValidateObjectUpdateFunc, bool, *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return nil, false, errStub
}

type deleter struct{}

func (deleter) Delete(context.Context, string, rest.ValidateObjectFunc, *metav1.DeleteOptions) (runtime.Object, bool, error) {
	return nil, false, errStub
}

type collectionDeleter struct{}

func (collectionDeleter) DeleteCollection(context.Context, rest.ValidateObjectFunc, *metav1.DeleteOptions, *metainternalversion.ListOptions) (runtime.Object, error) {
	return nil, errStub
}

type watcher struct{}

func (watcher) Watch(context.Context, *metainternalversion.ListOptions) (watch.Interface, error) {
	return nil, errStub
}

// kindOf states the kind of a subresource served in another group
// (autoscaling/v1 Scale), as kube's scale storage does.
type kindOf struct{ gvk schema.GroupVersionKind }

func (k kindOf) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind { return k.gvk }

// The storage of each verb set served.
type (
	// every verb of a stored resource
	stored struct {
		stub
		getter
		lister
		creater
		updater
		deleter
		collectionDeleter
		watcher
	}
	// all but deletecollection (namespaces)
	storedNoCollectionDelete struct {
		stub
		getter
		lister
		creater
		updater
		deleter
		watcher
	}
	// get, update and patch (status, approval)
	getUpdate struct {
		stub
		getter
		updater
	}
	// get, update and patch of another kind (scale)
	getUpdateKind struct {
		stub
		getter
		updater
		kindOf
	}
	// update only (namespaces/finalize)
	updateOnly struct {
		stub
		updater
	}
	// create at the object's name (pods/binding)
	createNamed struct {
		stub
		namedCreater
	}
	// create at the object's name of another kind (pods/eviction)
	createNamedKind struct {
		stub
		namedCreater
		kindOf
	}
	// create alone, no list kind (the reviews)
	createOnly struct {
		stub
		creater
	}
)

var (
	allVerbs              = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	allButDeleteColletion = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
)

// addStubs adds the storage of r and its subresources to storage, keyed by
// the installer's paths (pods, pods/status).
func addStubs(storage map[string]rest.Storage, r OpenAPIResource) error {
	newer := func(gvk schema.GroupVersionKind) (func() runtime.Object, error) {
		if _, err := scheme.New(gvk); err != nil {
			return nil, fmt.Errorf("kube: OpenAPI routes of %s: %w", r.Plural, err)
		}
		return func() runtime.Object {
			obj, _ := scheme.New(gvk) // known to succeed: checked above
			return obj
		}, nil
	}
	newObj, err := newer(r.GVK)
	if err != nil {
		return err
	}
	if slices.Equal(r.Verbs, []string{"create"}) && len(r.Subresources) == 0 {
		storage[r.Plural] = &createOnly{stub: stub{newObj: newObj, singular: r.Singular, namespaced: r.Namespaced}}
		return nil
	}
	newList, err := newer(r.GVK.GroupVersion().WithKind(r.GVK.Kind + "List"))
	if err != nil {
		return err
	}
	gr := r.GVK.GroupVersion().WithResource(r.Plural).GroupResource()
	base := stub{newObj: newObj, namespaced: r.Namespaced, singular: r.Singular,
		// kube's namespace storage is not a generic store and does not
		// say it returns the deleted object, though it does.
		returnDeleted: strategies[gr].returnDeleted && gr != schema.GroupResource{Resource: "namespaces"}}
	verbs := slices.Clone(r.Verbs)
	sort.Strings(verbs)
	switch {
	case slices.Equal(verbs, allVerbs):
		storage[r.Plural] = &stored{stub: base, lister: lister{newList}}
	case slices.Equal(verbs, allButDeleteColletion):
		storage[r.Plural] = &storedNoCollectionDelete{stub: base, lister: lister{newList}}
	default:
		return fmt.Errorf("kube: OpenAPI routes of %s: no stand-in storage for verbs %v", r.Plural, r.Verbs)
	}
	sub := stub{newObj: newObj, namespaced: r.Namespaced}
	for _, name := range r.Subresources {
		path := r.Plural + "/" + name
		switch name {
		case "status", "approval":
			storage[path] = &getUpdate{stub: sub}
		case "finalize":
			storage[path] = &updateOnly{stub: sub}
		case "scale":
			newScale, err := newer(scaleKind)
			if err != nil {
				return err
			}
			storage[path] = &getUpdateKind{stub: stub{newObj: newScale, namespaced: r.Namespaced}, kindOf: kindOf{scaleKind}}
		case "binding":
			newBinding, err := newer(bindingKind)
			if err != nil {
				return err
			}
			storage[path] = &createNamed{stub: stub{newObj: newBinding, namespaced: r.Namespaced}}
		case "eviction":
			newEviction, err := newer(evictionKind)
			if err != nil {
				return err
			}
			storage[path] = &createNamedKind{stub: stub{newObj: newEviction, namespaced: r.Namespaced}, kindOf: kindOf{evictionKind}}
		default:
			return fmt.Errorf("kube: OpenAPI routes of %s: no stand-in storage for subresource %q", r.Plural, name)
		}
	}
	return nil
}
