package apiserver

import "github.com/listwatch/listwatch/apiserver/internal/registry"

// StorageKey is the storage key of the object name of resource plural in
// group ("" for the core group) and namespace ("" for a cluster-scoped
// resource): where the server keeps it, for tools that fill a storage
// before a server starts over it.
func StorageKey(group, plural, namespace, name string) string {
	return registry.StorageKey(group, plural, namespace, name)
}
