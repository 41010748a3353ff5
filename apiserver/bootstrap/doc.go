// Package bootstrap is the API server's start-up: what kube-apiserver does once it serves, before it reports
// ready (its post-start hooks and readiness checks), done the same way,
// through the server's loopback client:
//
//   - informer-sync: the informers of the admission plugins have synced.
//   - poststarthook/start-system-namespaces-controller: the namespaces
//     kube-system, kube-public and kube-node-lease exist, as kube's
//     system namespaces controller makes them (created when missing).
//   - poststarthook/bootstrap-controller: the namespace default exists
//     and, when Config.AdvertiseAddress is set, the "kubernetes" Service
//     in it, with its Endpoints and EndpointSlice, made and kept by kube's
//     own controller (k8s.io/kubernetes/pkg/controlplane/controller/
//     kubernetesservice, with the endpoint reconciler of a single
//     kube-apiserver, reconcilers.NewMasterCountEndpointReconciler), every
//     kubernetesServiceInterval as kube-apiserver runs it. An address
//     Endpoints may not hold (loopback) gets the Service alone.
//   - poststarthook/scheduling/bootstrap-system-priority-classes: the
//     PriorityClasses system-node-critical and system-cluster-critical
//     exist (k8s.io/kubernetes/pkg/apis/scheduling/v1.SystemPriorityClasses,
//     created when missing, never changed).
//   - poststarthook/rbac/bootstrap-roles: the bootstrap RBAC policy
//     (k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy:
//     cluster roles and their bindings, the controllers' roles and
//     bindings, and the roles and bindings of kube-system and kube-public)
//     is reconciled as kube's hook reconciles it
//     (k8s.io/component-helpers/auth/rbac/reconciliation): what is missing
//     is created, and what lacks a rule, subject or label of the policy is
//     completed unless annotated rbac.authorization.kubernetes.io/autoupdate
//     "false". kube's hook first migrates roles and bindings of clusters
//     made before Kubernetes 1.9 and 1.14 to their later names; a store of
//     listwatch never held those, and that step is left out.
//
// Each task runs until it succeeds or the server closes, retrying with a
// backoff (kube-apiserver's hooks give up after 30 s and the process
// exits, to be restarted). The readiness checks of Startup.ReadyChecks
// fail until they are done.
package bootstrap
