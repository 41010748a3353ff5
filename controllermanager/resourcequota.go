package controllermanager

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/quota/v1/install"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllers/resourcequota"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/resources"
)

// newResourceQuota makes the resource quota controller, counting every
// resource that discovery names as kube's quota monitor would (namespaced;
// created, listed, watched and deleted; not among kube's ignored ones).
// Pods, services and claims are counted whole, as kube's evaluators need;
// the resources other controllers here hold typed informers of through
// those; every other one through its metadata informer, which the garbage
// collector shares.
func newResourceQuota(ctx context.Context, d deps) (runner, error) {
	served, err := d.m.client.ServerResources(ctx)
	if err != nil {
		return nil, fmt.Errorf("resourcequota: discovery: %w", err)
	}
	ignored := install.DefaultIgnoredResources()
	var counted []resourcequota.Counted
	seen := map[schema.GroupResource]bool{}
	for _, s := range served {
		gr := s.GVR.GroupResource()
		if _, skip := ignored[gr]; skip || seen[gr] || !s.Namespaced || !quotable(s) {
			continue
		}
		seen[gr] = true
		if typed, ok := countedTyped[s.GVR]; ok {
			counted = append(counted, typed(d.factory))
			continue
		}
		counted = append(counted, resourcequota.CountedBy(s.GVR, informers.MetadataFor(d.factory, s.GVR)))
	}
	opts := d.m.cfg.ResourceQuota
	opts.Controller = d.options("resourcequota-controller", opts.Controller)
	return resourcequota.New(informers.For[*corev1.ResourceQuota](d.factory), counted, d.clientOf(ResourceQuota), opts)
}

// quotable reports whether quotas can count s's objects: kube's quota
// monitor counts the resources that can be created, listed, watched and
// deleted.
func quotable(s client.APIResource) bool {
	for _, v := range []string{"create", "list", "watch", "delete"} {
		if !slices.Contains(s.Verbs, v) {
			return false
		}
	}
	return true
}

// countedTyped are the resources counted through a typed informer: those
// kube's evaluators read whole (pods, services, claims) and those whose
// typed informers the other controllers hold anyway — the garbage
// collector's sharedTyped, so that no resource is watched twice
// (TestOneWatchPerResource).
var countedTyped = map[schema.GroupVersionResource]func(*informers.SharedInformerFactory) resourcequota.Counted{}

func init() {
	for _, add := range []func(){
		countTyped[*corev1.Pod], countTyped[*corev1.Service], countTyped[*corev1.PersistentVolumeClaim],
		countTyped[*corev1.ReplicationController], countTyped[*corev1.ConfigMap], countTyped[*corev1.ServiceAccount],
		//lint:ignore SA1019 core/v1 Endpoints are still served, and the endpoints controller holds their informer.
		countTyped[*corev1.Endpoints],
		countTyped[*corev1.ResourceQuota],
		countTyped[*appsv1.Deployment], countTyped[*appsv1.ReplicaSet],
		countTyped[*appsv1.StatefulSet], countTyped[*appsv1.ControllerRevision], countTyped[*appsv1.DaemonSet],
		countTyped[*batchv1.Job], countTyped[*batchv1.CronJob],
		countTyped[*discoveryv1.EndpointSlice],
		countTyped[*policyv1.PodDisruptionBudget],
	} {
		add()
	}
}

func countTyped[T cache.Object]() {
	r, _ := resources.For[T]()
	gvr := r.GVR()
	countedTyped[gvr] = func(f *informers.SharedInformerFactory) resourcequota.Counted {
		return resourcequota.CountedBy[T](gvr, informers.For[T](f))
	}
}
