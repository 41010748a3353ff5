package apiserver

import "net/http"

// OpenAPI v2 (/openapi/v2) is what kubectl falls back to, and what its
// client-side validation reads: with --validate=strict, a manifest of
// `kind: List` (the output of `kubectl get -o yaml`) is checked against
// these definitions rather than by the server. It is one Swagger 2.0
// document of the whole API (the built-in one merged with the custom
// resources' as kube-apiserver merges them), served as JSON, or in
// protobuf when asked for by either of its names
// (application/com.github.proto-openapi.spec.v2@v1.0+protobuf or
// ...spec.v2.v1.0+protobuf), built on first request (see openapi.go).

// serveOpenAPIV2 answers /openapi/v2.
func (s *Server) serveOpenAPIV2(w http.ResponseWriter, r *http.Request) {
	s.serveOpenAPIDocs(w, r)
}
