package kube

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"

	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingwebhookconfiguration"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingwebhookconfiguration"
	"k8s.io/kubernetes/pkg/registry/apps/controllerrevision"
	"k8s.io/kubernetes/pkg/registry/apps/daemonset"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"
	"k8s.io/kubernetes/pkg/registry/apps/replicaset"
	"k8s.io/kubernetes/pkg/registry/apps/statefulset"
	"k8s.io/kubernetes/pkg/registry/autoscaling/horizontalpodautoscaler"
	"k8s.io/kubernetes/pkg/registry/batch/cronjob"
	"k8s.io/kubernetes/pkg/registry/batch/job"
	"k8s.io/kubernetes/pkg/registry/certificates/certificates"
	"k8s.io/kubernetes/pkg/registry/coordination/lease"
	"k8s.io/kubernetes/pkg/registry/core/configmap"
	"k8s.io/kubernetes/pkg/registry/core/endpoint"
	"k8s.io/kubernetes/pkg/registry/core/event"
	"k8s.io/kubernetes/pkg/registry/core/limitrange"
	"k8s.io/kubernetes/pkg/registry/core/namespace"
	"k8s.io/kubernetes/pkg/registry/core/node"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolume"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolumeclaim"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/kubernetes/pkg/registry/core/podtemplate"
	"k8s.io/kubernetes/pkg/registry/core/replicationcontroller"
	"k8s.io/kubernetes/pkg/registry/core/resourcequota"
	"k8s.io/kubernetes/pkg/registry/core/secret"
	"k8s.io/kubernetes/pkg/registry/core/service"
	"k8s.io/kubernetes/pkg/registry/core/serviceaccount"
	"k8s.io/kubernetes/pkg/registry/discovery/endpointslice"
	"k8s.io/kubernetes/pkg/registry/networking/ingress"
	"k8s.io/kubernetes/pkg/registry/networking/ingressclass"
	"k8s.io/kubernetes/pkg/registry/networking/networkpolicy"
	"k8s.io/kubernetes/pkg/registry/node/runtimeclass"
	"k8s.io/kubernetes/pkg/registry/policy/poddisruptionbudget"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrole"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrolebinding"
	"k8s.io/kubernetes/pkg/registry/rbac/role"
	"k8s.io/kubernetes/pkg/registry/rbac/rolebinding"
	"k8s.io/kubernetes/pkg/registry/scheduling/priorityclass"
	"k8s.io/kubernetes/pkg/registry/storage/csidriver"
	"k8s.io/kubernetes/pkg/registry/storage/csinode"
	"k8s.io/kubernetes/pkg/registry/storage/csistoragecapacity"
	"k8s.io/kubernetes/pkg/registry/storage/storageclass"
	"k8s.io/kubernetes/pkg/registry/storage/volumeattachment"
	"k8s.io/kubernetes/pkg/registry/storage/volumeattributesclass"
)

