package apiserver

// Storage keys: /registry/<group or "core">/<plural>/[<namespace>/]<name>.
// Every prefix ends in "/" so that namespace "a" never lists "ab".

func groupDir(r *resource) string {
	if r.gvk.Group == "" {
		return "core"
	}
	return r.gvk.Group
}

// keyFor is the storage key of one object.
func keyFor(r *resource, namespace, name string) string {
	if r.namespaced {
		return "/registry/" + groupDir(r) + "/" + r.plural + "/" + namespace + "/" + name
	}
	return "/registry/" + groupDir(r) + "/" + r.plural + "/" + name
}

// prefixFor is the storage prefix of a collection: a namespace's objects,
// or all of them when namespace is "".
func prefixFor(r *resource, namespace string) string {
	p := "/registry/" + groupDir(r) + "/" + r.plural + "/"
	if r.namespaced && namespace != "" {
		p += namespace + "/"
	}
	return p
}
