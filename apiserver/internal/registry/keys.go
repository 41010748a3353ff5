package registry

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/kubeapiserver"
)

// Storage keys: /registry/<group or "core">/<plural>/[<namespace>/]<name>.
// Every prefix ends in "/" so that namespace "a" never lists "ab".

func groupDir(group string) string {
	if group == "" {
		return "core"
	}
	return group
}

// StorageKey is the storage key of the object name of resource plural in
// group ("" for the core group) and namespace ("" for a cluster-scoped
// resource).
func StorageKey(group, plural, namespace, name string) string {
	if namespace == "" {
		return "/registry/" + groupDir(group) + "/" + plural + "/" + name
	}
	return "/registry/" + groupDir(group) + "/" + plural + "/" + namespace + "/" + name
}

// KeyFor is the storage key of one object of r.
func KeyFor(r *Resource, namespace, name string) string {
	if !r.Namespaced {
		namespace = ""
	}
	r = r.Storage()
	return StorageKey(r.GVK.Group, r.Plural, namespace, name)
}

// PrefixFor is the storage prefix of a collection of r: a namespace's
// objects, or all of them when namespace is "".
func PrefixFor(r *Resource, namespace string) string {
	p := "/registry/" + groupDir(r.Storage().GVK.Group) + "/" + r.Storage().Plural + "/"
	if r.Namespaced && namespace != "" {
		p += namespace + "/"
	}
	return p
}

// KubeStorageKey is the key kube-apiserver keeps the object under in etcd,
// which some of its answers quote (a storage error's "Key:"): a built-in
// resource's under its plural, or the prefix kube compiles in for it
// (replicationcontrollers under "controllers"), a custom resource's under
// its group and plural. It is not where this server keeps it (KeyFor).
func KubeStorageKey(r *Resource, namespace, name string) string {
	if !r.Namespaced {
		namespace = ""
	}
	st := r.Storage()
	prefix := st.Plural
	if r.Custom {
		prefix = st.GVK.Group + "/" + st.Plural
	} else if p, ok := kubeapiserver.SpecialDefaultResourcePrefixes[schema.GroupResource{Group: st.GVK.Group, Resource: st.Plural}]; ok {
		prefix = p
	}
	if namespace == "" {
		return "/registry/" + prefix + "/" + name
	}
	return "/registry/" + prefix + "/" + namespace + "/" + name
}
