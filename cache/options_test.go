package cache_test

import (
	"slices"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
)

// byNode and byLabel index pods by node and by their "app" label.
func byNode(p *corev1.Pod) ([]string, error)  { return []string{p.Spec.NodeName}, nil }
func byLabel(p *corev1.Pod) ([]string, error) { return []string{p.Labels["app"]}, nil }

// TestTypedOptions: the typed options reach the informers, T inferred from
// them; several WithIndexers add up, a later index of a name replacing an
// earlier one.
func TestTypedOptions(t *testing.T) {
	stale := func(*corev1.Pod) ([]string, error) { return []string{"stale"}, nil }
	opts := []cache.Option[*corev1.Pod]{
		cache.WithIndexers(cache.Indexers[*corev1.Pod]{"node": stale}),
		cache.WithIndexers(cache.Indexers[*corev1.Pod]{"node": byNode, "app": byLabel}),
		cache.WithKeyFunc(func(p *corev1.Pod) (string, error) { return "key-" + p.Name, nil }),
		cache.WithTransform(func(p *corev1.Pod) (*corev1.Pod, error) {
			p = p.DeepCopy()
			p.Annotations = map[string]string{"seen": "yes"}
			return p, nil
		}),
	}
	tests := []struct {
		name  string
		start func(t *testing.T, src *cachetest.Source[*corev1.Pod]) cache.Indexer[*corev1.Pod]
	}{
		{"NewIndexerInformer", func(t *testing.T, src *cachetest.Source[*corev1.Pod]) cache.Indexer[*corev1.Pod] {
			idx, c := cache.NewIndexerInformer(src, nil, cache.InformerOptions{Reflector: cache.ReflectorOptions{Logger: quiet}}, opts...)
			runInformer(t, c)
			return idx
		}},
		{"NewSharedIndexInformer", func(t *testing.T, src *cachetest.Source[*corev1.Pod]) cache.Indexer[*corev1.Pod] {
			inf := cache.NewSharedIndexInformer(src, cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{Logger: quiet}}, opts...)
			runShared(t, inf)
			return inf.GetIndexer()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := cachetest.New[*corev1.Pod]()
				p := newPod("ns", "a")
				p.Spec.NodeName, p.Labels = "node-1", map[string]string{"app": "web"}
				src.Create(p)
				idx := tt.start(t, src)
				got, ok, err := idx.GetByKey("key-a")
				if err != nil || !ok || got.Annotations["seen"] != "yes" {
					t.Fatalf("GetByKey(key-a) = %v, %v, %v; want the transformed pod under the key function's key", got, ok, err)
				}
				for index, value := range map[string]string{"node": "node-1", "app": "web", cache.NamespaceIndex: "ns"} {
					keys, err := idx.IndexKeys(index, value)
					if err != nil || !slices.Equal(keys, []string{"key-a"}) {
						t.Errorf("IndexKeys(%s, %s) = %v, %v; want [key-a]", index, value, keys, err)
					}
				}
				if keys, _ := idx.IndexKeys("node", "stale"); len(keys) != 0 {
					t.Errorf("the replaced node index still answers: %v", keys)
				}
			})
		})
	}
}

// TestNewInformerIgnoresIndexers: NewInformer's cache is a Store, with no
// index: WithIndexers given to it builds none.
func TestNewInformerIgnoresIndexers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := cachetest.New[*corev1.Pod]()
		src.Create(newPod("ns", "a"))
		store, c := cache.NewInformer(src, nil, cache.InformerOptions{}, cache.WithIndexers(cache.Indexers[*corev1.Pod]{"node": byNode}))
		runInformer(t, c)
		if _, ok, _ := store.GetByKey("ns/a"); !ok {
			t.Error("the pod is not cached")
		}
		// The Store's implementation is an Indexer underneath; it must
		// not have built the index.
		if idx, ok := store.(cache.Indexer[*corev1.Pod]); ok {
			if keys, err := idx.IndexKeys("node", ""); err == nil {
				t.Errorf("IndexKeys(node) = %v, nil; want an error for an index that does not exist", keys)
			}
		}
	})
}
