package garbagecollector

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
)

// typedResource is the Resource of a namespaced built-in kind whose
// informer holds objects of type T, the type the REST client decodes it
// into and other controllers ask the factory for.
func typedResource[T cache.Object](gv schema.GroupVersion, resource, kind string) Resource {
	return Resource{GVR: gv.WithResource(resource), GVK: gv.WithKind(kind), Namespaced: true, Subscribe: InformerOf[T]()}
}

// BuiltinResources returns the built-in resources that owner references
// commonly join: pods, replication controllers, services, endpoints,
// config maps, secrets, deployments, replica sets, stateful sets, daemon
// sets and jobs. Each subscribes through the informer of its Go type, so
// the collector shares the informers of the controllers that use them.
// Add custom resources with a nil Subscribe.
func BuiltinResources() []Resource {
	core, apps, batch := corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion, batchv1.SchemeGroupVersion
	return []Resource{
		typedResource[*corev1.Pod](core, "pods", "Pod"),
		typedResource[*corev1.ReplicationController](core, "replicationcontrollers", "ReplicationController"),
		typedResource[*corev1.Service](core, "services", "Service"),
		//lint:ignore SA1019 core/v1 Endpoints are still served and owned.
		typedResource[*corev1.Endpoints](core, "endpoints", "Endpoints"),
		typedResource[*corev1.ConfigMap](core, "configmaps", "ConfigMap"),
		typedResource[*corev1.Secret](core, "secrets", "Secret"),
		typedResource[*appsv1.Deployment](apps, "deployments", "Deployment"),
		typedResource[*appsv1.ReplicaSet](apps, "replicasets", "ReplicaSet"),
		typedResource[*appsv1.StatefulSet](apps, "statefulsets", "StatefulSet"),
		typedResource[*appsv1.DaemonSet](apps, "daemonsets", "DaemonSet"),
		typedResource[*batchv1.Job](batch, "jobs", "Job"),
	}
}
