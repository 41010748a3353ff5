package cache

import (
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// benchPod is a realistic-ish pod: namespace, generated name, resource
// version and a few labels, as a ReplicaSet's pod would have.
func benchPod(i, namespaces int, rv string, app string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       "ns-" + strconv.Itoa(i%namespaces),
			Name:            fmt.Sprintf("web-%08x-%05d", i*2654435761, i),
			ResourceVersion: rv,
			UID:             "uid",
			Labels: map[string]string{
				"app":                        app,
				"pod-template-hash":          "7d4b9c8f5",
				"app.kubernetes.io/instance": "release-" + strconv.Itoa(i%7),
				"tier":                       []string{"frontend", "backend"}[i%2],
			},
		},
		Spec: corev1.PodSpec{NodeName: "node-" + strconv.Itoa(i%50)},
	}
}

func benchPodSet(n, namespaces int, rv, app string) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = benchPod(i, namespaces, rv, app)
	}
	return out
}

// benchAppIndex files a pod under its app label.
func benchAppIndex(p *corev1.Pod) ([]string, error) {
	return []string{p.Labels["app"]}, nil
}

// BenchmarkIndexerAdd measures inserting new keys into an indexer with the
// namespace index and one label index.
func BenchmarkIndexerAdd(b *testing.B) {
	const n = 10000
	pods := benchPodSet(n, 100, "1", "web")
	newIdx := func() Indexer[*corev1.Pod] {
		return NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"app": benchAppIndex})
	}
	idx := newIdx()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == n {
			b.StopTimer()
			idx, i = newIdx(), 0
			b.StartTimer()
		}
		if err := idx.Add(pods[i]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkIndexerUpdate measures replacing a stored object by a newer
// version: with only the namespace index (same namespace, nothing moves)
// and with a label index whose value changes on every update.
func BenchmarkIndexerUpdate(b *testing.B) {
	const n = 10000
	for _, bc := range []struct {
		name     string
		indexers Indexers[*corev1.Pod]
		appB     string // the app label of the second version
	}{
		{"SameNamespace", nil, "web"},
		{"LabelIndexUnchanged", Indexers[*corev1.Pod]{"app": benchAppIndex}, "web"},
		{"LabelIndexChanging", Indexers[*corev1.Pod]{"app": benchAppIndex}, "api"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			v1 := benchPodSet(n, 100, "1", "web")
			v2 := benchPodSet(n, 100, "2", bc.appB)
			idx := NewIndexer[*corev1.Pod](nil, bc.indexers)
			for _, p := range v1 {
				if err := idx.Add(p); err != nil {
					b.Fatal(err)
				}
			}
			versions := [2][]*corev1.Pod{v2, v1}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := idx.Update(versions[(i/n)%2][i%n]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkIndexerByIndex measures a lookup returning the ~100 pods of one
// namespace (of 10000 in 100 namespaces), and ~5000 by a label.
func BenchmarkIndexerByIndex(b *testing.B) {
	idx := NewIndexer[*corev1.Pod](nil, Indexers[*corev1.Pod]{"tier": func(p *corev1.Pod) ([]string, error) {
		return []string{p.Labels["tier"]}, nil
	}})
	for _, p := range benchPodSet(10000, 100, "1", "web") {
		if err := idx.Add(p); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct{ name, index, value string }{
		{"Namespace100", NamespaceIndex, "ns-42"},
		{"Label5000", "tier", "frontend"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				objs, err := idx.ByIndex(bc.index, bc.value)
				if err != nil || len(objs) == 0 {
					b.Fatalf("ByIndex = %d, %v", len(objs), err)
				}
			}
		})
	}
}

// BenchmarkDeltaFIFOAddPop measures the throughput of one Add followed by
// one Pop into a process function that does nothing.
func BenchmarkDeltaFIFOAddPop(b *testing.B) {
	pods := benchPodSet(1000, 10, "1", "web")
	f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{})
	noop := func(string, Deltas[*corev1.Pod], bool) error { return nil }
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := f.Add(pods[i%len(pods)]); err != nil {
			b.Fatal(err)
		}
		if err := f.Pop(noop); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkDeltaFIFOReplace10k measures a relist of 10000 pods into an empty
// queue, and into one whose cache holds the same 10000 keys plus 1000 that
// the list no longer has (1000 tombstones).
func BenchmarkDeltaFIFOReplace10k(b *testing.B) {
	const n = 10000
	pods := benchPodSet(n+1000, 100, "1", "web")
	list := pods[:n]
	known := NewIndexer[*corev1.Pod](nil, nil)
	for _, p := range pods {
		if err := known.Add(p); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name  string
		known KeyListerGetter[*corev1.Pod]
	}{
		{"Empty", nil},
		{"KnownObjects", known},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				f := NewDeltaFIFO(DeltaFIFOOptions[*corev1.Pod]{KnownObjects: bc.known})
				b.StartTimer()
				if err := f.Replace(list, "1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
