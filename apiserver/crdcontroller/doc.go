// Package crdcontroller reconciles CustomResourceDefinitions in the API
// server, as kube-apiserver's apiextensions-apiserver controllers do: it
// accepts a definition's names unless another definition of its group
// holds them (NamesAccepted, the naming controller), has its versions
// served and marks it Established (the establishing controller and the
// custom resource handler), states the api-approved.kubernetes.io policy
// of *.k8s.io groups (KubernetesAPIApprovalPolicyConformant), and on
// delete removes every custom resource of the definition, then its
// customresourcecleanup.apiextensions.k8s.io finalizer (the finalizer
// controller).
//
// The controller reads the definitions from the server's watch cache and
// writes their status through the server's own update path; the server
// is reached through the Server interface. Unlike kube-apiserver, it has
// a definition's resources made ready before the status write that makes
// it Established, with no delay, so that Established means served.
package crdcontroller
