// Package apiserver is a Kubernetes-compatible API server over a
// storage.Interface (etcd or memory), answering as kube-apiserver does.
//
// # One create, from the socket to etcd and back
//
// A POST of a pod to /api/v1/namespaces/default/pods goes down through
// these files:
//
//  1. serve/serve.go accepts the connection; filters/filters.go (Chain)
//     runs the request through recovery, limits, authentication,
//     authorization (filters/authn.go, filters/authz.go) and metrics.
//  2. routes.go (Server.serve) parses the path into a request, finding
//     its registry.Resource with registry.Registry.Lookup
//     (internal/registry/registry.go), and hands it to the verb's handler.
//  3. create.go (handleCreate) reads the body; internal/decode/body.go
//     (decode.New) decodes it as the resource's Go type, or as a map for a
//     custom resource; managedfields.go (manageCreate) records the field
//     manager, whose models internal/registry/fieldmanager.go holds.
//  4. create.go (create) runs namespace lifecycle admission
//     (admission_namespace.go), then the resource's rules (registry.Rules,
//     internal/registry/rules.go): Kubernetes' strategy, admission and
//     validation of a built-in resource (BuiltinRules over
//     internal/kube/kube.go), apiextensions' of a custom one (CustomRules
//     over internal/crd/crd.go); services' rules first allocate cluster
//     IPs and node ports (internal/registry/services.go).
//  5. internal/registry/encode_once.go encodes the object once for both
//     storage and the answer; internal/registry/write_hints.go leaves the
//     Go object for the resource's watch cache (internal/registry/cache.go)
//     under its key (internal/registry/keys.go); the storage package
//     (storage/etcd) stores it.
//  6. Back in create.go the object takes the revision etcd gave it as its
//     resourceVersion, and encode.go (writeEncoded) answers 201 with it,
//     as JSON or protobuf. The watch cache then sees the write from
//     etcd's watch, keeps it in its served JSON
//     (internal/registry/served.go) and sends it to watchers (watch.go,
//     serialize.go), in the encodings of internal/wire.
//
// Updates (update.go, patch.go, apply.go) and deletes (delete.go) take the
// same way down, through the rules' Update and BeforeDelete. An update
// holds its object in one form from the stored bytes to the bytes it
// stores (registry.Resource.DecodeObject): a built-in resource's Go type,
// a custom resource's map; an update that changes nothing is known by
// its bytes, a resource's objects having one stored form
// (registry.Resource.EncodeStored).
//
// # Where a new resource's behaviour goes
//
// A built-in resource is stated once in package resources (its kind,
// scope, subresources, selectable fields); how its writes behave comes
// from its Kubernetes strategy, which internal/kube ties to it (kube.For).
// A custom resource's behaviour comes from its CustomResourceDefinition
// through internal/crd. A resource that does more than its strategy gets
// its own registry.Rules wrapping BuiltinRules, listed in the registry's
// specialRules table (NamespaceRules, CRDRules) or set by the server where
// they hold server state (ServiceRules). What every resource shares below its rules
// (keys, stored form, watch cache) is in internal/registry.
package apiserver
