package resources

import (
	"reflect"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// schemeBuilders register the Go types of the groups below.
var schemeBuilders = []func(*runtime.Scheme) error{
	corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme,
	autoscalingv1.AddToScheme, autoscalingv2.AddToScheme, policyv1.AddToScheme,
	networkingv1.AddToScheme, rbacv1.AddToScheme, discoveryv1.AddToScheme,
	coordinationv1.AddToScheme, storagev1.AddToScheme, schedulingv1.AddToScheme,
	nodev1.AddToScheme, certificatesv1.AddToScheme, admissionregistrationv1.AddToScheme,
	apiextensionsv1.AddToScheme, eventsv1.AddToScheme,
}

// of fills in the GVK and Go type of a resource of type T; the Go type's
// package names the group and version.
func of[T runtime.Object](gv schema.GroupVersion, kind string, r Resource) *Resource {
	r.GVK = gv.WithKind(kind)
	r.goType = reflect.TypeFor[T]()
	return &r
}

var (
	core  = corev1.SchemeGroupVersion
	apps  = appsv1.SchemeGroupVersion
	batch = batchv1.SchemeGroupVersion
	all   = []string{"all"}
)

// builtins is the table of built-in resources, as kube-apiserver v1.37
// serves them by default (names, short names, categories, subresources and
// field selectors as its discovery and field-selector support state them).
// Resources served by kube-apiserver and missing here are listed, with the
// reason, in the README.
var builtins = []*Resource{
	// core/v1
	of[*corev1.ConfigMap](core, "ConfigMap", Resource{Plural: "configmaps", Singular: "configmap", ShortNames: []string{"cm"}, Namespaced: true}),
	//lint:ignore SA1019 core/v1 Endpoints are still served by kube-apiserver v1.37.
	of[*corev1.Endpoints](core, "Endpoints", Resource{Plural: "endpoints", Singular: "endpoints", ShortNames: []string{"ep"}, Namespaced: true}),
	of[*corev1.Event](core, "Event", Resource{Plural: "events", Singular: "event", ShortNames: []string{"ev"}, Namespaced: true,
		Fields: []string{
			"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
			"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
			"reason", "reportingComponent", "source", "type",
		}}),
	of[*corev1.LimitRange](core, "LimitRange", Resource{Plural: "limitranges", Singular: "limitrange", ShortNames: []string{"limits"}, Namespaced: true}),
	of[*corev1.Namespace](core, "Namespace", Resource{Plural: "namespaces", Singular: "namespace", ShortNames: []string{"ns"},
		Subresources: []string{Finalize, Status}, Fields: []string{"status.phase"},
		Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"}}),
	of[*corev1.Node](core, "Node", Resource{Plural: "nodes", Singular: "node", ShortNames: []string{"no"},
		Subresources: []string{Status}, Fields: []string{"spec.unschedulable"}}),
	of[*corev1.PersistentVolumeClaim](core, "PersistentVolumeClaim", Resource{Plural: "persistentvolumeclaims", Singular: "persistentvolumeclaim",
		ShortNames: []string{"pvc"}, Namespaced: true, Subresources: []string{Status}}),
	of[*corev1.PersistentVolume](core, "PersistentVolume", Resource{Plural: "persistentvolumes", Singular: "persistentvolume",
		ShortNames: []string{"pv"}, Subresources: []string{Status}}),
	of[*corev1.Pod](core, "Pod", Resource{Plural: "pods", Singular: "pod", ShortNames: []string{"po"}, Categories: all, Namespaced: true,
		Subresources: []string{Binding, Eviction, Status},
		Fields: []string{"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
			"spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"}}),
	of[*corev1.PodTemplate](core, "PodTemplate", Resource{Plural: "podtemplates", Singular: "podtemplate", Namespaced: true}),
	of[*corev1.ReplicationController](core, "ReplicationController", Resource{Plural: "replicationcontrollers", Singular: "replicationcontroller",
		ShortNames: []string{"rc"}, Categories: all, Namespaced: true, Subresources: []string{Scale, Status}, Fields: []string{"status.replicas"}}),
	of[*corev1.ResourceQuota](core, "ResourceQuota", Resource{Plural: "resourcequotas", Singular: "resourcequota",
		ShortNames: []string{"quota"}, Namespaced: true, Subresources: []string{Status}}),
	of[*corev1.Secret](core, "Secret", Resource{Plural: "secrets", Singular: "secret", Namespaced: true, Fields: []string{"type"}}),
	of[*corev1.ServiceAccount](core, "ServiceAccount", Resource{Plural: "serviceaccounts", Singular: "serviceaccount",
		ShortNames: []string{"sa"}, Namespaced: true}),
	of[*corev1.Service](core, "Service", Resource{Plural: "services", Singular: "service", ShortNames: []string{"svc"}, Categories: all,
		Namespaced: true, Subresources: []string{Status}}),

	// apps/v1
	of[*appsv1.ControllerRevision](apps, "ControllerRevision", Resource{Plural: "controllerrevisions", Singular: "controllerrevision", Namespaced: true}),
	of[*appsv1.DaemonSet](apps, "DaemonSet", Resource{Plural: "daemonsets", Singular: "daemonset", ShortNames: []string{"ds"}, Categories: all,
		Namespaced: true, Subresources: []string{Status}}),
	of[*appsv1.Deployment](apps, "Deployment", Resource{Plural: "deployments", Singular: "deployment", ShortNames: []string{"deploy"}, Categories: all,
		Namespaced: true, Subresources: []string{Scale, Status}}),
	of[*appsv1.ReplicaSet](apps, "ReplicaSet", Resource{Plural: "replicasets", Singular: "replicaset", ShortNames: []string{"rs"}, Categories: all,
		Namespaced: true, Subresources: []string{Scale, Status}, Fields: []string{"status.replicas"}}),
	of[*appsv1.StatefulSet](apps, "StatefulSet", Resource{Plural: "statefulsets", Singular: "statefulset", ShortNames: []string{"sts"}, Categories: all,
		Namespaced: true, Subresources: []string{Scale, Status}}),

	// batch/v1
	of[*batchv1.CronJob](batch, "CronJob", Resource{Plural: "cronjobs", Singular: "cronjob", ShortNames: []string{"cj"}, Categories: all,
		Namespaced: true, Subresources: []string{Status}}),
	of[*batchv1.Job](batch, "Job", Resource{Plural: "jobs", Singular: "job", Categories: all, Namespaced: true,
		Subresources: []string{Status}, Fields: []string{"status.successful"}}),

	// autoscaling/v2, and v1 of the same objects (stored as v2, as
	// kube-apiserver v1.37 stores them)
	of[*autoscalingv2.HorizontalPodAutoscaler](autoscalingv2.SchemeGroupVersion, "HorizontalPodAutoscaler", Resource{
		Plural: "horizontalpodautoscalers", Singular: "horizontalpodautoscaler", ShortNames: []string{"hpa"}, Categories: all,
		Namespaced: true, Subresources: []string{Status}}),
	of[*autoscalingv1.HorizontalPodAutoscaler](autoscalingv1.SchemeGroupVersion, "HorizontalPodAutoscaler", Resource{
		Plural: "horizontalpodautoscalers", Singular: "horizontalpodautoscaler", ShortNames: []string{"hpa"}, Categories: all,
		Namespaced: true, Subresources: []string{Status}, StoredAs: autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler")}),

	// events.k8s.io/v1: core/v1's events, with the field selectors kube
	// maps onto them (pkg/apis/events/v1's field label conversions)
	of[*eventsv1.Event](eventsv1.SchemeGroupVersion, "Event", Resource{Plural: "events", Singular: "event", ShortNames: []string{"ev"}, Namespaced: true,
		Fields: []string{
			"reason", "regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
			"regarding.apiVersion", "regarding.resourceVersion", "regarding.fieldPath", "reportingController", "type",
		},
		StoredAs: core.WithKind("Event")}),

	// policy/v1
	of[*policyv1.PodDisruptionBudget](policyv1.SchemeGroupVersion, "PodDisruptionBudget", Resource{
		Plural: "poddisruptionbudgets", Singular: "poddisruptionbudget", ShortNames: []string{"pdb"}, Namespaced: true, Subresources: []string{Status}}),

	// networking.k8s.io/v1
	of[*networkingv1.IngressClass](networkingv1.SchemeGroupVersion, "IngressClass", Resource{Plural: "ingressclasses", Singular: "ingressclass"}),
	of[*networkingv1.Ingress](networkingv1.SchemeGroupVersion, "Ingress", Resource{Plural: "ingresses", Singular: "ingress",
		ShortNames: []string{"ing"}, Namespaced: true, Subresources: []string{Status}}),
	of[*networkingv1.NetworkPolicy](networkingv1.SchemeGroupVersion, "NetworkPolicy", Resource{Plural: "networkpolicies", Singular: "networkpolicy",
		ShortNames: []string{"netpol"}, Namespaced: true}),

	// rbac.authorization.k8s.io/v1
	of[*rbacv1.ClusterRoleBinding](rbacv1.SchemeGroupVersion, "ClusterRoleBinding", Resource{Plural: "clusterrolebindings", Singular: "clusterrolebinding"}),
	of[*rbacv1.ClusterRole](rbacv1.SchemeGroupVersion, "ClusterRole", Resource{Plural: "clusterroles", Singular: "clusterrole"}),
	of[*rbacv1.RoleBinding](rbacv1.SchemeGroupVersion, "RoleBinding", Resource{Plural: "rolebindings", Singular: "rolebinding", Namespaced: true}),
	of[*rbacv1.Role](rbacv1.SchemeGroupVersion, "Role", Resource{Plural: "roles", Singular: "role", Namespaced: true}),

	// discovery.k8s.io/v1
	of[*discoveryv1.EndpointSlice](discoveryv1.SchemeGroupVersion, "EndpointSlice", Resource{Plural: "endpointslices", Singular: "endpointslice", Namespaced: true}),

	// coordination.k8s.io/v1
	of[*coordinationv1.Lease](coordinationv1.SchemeGroupVersion, "Lease", Resource{Plural: "leases", Singular: "lease", Namespaced: true}),

	// storage.k8s.io/v1
	of[*storagev1.CSIDriver](storagev1.SchemeGroupVersion, "CSIDriver", Resource{Plural: "csidrivers", Singular: "csidriver"}),
	of[*storagev1.CSINode](storagev1.SchemeGroupVersion, "CSINode", Resource{Plural: "csinodes", Singular: "csinode", Subresources: []string{Status}}),
	of[*storagev1.CSIStorageCapacity](storagev1.SchemeGroupVersion, "CSIStorageCapacity", Resource{Plural: "csistoragecapacities", Singular: "csistoragecapacity", Namespaced: true}),
	of[*storagev1.StorageClass](storagev1.SchemeGroupVersion, "StorageClass", Resource{Plural: "storageclasses", Singular: "storageclass", ShortNames: []string{"sc"}}),
	of[*storagev1.VolumeAttachment](storagev1.SchemeGroupVersion, "VolumeAttachment", Resource{Plural: "volumeattachments", Singular: "volumeattachment",
		Subresources: []string{Status}}),
	of[*storagev1.VolumeAttributesClass](storagev1.SchemeGroupVersion, "VolumeAttributesClass", Resource{Plural: "volumeattributesclasses",
		Singular: "volumeattributesclass", ShortNames: []string{"vac"}}),

	// scheduling.k8s.io/v1
	of[*schedulingv1.PriorityClass](schedulingv1.SchemeGroupVersion, "PriorityClass", Resource{Plural: "priorityclasses", Singular: "priorityclass", ShortNames: []string{"pc"}}),

	// node.k8s.io/v1
	of[*nodev1.RuntimeClass](nodev1.SchemeGroupVersion, "RuntimeClass", Resource{Plural: "runtimeclasses", Singular: "runtimeclass"}),

	// certificates.k8s.io/v1
	of[*certificatesv1.CertificateSigningRequest](certificatesv1.SchemeGroupVersion, "CertificateSigningRequest", Resource{
		Plural: "certificatesigningrequests", Singular: "certificatesigningrequest", ShortNames: []string{"csr"},
		Subresources: []string{Approval, Status}, Fields: []string{"spec.signerName"}}),

	// admissionregistration.k8s.io/v1: what kube's admission plugins
	// (webhooks and policies) read
	of[*admissionregistrationv1.MutatingAdmissionPolicy](admissionregistrationv1.SchemeGroupVersion, "MutatingAdmissionPolicy", Resource{
		Plural: "mutatingadmissionpolicies", Singular: "mutatingadmissionpolicy", Categories: []string{"api-extensions"}}),
	of[*admissionregistrationv1.MutatingAdmissionPolicyBinding](admissionregistrationv1.SchemeGroupVersion, "MutatingAdmissionPolicyBinding", Resource{
		Plural: "mutatingadmissionpolicybindings", Singular: "mutatingadmissionpolicybinding", Categories: []string{"api-extensions"}}),
	of[*admissionregistrationv1.MutatingWebhookConfiguration](admissionregistrationv1.SchemeGroupVersion, "MutatingWebhookConfiguration", Resource{
		Plural: "mutatingwebhookconfigurations", Singular: "mutatingwebhookconfiguration", Categories: []string{"api-extensions"}}),
	of[*admissionregistrationv1.ValidatingAdmissionPolicy](admissionregistrationv1.SchemeGroupVersion, "ValidatingAdmissionPolicy", Resource{
		Plural: "validatingadmissionpolicies", Singular: "validatingadmissionpolicy", Categories: []string{"api-extensions"}, Subresources: []string{Status}}),
	of[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](admissionregistrationv1.SchemeGroupVersion, "ValidatingAdmissionPolicyBinding", Resource{
		Plural: "validatingadmissionpolicybindings", Singular: "validatingadmissionpolicybinding", Categories: []string{"api-extensions"}}),
	of[*admissionregistrationv1.ValidatingWebhookConfiguration](admissionregistrationv1.SchemeGroupVersion, "ValidatingWebhookConfiguration", Resource{
		Plural: "validatingwebhookconfigurations", Singular: "validatingwebhookconfiguration", Categories: []string{"api-extensions"}}),

	// apiextensions.k8s.io/v1: the definitions of custom resources, which
	// the server serves as they come and go
	of[*apiextensionsv1.CustomResourceDefinition](apiextensionsv1.SchemeGroupVersion, "CustomResourceDefinition", Resource{
		Plural: "customresourcedefinitions", Singular: "customresourcedefinition", ShortNames: []string{"crd", "crds"},
		Categories: []string{"api-extensions"}, Subresources: []string{Status}}),
}
