package apiserver

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
// resource): where the server keeps it, for tools that fill a storage
// before a server starts over it.
func StorageKey(group, plural, namespace, name string) string {
	if namespace == "" {
		return "/registry/" + groupDir(group) + "/" + plural + "/" + name
	}
	return "/registry/" + groupDir(group) + "/" + plural + "/" + namespace + "/" + name
}

// keyFor is the storage key of one object.
func keyFor(r *resource, namespace, name string) string {
	if !r.namespaced {
		namespace = ""
	}
	r = r.storage()
	return StorageKey(r.gvk.Group, r.plural, namespace, name)
}

// prefixFor is the storage prefix of a collection: a namespace's objects,
// or all of them when namespace is "".
func prefixFor(r *resource, namespace string) string {
	p := "/registry/" + groupDir(r.storage().gvk.Group) + "/" + r.storage().plural + "/"
	if r.namespaced && namespace != "" {
		p += namespace + "/"
	}
	return p
}

// kubeStorageKey is the key kube-apiserver keeps the object under in etcd,
// which some of its answers quote (a storage error's "Key:"): a built-in
// resource's under its plural, or the prefix kube compiles in for it
// (replicationcontrollers under "controllers"), a custom resource's under
// its group and plural. It is not where this server keeps it (keyFor).
func kubeStorageKey(r *resource, namespace, name string) string {
	if !r.namespaced {
		namespace = ""
	}
	st := r.storage()
	prefix := st.plural
	if r.custom {
		prefix = st.gvk.Group + "/" + st.plural
	} else if p, ok := kubeapiserver.SpecialDefaultResourcePrefixes[schema.GroupResource{Group: st.gvk.Group, Resource: st.plural}]; ok {
		prefix = p
	}
	if namespace == "" {
		return "/registry/" + prefix + "/" + name
	}
	return "/registry/" + prefix + "/" + namespace + "/" + name
}
