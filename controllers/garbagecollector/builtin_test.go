package garbagecollector

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/resources"
)

// TestBuiltinResources serves each built-in resource of the registry with
// objects of its Go type, as the REST client does, and checks that the
// resource's subscription reads them: a Subscribe of the wrong type would
// fail every list and never sync. The resources other controllers inform
// on share those controllers' typed informers; the others have metadata
// informers.
func TestBuiltinResources(t *testing.T) {
	registry := resources.Builtin.All()
	// The informers other controllers hold, by resource.
	shared := map[schema.GroupVersionResource]func(*informers.SharedInformerFactory, schema.GroupVersionResource) func() bool{
		corev1.SchemeGroupVersion.WithResource("pods"):                   synced[*corev1.Pod],
		corev1.SchemeGroupVersion.WithResource("replicationcontrollers"): synced[*corev1.ReplicationController],
		corev1.SchemeGroupVersion.WithResource("services"):               synced[*corev1.Service],
		//lint:ignore SA1019 core/v1 Endpoints are shared with the endpoints controller.
		corev1.SchemeGroupVersion.WithResource("endpoints"):                                    synced[*corev1.Endpoints],
		appsv1.SchemeGroupVersion.WithResource("deployments"):                                  synced[*appsv1.Deployment],
		appsv1.SchemeGroupVersion.WithResource("replicasets"):                                  synced[*appsv1.ReplicaSet],
		corev1.SchemeGroupVersion.WithResource("serviceaccounts"):                              synced[*corev1.ServiceAccount],
		corev1.SchemeGroupVersion.WithResource("configmaps"):                                   synced[*corev1.ConfigMap],
		rbacv1.SchemeGroupVersion.WithResource("clusterroles"):                                 synced[*rbacv1.ClusterRole],
		batchv1.SchemeGroupVersion.WithResource("jobs"):                                        synced[*batchv1.Job],
		batchv1.SchemeGroupVersion.WithResource("cronjobs"):                                    synced[*batchv1.CronJob],
		corev1.SchemeGroupVersion.WithResource("nodes"):                                        synced[*corev1.Node],
		admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies"): synced[*admissionregistrationv1.ValidatingAdmissionPolicy],
		corev1.SchemeGroupVersion.WithResource("resourcequotas"):                               synced[*corev1.ResourceQuota],
		appsv1.SchemeGroupVersion.WithResource("statefulsets"):                                 synced[*appsv1.StatefulSet],
		appsv1.SchemeGroupVersion.WithResource("daemonsets"):                                   synced[*appsv1.DaemonSet],
		appsv1.SchemeGroupVersion.WithResource("controllerrevisions"):                          synced[*appsv1.ControllerRevision],
		corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"):                       synced[*corev1.PersistentVolumeClaim],
		corev1.SchemeGroupVersion.WithResource("persistentvolumes"):                            synced[*corev1.PersistentVolume],
		discoveryv1.SchemeGroupVersion.WithResource("endpointslices"):                          synced[*discoveryv1.EndpointSlice],
		policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"):                       synced[*policyv1.PodDisruptionBudget],
	}
	synctest.Test(t, func(t *testing.T) {
		sources := map[schema.GroupVersionResource]cache.ListerWatcher[cache.Object]{}
		factory := informers.NewSharedInformerFactory(informers.SourceFunc(
			func(gvr schema.GroupVersionResource, _ string, _ func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
				return sources[gvr]
			}), informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
		defer factory.Shutdown()

		var mu sync.Mutex
		added := map[schema.GroupVersionResource]int{}
		seen := map[schema.GroupVersionKind]bool{}
		builtin := BuiltinResources()
		if len(builtin) != len(registry) {
			t.Errorf("%d resources, want the registry's %d", len(builtin), len(registry))
		}
		for i, r := range builtin {
			reg, ok := resources.Lookup(r.GVR)
			if !ok || reg.GVK != r.GVK || reg.Namespaced != r.Namespaced || r.Subscribe == nil || seen[r.GVK] {
				t.Errorf("resource %+v, registry %+v", r, reg)
				continue
			}
			if i < len(registry) && registry[i] != reg {
				t.Errorf("resource %d is %s, registry's %s", i, r.GVR, registry[i].GVR())
			}
			seen[r.GVK] = true
			o, ok := reg.New().(cache.Object)
			if !ok {
				t.Fatalf("%s: %T has no object metadata", r.GVK, reg.New())
			}
			if r.Namespaced {
				o.SetNamespace(ns)
			}
			o.SetName("x")
			o.SetUID(types.UID(r.GVR.Resource))
			src := cachetest.New[cache.Object]()
			if _, err := src.Create(o); err != nil {
				t.Fatal(err)
			}
			sources[r.GVR] = cache.Erase[cache.Object](src)
			gvr := r.GVR
			_, release, err := r.Subscribe(factory, gvr, cache.ResourceEventHandlerFuncs[cache.Object]{
				AddFunc: func(obj cache.Object, _ bool) {
					mu.Lock()
					defer mu.Unlock()
					if obj.GetUID() == types.UID(gvr.Resource) {
						added[gvr]++
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer release()
		}
		if want := []string{"/v1, Kind=ConfigMap", "/v1, Kind=Secret", "batch/v1, Kind=Job", "/v1, Kind=Node",
			"rbac.authorization.k8s.io/v1, Kind=ClusterRole"}; !allSeen(seen, want) {
			t.Errorf("kinds %v, want at least %v", seen, want)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		factory.Start(ctx)
		for gvr, ok := range factory.WaitForCacheSync(ctx) {
			if !ok {
				t.Errorf("%s never synced: its Subscribe reads the wrong type", gvr)
			}
		}
		synctest.Wait()
		for _, r := range builtin {
			// A hold on the informer the subscription uses is one on an
			// informer already running and synced; a hold on any other
			// would be a new informer, not started.
			hasSynced, kind := shared[r.GVR], "typed"
			if hasSynced == nil {
				hasSynced, kind = synced[*metav1.PartialObjectMetadata], "metadata"
			}
			if !hasSynced(factory, r.GVR)() {
				t.Errorf("%s: not subscribed through its %s informer", r.GVR, kind)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range builtin {
			if added[r.GVR] != 1 {
				t.Errorf("%s: %d adds, want 1", r.GVR, added[r.GVR])
			}
		}
	})
}

// synced returns the HasSynced of the factory's informer of T, which the
// collector acquired.
func synced[T cache.Object](f *informers.SharedInformerFactory, gvr schema.GroupVersionResource) func() bool {
	inf, release := informers.Acquire[T](f, gvr)
	defer release()
	return inf.HasSynced
}

func allSeen(seen map[schema.GroupVersionKind]bool, want []string) bool {
	got := map[string]bool{}
	for gvk := range seen {
		got[gvk.String()] = true
	}
	for _, w := range want {
		if !got[w] {
			return false
		}
	}
	return true
}

// TestGarbageCollectorOnBuiltinResources collects among resources the
// collector did not watch before it covered the whole registry, each
// subscribed through a metadata informer: a ConfigMap owned by a Secret, a
// namespaced RoleBinding owned by a cluster-scoped ClusterRole, and a Job
// deleted in the foreground, which waits for the Secret that blocks it.
func TestGarbageCollectorOnBuiltinResources(t *testing.T) {
	byResource := map[string]Resource{}
	for _, r := range BuiltinResources() {
		byResource[r.GVR.Resource] = r
	}
	secrets, configmaps, jobs := byResource["secrets"], byResource["configmaps"], byResource["jobs"]
	clusterroles, rolebindings := byResource["clusterroles"], byResource["rolebindings"]
	// The fake API serves maps, which only metadata informers read: config
	// maps, jobs and cluster roles share typed informers in
	// BuiltinResources (TestBuiltinResources checks each subscription).
	configmaps.Subscribe, jobs.Subscribe, clusterroles.Subscribe = Metadata(), Metadata(), Metadata()
	all := []Resource{secrets, configmaps, jobs, clusterroles, rolebindings}
	// mk creates r/name with owners, in the namespace of the tests unless r
	// is cluster-scoped.
	mk := func(e *env, r Resource, name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
		u := newObj(r, name, owners...)
		if !r.Namespaced {
			u.SetNamespace("")
		}
		return e.api.create(e.t, r, u)
	}
	for _, tc := range []struct {
		name   string
		setup  func(e *env)
		owner  Resource
		policy metav1.DeletionPropagation
		want   []string // the objects left, "resource/name", sorted
	}{{
		name: "configmap owned by a secret",
		setup: func(e *env) {
			s := mk(e, secrets, "owner")
			mk(e, configmaps, "cm", ownerRef(s, false))
			mk(e, configmaps, "unrelated")
		},
		owner: secrets, policy: metav1.DeletePropagationBackground,
		want: []string{"configmaps/unrelated"},
	}, {
		name: "rolebinding owned by a cluster-scoped clusterrole",
		setup: func(e *env) {
			cr := mk(e, clusterroles, "owner")
			mk(e, rolebindings, "rb", ownerRef(cr, true))
		},
		owner: clusterroles, policy: metav1.DeletePropagationBackground,
	}, {
		name: "job in the foreground waits for its blocking secret",
		setup: func(e *env) {
			j := mk(e, jobs, "owner")
			mk(e, secrets, "token", ownerRef(j, true))
			mk(e, configmaps, "kept")
		},
		owner: jobs, policy: metav1.DeletePropagationForeground,
		want: []string{"configmaps/kept"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, all)
				tc.setup(e)
				e.start()
				if !tc.owner.Namespaced {
					policy := tc.policy
					if err := e.api.Delete(context.Background(), tc.owner.GVR, "", "owner", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
						t.Fatal(err)
					}
				} else {
					e.delete(tc.owner, "owner", tc.policy)
				}
				e.settle()
				var left []string
				for _, o := range e.api.all() {
					left = append(left, strings.ToLower(o.GetKind())+"s/"+o.GetName())
				}
				slices.Sort(left)
				if !slices.Equal(left, tc.want) {
					t.Errorf("left %v, want %v", left, tc.want)
				}
				if n := len(e.api.informers); n != len(all) {
					t.Errorf("informers of %d resources, want %d", n, len(all))
				}
			})
		})
	}
}
