package kube

import (
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	crdtable "k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition/tableconvertor"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CustomResourceDefinitions are served by kube-apiserver's
// apiextensions-apiserver, with its own strategies and Table; they are
// registered here beside the strategies of k8s.io/kubernetes so that a
// CustomResourceDefinition is written, validated and printed like every
// other built-in object. Deleting one is the server's (the finalizer of
// apiextensions-apiserver's REST.Delete).

func init() {
	apiextensionsinstall.Install(scheme)
	strategies[schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}] = entry{
		main:   customresourcedefinition.NewStrategy(scheme),
		status: customresourcedefinition.NewStatusStrategy(scheme),
		table:  crdtable.New(),
	}
}
