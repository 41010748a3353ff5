// Package compat holds listwatch's compatibility tests: they start the
// listwatch API server on 127.0.0.1 (memory and embedded etcd storage) and
// drive it with the real k8s.io/client-go — informers, pagers, reflectors,
// WatchList and protobuf clientsets — so that a change to the server that
// breaks real Kubernetes clients fails here. The package itself is empty;
// everything is in its tests.
package compat
