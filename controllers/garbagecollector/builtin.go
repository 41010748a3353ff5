package garbagecollector

import (
	"context"
	"reflect"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/resources"
)

// sharedTyped are the Go types whose typed informers the other controllers
// of this module hold (the ReplicationManager, the ReplicaSet and
// Deployment controllers, the Job and CronJob controllers, the
// StatefulSet and DaemonSet controllers, the disruption controller's
// budgets, the endpoints, EndpointSlice and EndpointSlice mirroring
// controllers,
// the pod lifecycle controller and its nodes, the service account, root
// CA, cluster role aggregation and admission policy status controllers,
// and the resource quota controller's quotas and claims):
// the collector shares those rather than keeping a metadata
// informer of its own beside them, which would be a second watch of the
// same objects and a second decode of each of their events.
var sharedTyped = subscribersOf(
	typed[*corev1.Pod], typed[*corev1.ReplicationController], typed[*corev1.Service],
	//lint:ignore SA1019 core/v1 Endpoints are still served, owned and informed on.
	typed[*corev1.Endpoints], typed[*corev1.ServiceAccount], typed[*corev1.ConfigMap],
	typed[*appsv1.Deployment], typed[*appsv1.ReplicaSet], typed[*rbacv1.ClusterRole],
	typed[*batchv1.Job], typed[*batchv1.CronJob], typed[*corev1.Node], typed[*admissionregistrationv1.ValidatingAdmissionPolicy],
	typed[*appsv1.StatefulSet], typed[*appsv1.DaemonSet], typed[*appsv1.ControllerRevision], typed[*corev1.PersistentVolumeClaim], typed[*corev1.ResourceQuota],
	typed[*corev1.PersistentVolume],
	typed[*discoveryv1.EndpointSlice],
	typed[*policyv1.PodDisruptionBudget],
)

// typed adds to m the Subscriber of the informer of T.
func typed[T cache.Object](m map[reflect.Type]Subscriber) { m[reflect.TypeFor[T]()] = InformerOf[T]() }

// subscribersOf is the table the adds fill.
func subscribersOf(adds ...func(map[reflect.Type]Subscriber)) map[reflect.Type]Subscriber {
	m := map[reflect.Type]Subscriber{}
	for _, add := range adds {
		add(m)
	}
	return m
}

// BuiltinResources returns every built-in resource of the resource
// registry (package resources) that can be listed, watched and deleted:
// all of them, namespaced and cluster-scoped. Those whose typed informers
// other controllers hold (sharedTyped: pods, replication controllers,
// services, endpoints, service accounts, config maps, deployments, replica
// sets, jobs, cron jobs, stateful sets, daemon sets, controller revisions, persistent
// volume claims, nodes, cluster roles, validating admission policies,
// resource quotas, pod disruption budgets)
// subscribe through the informer of their Go type,
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

// Discoverer lists the top-level resources an API server serves, as its
// discovery documents describe them; *client.Client is one.
type Discoverer interface {
	ServerResources(ctx context.Context) ([]client.APIResource, error)
}

// skipped are served resources the collector leaves alone: nothing is
// owned by them or owns through them, and watching them all (events
// especially) would cost more than it could collect.
var skipped = map[schema.GroupResource]bool{
	{Resource: "events"}:                                        true,
	{Group: "events.k8s.io", Resource: "events"}:                true,
	{Resource: "namespaces"}:                                    true,
	{Group: "coordination.k8s.io", Resource: "leases"}:          true,
	{Group: "coordination.k8s.io", Resource: "leasecandidates"}: true,
}

// ServedResources returns the Options.Discover that asks d which
// resources the server serves, at each group's preferred version, and
// keeps those the collector can watch and act on (they can be listed,
// watched and deleted), custom resources included; events, namespaces and
// leases are left out. Built-in resources come as BuiltinResources gives
// them (sharing the typed informers of the other controllers), every
// other one with a metadata informer. Of a kind served under two
// resources the first is kept.
func ServedResources(d Discoverer) func(ctx context.Context) ([]Resource, error) {
	builtin := map[schema.GroupVersionResource]Resource{}
	for _, r := range BuiltinResources() {
		builtin[r.GVR] = r
	}
	return func(ctx context.Context) ([]Resource, error) {
		served, err := d.ServerResources(ctx)
		if err != nil {
			return nil, err
		}
		var out []Resource
		seen := map[schema.GroupVersionKind]bool{}
		for _, s := range served {
			if skipped[s.GVR.GroupResource()] ||
				!slices.Contains(s.Verbs, "list") || !slices.Contains(s.Verbs, "watch") || !slices.Contains(s.Verbs, "delete") {
				continue
			}
			gvk := s.GVR.GroupVersion().WithKind(s.Kind)
			if seen[gvk] {
				continue
			}
			seen[gvk] = true
			if r, ok := builtin[s.GVR]; ok {
				out = append(out, r)
				continue
			}
			out = append(out, Resource{GVR: s.GVR, GVK: gvk, Namespaced: s.Namespaced})
		}
		return out, nil
	}
}
