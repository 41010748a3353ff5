package garbagecollector

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/informers"
)

// TestBuiltinResources serves each built-in resource with objects of the
// Go type its kind has in the API's scheme, as the REST client does, and
// checks that the resource's subscription reads them: a Subscribe of the
// wrong type would fail every list and never sync.
func TestBuiltinResources(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
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
		for _, r := range BuiltinResources() {
			if r.GVR.GroupVersion() != r.GVK.GroupVersion() || !r.Namespaced || r.Subscribe == nil || seen[r.GVK] {
				t.Errorf("resource %+v", r)
			}
			seen[r.GVK] = true
			obj, err := scheme.New(r.GVK)
			if err != nil {
				t.Fatalf("%s: %v", r.GVK, err)
			}
			o, ok := obj.(cache.Object)
			if !ok {
				t.Fatalf("%s: %T has no object metadata", r.GVK, obj)
			}
			o.SetNamespace(ns)
			o.SetName("x")
			o.SetUID(types.UID(r.GVR.Resource))
			src := cachetest.New[cache.Object]()
			if _, err := src.Create(o); err != nil {
				t.Fatal(err)
			}
			sources[r.GVR] = cache.Erase[cache.Object](src)
			gvr := r.GVR
			_, release, err := r.Subscribe(factory, gvr, cache.ResourceEventHandlerFuncs[cache.Object]{
				AddFunc: func(cache.Object, bool) {
					mu.Lock()
					defer mu.Unlock()
					added[gvr]++
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer release()
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
		mu.Lock()
		defer mu.Unlock()
		for _, r := range BuiltinResources() {
			if added[r.GVR] != 1 {
				t.Errorf("%s: %d adds, want 1", r.GVR, added[r.GVR])
			}
		}
	})
}
