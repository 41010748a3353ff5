package garbagecollector

import (
	"reflect"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/listwatch/listwatch/resources"
)

// sharedTyped are the Go types whose typed informers the other controllers
// of this module hold (the ReplicationManager, the endpoints controller,
// the pod lifecycle controller; deployments for the Deployment
// controller): the collector shares those rather than keeping a metadata
// informer of its own beside them.
var sharedTyped = map[reflect.Type]Subscriber{
	reflect.TypeFor[*corev1.Pod]():                   InformerOf[*corev1.Pod](),
	reflect.TypeFor[*corev1.ReplicationController](): InformerOf[*corev1.ReplicationController](),
	reflect.TypeFor[*corev1.Service]():               InformerOf[*corev1.Service](),
	//lint:ignore SA1019 core/v1 Endpoints are still served, owned and informed on.
	reflect.TypeFor[*corev1.Endpoints]():  InformerOf[*corev1.Endpoints](),
	reflect.TypeFor[*appsv1.Deployment](): InformerOf[*appsv1.Deployment](),
}

// BuiltinResources returns every built-in resource of the resource
// registry (package resources) that can be listed, watched and deleted:
// all of them, namespaced and cluster-scoped. Those whose typed informers
// other controllers hold (pods, replication controllers, services,
// endpoints, deployments) subscribe through the informer of their Go type,
// so that the collector shares it; every other one through a metadata-only
// informer (Metadata), as Kubernetes' collector does, which caches no
// object's spec or data. Add custom resources with a nil Subscribe.
func BuiltinResources() []Resource {
	var out []Resource
	for _, r := range resources.Builtin.All() {
		verbs := r.DiscoveryVerbs()
		if !slices.Contains(verbs, "list") || !slices.Contains(verbs, "watch") || !slices.Contains(verbs, "delete") {
			continue
		}
		sub := sharedTyped[r.GoType()]
		if sub == nil {
			sub = Metadata()
		}
		out = append(out, Resource{GVR: r.GVR(), GVK: r.GVK, Namespaced: r.Namespaced, Subscribe: sub})
	}
	return out
}
