package apiserver

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
