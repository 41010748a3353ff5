//go:build tools

// Package kubemodules names one package of every module that
// k8s.io/kubernetes's go.mod requires at v0.0.0 (its staging
// repositories, which it replaces with directories of its own). It is
// never built: its imports keep those modules required at their real
// versions in listwatch's go.mod through `go mod tidy`, so that a module
// that depends on listwatch resolves them, and its `go mod tidy` succeeds
// without a replace directive. Without them tidy drops the ones listwatch's
// own packages do not import, and a consumer's tidy, which also loads the
// tests of packages it depends on, fails on v0.0.0 (TestClientOnlyProgram
// builds such a consumer).
package kubemodules

import (
	_ "k8s.io/api"
	_ "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	_ "k8s.io/apimachinery"
	_ "k8s.io/apiserver"
	_ "k8s.io/cli-runtime"
	_ "k8s.io/client-go"
	_ "k8s.io/cloud-provider"
	_ "k8s.io/cluster-bootstrap"
	_ "k8s.io/code-generator"
	_ "k8s.io/component-base"
	_ "k8s.io/component-helpers"
	_ "k8s.io/controller-manager"
	_ "k8s.io/cri-api"
	_ "k8s.io/cri-client/pkg"
	_ "k8s.io/cri-streaming"
	_ "k8s.io/csi-translation-lib"
	_ "k8s.io/dynamic-resource-allocation"
	_ "k8s.io/endpointslice"
	_ "k8s.io/externaljwt"
	_ "k8s.io/kms"
	_ "k8s.io/kube-aggregator/pkg/apiserver"
	_ "k8s.io/kube-controller-manager"
	_ "k8s.io/kube-proxy"
	_ "k8s.io/kube-scheduler"
	_ "k8s.io/kubectl"
	_ "k8s.io/kubelet"
	_ "k8s.io/metrics"
	_ "k8s.io/mount-utils"
	_ "k8s.io/pod-security-admission"
	_ "k8s.io/sample-apiserver/pkg/apiserver"
	_ "k8s.io/streaming"
)
