package resources

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Every built-in resource names a Go type that the scheme knows under the
// resource's kind, with a list kind beside it, and is found by its type,
// its kind and its GVR.
func TestBuiltinTable(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	all := Builtin.All()
	if len(all) != len(builtins) {
		t.Fatalf("All() = %d resources, the table has %d", len(all), len(builtins))
	}
	for _, r := range all {
		t.Run(r.GVR().String(), func(t *testing.T) {
			if r.Plural != strings.ToLower(r.Plural) || r.Singular == "" {
				t.Errorf("names %q/%q: plural must be lower case and singular set", r.Plural, r.Singular)
			}
			obj := r.New()
			if obj == nil {
				t.Fatal("no Go type")
			}
			gvks, _, err := s.ObjectKinds(obj)
			if err != nil || len(gvks) == 0 || gvks[0] != r.GVK {
				t.Errorf("scheme kinds of %T = %v, %v; want %v", obj, gvks, err, r.GVK)
			}
			if !s.Recognizes(r.GVK.GroupVersion().WithKind(r.GVK.Kind + "List")) {
				t.Errorf("no %sList in the scheme", r.GVK.Kind)
			}
			if got, ok := Builtin.ForType(reflect.TypeOf(obj)); !ok || got != r {
				t.Errorf("ForType(%T) = %v, %v", obj, got, ok)
			}
			if got, ok := Builtin.ForKind(r.GVK); !ok || got != r {
				t.Errorf("ForKind(%v) = %v, %v", r.GVK, got, ok)
			}
			if got, ok := Lookup(r.GVR()); !ok || got != r {
				t.Errorf("Lookup(%v) = %v, %v", r.GVR(), got, ok)
			}
			if IsClusterScoped(r.GVR()) == r.Namespaced {
				t.Errorf("IsClusterScoped = %v, Namespaced = %v", IsClusterScoped(r.GVR()), r.Namespaced)
			}
		})
	}
}

func TestFor(t *testing.T) {
	tests := []struct {
		name string
		got  func() (*Resource, bool)
		want schema.GroupVersionResource
		ok   bool
	}{
		{"pod", For[*corev1.Pod], corev1.SchemeGroupVersion.WithResource("pods"), true},
		{"configmap", For[*corev1.ConfigMap], corev1.SchemeGroupVersion.WithResource("configmaps"), true},
		{"replicaset", For[*appsv1.ReplicaSet], appsv1.SchemeGroupVersion.WithResource("replicasets"), true},
		{"clusterrole", For[*rbacv1.ClusterRole], rbacv1.SchemeGroupVersion.WithResource("clusterroles"), true},
		{"not a resource", For[*corev1.PodList], schema.GroupVersionResource{}, false},
		{"unstructured", For[*unstructured.Unstructured], schema.GroupVersionResource{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := tt.got()
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if ok && r.GVR() != tt.want {
				t.Errorf("GVR = %v, want %v", r.GVR(), tt.want)
			}
		})
	}
}

// A registry of its own takes custom resources at run time, refuses a
// resource or kind declared twice, and forgets a removed one.
func TestRegistryAddRemove(t *testing.T) {
	g := NewRegistry()
	foo := &Resource{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Foo"}, Plural: "foos", Singular: "foo", Namespaced: true, Custom: true}
	tests := []struct {
		name string
		r    *Resource
		ok   bool
	}{
		{"new custom resource", foo, true},
		{"same resource again", &Resource{GVK: foo.GVK, Plural: "foos"}, false},
		{"same kind, other plural", &Resource{GVK: foo.GVK, Plural: "foos2"}, false},
		{"a built-in again", &Resource{GVK: corev1.SchemeGroupVersion.WithKind("Pod"), Plural: "pods"}, false},
		{"no plural", &Resource{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Bar"}}, false},
	}
	for _, tt := range tests {
		if err := g.Add(tt.r); (err == nil) != tt.ok {
			t.Errorf("%s: Add = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	if r, ok := g.Lookup(foo.GVR()); !ok || r != foo {
		t.Fatalf("Lookup(foos) = %v, %v", r, ok)
	}
	if _, ok := Builtin.Lookup(foo.GVR()); ok {
		t.Fatal("a registry's custom resource leaked into Builtin")
	}
	if !g.Remove(foo.GVR()) || g.Remove(foo.GVR()) {
		t.Fatal("Remove: want true then false")
	}
	if _, ok := g.ForKind(foo.GVK); ok {
		t.Fatal("removed kind still found")
	}
	var zero Registry
	if err := zero.Add(foo); err != nil {
		t.Fatalf("zero Registry: %v", err)
	}
	if len(zero.All()) != 1 {
		t.Fatalf("zero Registry holds %d", len(zero.All()))
	}
}
