// Package clientonly holds the test that a program using only the
// client-side packages of listwatch (cache, informers, workqueue, client,
// controller) builds from a plain `go get` of the module, with no replace
// directive, `go mod tidy` included, and links neither etcd, nor
// Kubernetes' own server code (k8s.io/kubernetes), nor listwatch's API
// server: the promise the module makes to library users while the server
// in the same module imports all three.
//
// The test serves the working tree as a module version from a file-based
// GOPROXY (the module zip written here, in the layout the go command
// reads), in front of the module cache's downloads and the public proxy,
// and works in a temporary module cache that it removes afterwards.
package clientonly
