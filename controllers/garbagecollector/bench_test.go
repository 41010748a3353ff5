package garbagecollector

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkGraph measures the graph's share of an informer event: one op
// adds an RC and its 10 pods and removes them again (22 events), with
// every resulting enqueue.
func BenchmarkGraph(b *testing.B) {
	var enqueued int
	count := func(types.UID) { enqueued++ }
	res := map[string]*Resource{"ReplicationController": &rcs, "Pod": &pods}
	locate := func(ref metav1.OwnerReference, depNS string) (objectID, bool) {
		return objectID{res: res[ref.Kind], namespace: depNS, name: ref.Name, uid: ref.UID}, true
	}
	g := newGraph(locate, count, count, 1000)
	rc := newObj(rcs, "rc")
	rc.SetUID("rc")
	podObjs := make([]metav1.Object, 10)
	for j := range podObjs {
		p := newObj(pods, fmt.Sprint("p", j), ownerRef(rc, true))
		p.SetUID(types.UID(fmt.Sprint("p", j)))
		podObjs[j] = p
	}
	b.ReportAllocs()
	for b.Loop() {
		g.upsert(&rcs, rc)
		for _, p := range podObjs {
			g.upsert(&pods, p)
		}
		g.remove(rc)
		for _, p := range podObjs {
			g.remove(p)
		}
	}
	if len(g.nodes) != 0 {
		b.Fatalf("%d nodes left", len(g.nodes))
	}
}
