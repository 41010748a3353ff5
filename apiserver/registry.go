package apiserver

import "github.com/listwatch/listwatch/apiserver/internal/registry"

// resource is a resource the server serves (registry.Resource).
type resource = registry.Resource

// object is an object the server creates or answers with
// (registry.Object).
type object = registry.Object