// strategies are kube-apiserver's own strategies of each built-in resource
// (k8s.io/kubernetes/pkg/registry/...), with the settings of its generic
// store that are not in the strategy (ReturnDeletedObject).
var strategies = map[schema.GroupResource]entry{
	{Resource: "configmaps"}:             {main: configmap.Strategy},
	{Resource: "endpoints"}:              {main: endpoint.Strategy},
	{Resource: "events"}:                 {main: event.Strategy},
	{Resource: "limitranges"}:            {main: limitrange.Strategy},
	{Resource: "namespaces"}:             {main: namespace.Strategy, status: namespace.StatusStrategy, finalize: namespace.FinalizeStrategy, returnDeleted: true},
	{Resource: "nodes"}:                  {main: node.Strategy, status: node.StatusStrategy},
	{Resource: "persistentvolumeclaims"}: {main: persistentvolumeclaim.Strategy, status: persistentvolumeclaim.StatusStrategy, returnDeleted: true},
	{Resource: "persistentvolumes"}:      {main: persistentvolume.Strategy, status: persistentvolume.StatusStrategy, returnDeleted: true},
	{Resource: "pods"}:                   {main: pod.Strategy, status: pod.StatusStrategy, returnDeleted: true},
	{Resource: "podtemplates"}:           {main: podtemplate.Strategy, returnDeleted: true},
	{Resource: "replicationcontrollers"}: {main: replicationcontroller.Strategy, status: replicationcontroller.StatusStrategy},
	{Resource: "resourcequotas"}:         {main: resourcequota.Strategy, status: resourcequota.StatusStrategy, returnDeleted: true},
	{Resource: "secrets"}:                {main: secret.Strategy},
	{Resource: "serviceaccounts"}:        {main: serviceaccount.Strategy, returnDeleted: true},
	{Resource: "services"}:               {main: service.Strategy, status: service.StatusStrategy, returnDeleted: true},

	{Group: "apps", Resource: "controllerrevisions"}: {main: controllerrevision.Strategy},
	{Group: "apps", Resource: "daemonsets"}:          {main: daemonset.Strategy, status: daemonset.StatusStrategy},
	{Group: "apps", Resource: "deployments"}:         {main: deployment.Strategy, status: deployment.StatusStrategy},
	{Group: "apps", Resource: "replicasets"}:         {main: replicaset.Strategy, status: replicaset.StatusStrategy},
	{Group: "apps", Resource: "statefulsets"}:        {main: statefulset.Strategy, status: statefulset.StatusStrategy},

	// events.k8s.io serves core's events (kube-apiserver's storage of
	// both groups is one, with one strategy).
	{Group: "events.k8s.io", Resource: "events"}: {main: event.Strategy},

	{Group: "batch", Resource: "cronjobs"}: {main: cronjob.Strategy, status: cronjob.StatusStrategy},
	{Group: "batch", Resource: "jobs"}:     {main: job.Strategy, status: job.StatusStrategy},

	{Group: "autoscaling", Resource: "horizontalpodautoscalers"}: {main: horizontalpodautoscaler.Strategy, status: horizontalpodautoscaler.StatusStrategy},

	{Group: "policy", Resource: "poddisruptionbudgets"}: {main: poddisruptionbudget.Strategy, status: poddisruptionbudget.StatusStrategy},

	{Group: "networking.k8s.io", Resource: "ingressclasses"}:  {main: ingressclass.Strategy},
	{Group: "networking.k8s.io", Resource: "ingresses"}:       {main: ingress.Strategy, status: ingress.StatusStrategy},
	{Group: "networking.k8s.io", Resource: "networkpolicies"}: {main: networkpolicy.Strategy},

	{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}: {main: clusterrolebinding.Strategy},
	{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}:        {main: clusterrole.Strategy},
	{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}:        {main: rolebinding.Strategy},
	{Group: "rbac.authorization.k8s.io", Resource: "roles"}:               {main: role.Strategy},

	{Group: "discovery.k8s.io", Resource: "endpointslices"}: {main: endpointslice.Strategy},

	{Group: "coordination.k8s.io", Resource: "leases"}: {main: lease.Strategy},

	{Group: "storage.k8s.io", Resource: "csidrivers"}:              {main: csidriver.Strategy, returnDeleted: true},
	{Group: "storage.k8s.io", Resource: "csinodes"}:                {main: csinode.Strategy, status: csinode.StatusStrategy, returnDeleted: true},
	{Group: "storage.k8s.io", Resource: "csistoragecapacities"}:    {main: csistoragecapacity.Strategy},
	{Group: "storage.k8s.io", Resource: "storageclasses"}:          {main: storageclass.Strategy, returnDeleted: true},
	{Group: "storage.k8s.io", Resource: "volumeattachments"}:       {main: volumeattachment.Strategy, status: volumeattachment.StatusStrategy, returnDeleted: true},
	{Group: "storage.k8s.io", Resource: "volumeattributesclasses"}: {main: volumeattributesclass.Strategy, returnDeleted: true},

	{Group: "scheduling.k8s.io", Resource: "priorityclasses"}: {main: priorityclass.Strategy},

	{Group: "node.k8s.io", Resource: "runtimeclasses"}: {main: runtimeclass.Strategy},

	{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}: {main: certificates.Strategy, status: certificates.StatusStrategy, approval: certificates.ApprovalStrategy},

	{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}:   {main: mutatingwebhookconfiguration.Strategy},
	{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}: {main: validatingwebhookconfiguration.Strategy},
}

// entry is one resource's strategies.
type entry struct {
	main     rest.RESTCreateUpdateStrategy
	status   rest.RESTUpdateStrategy
	finalize rest.RESTUpdateStrategy
	approval rest.RESTUpdateStrategy
	// returnDeleted: a delete answers with the object, not a Status.
	returnDeleted bool
	// table prints the internal objects of a resource kube-apiserver's
	// printers do not know (CustomResourceDefinitions).
	table rest.TableConvertor
}
