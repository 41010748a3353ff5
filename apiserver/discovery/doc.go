// Package discovery serves what clients read to learn the API before they
// use it, as kube-apiserver v1.37 serves it: /version, the discovery
// documents of /api and /apis (legacy and aggregated), and the OpenAPI v2
// and v3 documents.
//
// It knows nothing of how resources are stored or written: the server
// describes what it serves in a Config (groups, and each group version's
// resources as Resource values), and this package makes the documents
// from that description.
package discovery
