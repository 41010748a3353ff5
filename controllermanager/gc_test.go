package controllermanager_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/garbagecollector"
	"github.com/listwatch/listwatch/envtest"
)

// TestGarbageCollectorFollowsNewCRDs: the garbage collector, whose
// discovery re-syncs only every hour here, learns of a definition
// established after it started as soon as the server establishes it, so
// that the foreground deletion of one of its objects completes (its
// dependent first, then the owner) and the dependents of one deleted in
// the background are collected, well within the hour: without being told,
// the collector would not see the custom objects at all before its next
// resync.
func TestGarbageCollectorFollowsNewCRDs(t *testing.T) {
	env := envtest.Start(t, envtest.Options{})
	m := runManager(t, controllermanager.Config{
		Client:           &client.Config{REST: env.Config, QPS: -1},
		Controllers:      []string{controllermanager.GarbageCollector},
		GarbageCollector: garbagecollector.Options{ResyncPeriod: time.Hour},
	})
	poll := func(t *testing.T, what string, cond func() (bool, string)) time.Duration {
		t.Helper()
		start := time.Now()
		var last string
		for deadline := start.Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			var ok bool
			if ok, last = cond(); ok {
				return time.Since(start)
			}
		}
		t.Fatalf("timed out waiting for %s; last: %s", what, last)
		return 0
	}
	poll(t, "the controller-manager to be ready", func() (bool, string) { return m.Ready(), "not ready" })

	crds := client.For[*apiextensionsv1.CustomResourceDefinition](env.Client, "")
	cms := client.For[*corev1.ConfigMap](env.Client, "default")
	tests := []struct {
		group  string
		policy metav1.DeletionPropagation
	}{
		{"fg.example.com", metav1.DeletePropagationForeground},
		{"bg.example.com", metav1.DeletePropagationBackground},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			gvr := schema.GroupVersionResource{Group: tt.group, Version: "v1", Resource: "widgets"}
			crd := &apiextensionsv1.CustomResourceDefinition{
				ObjectMeta: metav1.ObjectMeta{Name: "widgets." + tt.group},
				Spec: apiextensionsv1.CustomResourceDefinitionSpec{
					Group: tt.group, Scope: apiextensionsv1.NamespaceScoped,
					Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
					Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
						Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
							Type: "object", XPreserveUnknownFields: ptr(true)}}}},
				},
			}
			if _, err := crds.Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			widgets := client.NewUnstructured(env.Client, gvr, "default")
			var owner *unstructured.Unstructured
			poll(t, "the definition to be served", func() (bool, string) {
				w := &unstructured.Unstructured{}
				w.SetAPIVersion(tt.group + "/v1")
				w.SetKind("Widget")
				w.SetName("owner")
				var err error
				if owner, err = widgets.Create(t.Context(), w, metav1.CreateOptions{}); err != nil {
					return false, err.Error()
				}
				return true, ""
			})
			yes := true
			dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent-of-" + tt.group, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: tt.group + "/v1", Kind: "Widget", Name: "owner", UID: owner.GetUID(), BlockOwnerDeletion: &yes}}}}
			if _, err := cms.Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			policy := tt.policy
			if err := widgets.Delete(t.Context(), "owner", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
				t.Fatal(err)
			}
			took := poll(t, "the owner and its dependent to go", func() (bool, string) {
				_, errOwner := widgets.Get(t.Context(), "owner", metav1.GetOptions{})
				_, errDep := cms.Get(t.Context(), dep.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(errOwner) && apierrors.IsNotFound(errDep), fmt.Sprintf("owner: %v; dependent: %v", errOwner, errDep)
			})
			t.Logf("%s deletion of a fresh definition's object done in %v", tt.policy, took.Round(time.Millisecond))
		})
	}
}

func ptr[T any](v T) *T { return &v }
