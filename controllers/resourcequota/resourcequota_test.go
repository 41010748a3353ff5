package resourcequota

import (
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/client"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func informer[T cache.Object]() cache.Informer[T] {
	return cache.NewSharedIndexInformer[T](cachetest.New[T](), cache.SharedInformerOptions{})
}

// TestNew checks what New accepts: kube's evaluators of pods, services
// and claims read their specs, so those must be counted whole.
func TestNew(t *testing.T) {
	c, err := client.New(&client.Config{REST: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	secrets := corev1.SchemeGroupVersion.WithResource("secrets")
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	tests := []struct {
		name    string
		counted []Counted
		ok      bool
	}{
		{"nothing counted", nil, true},
		{"pods whole, the rest as metadata", []Counted{
			CountedBy(pods, informer[*corev1.Pod]()),
			CountedBy(secrets, informer[*metav1.PartialObjectMetadata]()),
			CountedBy(widgets, informer[*metav1.PartialObjectMetadata]()),
		}, true},
		{"pods as metadata", []Counted{CountedBy(pods, informer[*metav1.PartialObjectMetadata]())}, false},
		// As a cluster with dynamic resource allocation serves them:
		// counted by number, not by kube's DRA evaluator, which needs an
		// informer factory of its own.
		{"resource claims", []Counted{CountedBy(schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}, informer[*metav1.PartialObjectMetadata]())}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := New(informer[*corev1.ResourceQuota](), tt.counted, c, Options{})
			if (err == nil) != tt.ok {
				t.Fatalf("New: %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				return
			}
			// Every counted resource has an evaluator: kube's own for
			// pods, a count of objects for the others.
			for _, r := range tt.counted {
				if rc.registry.Get(r.GVR.GroupResource()) == nil {
					t.Errorf("no evaluator of %s", r.GVR)
				}
			}
		})
	}
}
