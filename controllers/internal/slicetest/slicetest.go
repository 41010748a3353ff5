// Package slicetest serves the EndpointSlice controllers' unit tests: a
// client-go clientset, which kube's reconcilers write through, whose
// EndpointSlice writes land in a cachetest.Source the tests' informers
// read, as the API server would store them.
package slicetest

import (
	"fmt"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/listwatch/listwatch/cache/cachetest"
)

// Writes counts the EndpointSlice writes made through a Clientset.
type Writes struct {
	mu    sync.Mutex
	verbs []string
	names int
}

// Verbs returns the writes' verbs ("create", "update", "delete"), in
// order.
func (w *Writes) Verbs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.verbs...)
}

// Len returns how many writes were made.
func (w *Writes) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.verbs)
}

// Clientset returns a clientset whose EndpointSlice creates, updates and
// deletes are applied to slices as the API server applies them: a name
// made from generateName, generation 1 on create and one more on each
// update, a resourceVersion per write (the source's), and a conflict for
// an update of a stale resourceVersion. Its other resources are client-go's
// object tracker's (events, which the tests do not read).
func Clientset(slices *cachetest.Source[*discoveryv1.EndpointSlice]) (*fake.Clientset, *Writes) {
	w := &Writes{}
	cs := fake.NewClientset()
	cs.PrependReactor("*", "endpointslices", func(action clienttesting.Action) (bool, runtime.Object, error) {
		w.mu.Lock()
		w.verbs = append(w.verbs, action.GetVerb())
		w.mu.Unlock()
		// By verb: an update action is a CreateAction too (it has
		// GetObject).
		switch action.GetVerb() {
		case "create":
			s := action.(clienttesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice).DeepCopy()
			if s.Name == "" {
				w.mu.Lock()
				w.names++
				s.Name = fmt.Sprintf("%s%05d", s.GenerateName, w.names)
				w.mu.Unlock()
			}
			s.Namespace = action.GetNamespace()
			s.Generation = 1
			out, err := slices.Create(s)
			return true, out, err
		case "update":
			s := action.(clienttesting.UpdateAction).GetObject().(*discoveryv1.EndpointSlice).DeepCopy()
			if cur, ok := slices.Get(s.Namespace, s.Name); ok {
				s.Generation = cur.Generation + 1
			}
			out, err := slices.Update(s)
			return true, out, err
		case "delete":
			_, err := slices.Delete(action.GetNamespace(), action.(clienttesting.DeleteAction).GetName())
			return true, nil, err
		}
		return false, nil, nil
	})
	return cs, w
}
