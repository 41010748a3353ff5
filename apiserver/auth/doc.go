// Package auth is the API server's authorization and its answers about
// identity, as kube-apiserver's for a kubeadm cluster: kube's RBAC
// authorizer (behind the system:masters group) and the escalation checks
// of role and binding writes, the review resources (SubjectAccessReview
// and its self and local forms, SelfSubjectRulesReview,
// SelfSubjectReview, TokenReview), and service account tokens (the
// TokenRequest subresource that issues them, the authenticator that checks
// them).
//
// Everything here is kube's own code (k8s.io/kubernetes' RBAC authorizer,
// its registries' storages, its token generator and validator) over the
// server's loopback client: the server hands New a Loopback, and routes
// to ServeReview and ServeTokenRequest the paths they serve.
package auth
