package replicaset

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/controller"
)

func (m *Manager[T]) addObject(obj T, _ bool) {
	m.enqueue(obj)
}

// updateObject queues the object on every change: of spec (replicas,
// selector, template) to act on it, of status to check it against the
// pods.
func (m *Manager[T]) updateObject(old, cur T) {
	if old.GetUID() != cur.GetUID() {
		// Deleted and recreated under the same name between two events:
		// what the old one expected is no concern of the new one.
		m.deleteObject(old, false)
	}
	m.enqueue(cur)
}

// deleteObject forgets the object's expectations at once, so that a new
// one of the same name starts clean, and queues it so that its sync sees
// it gone.
func (m *Manager[T]) deleteObject(obj T, _ bool) {
	m.expectations.DeleteExpectations(objectKey(obj))
	m.enqueue(obj)
}

// addPod counts a pod created for an object towards its expected
// creations, and queues the objects that might adopt an orphan.
func (m *Manager[T]) addPod(pod *corev1.Pod, _ bool) {
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already being deleted (as after a
		// restart): it can only count as going, never as created.
		m.deletePod(pod, false)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		// Before the expectations are settled: see podViews.
		m.touch(pod, ref)
		obj, ok := m.resolveControllerRef(pod.Namespace, ref)
		if !ok {
			return
		}
		key := objectKey(obj)
		m.expectations.CreationObserved(key)
		m.Queue().Add(key)
		return
	}
	m.enqueueMatching(pod)
}

// updatePod queues the objects a pod change concerns: its controller (old
// and new, if that changed), or, for an orphan whose labels changed, every
// object that may now adopt it.
func (m *Manager[T]) updatePod(old, cur *corev1.Pod) {
	if old.ResourceVersion == cur.ResourceVersion {
		// A periodic resync: nothing changed. The owners' resyncs cover
		// what a resync is for.
		return
	}
	oldRef, curRef := metav1.GetControllerOfNoCopy(old), metav1.GetControllerOfNoCopy(cur)
	refChanged := !sameRef(oldRef, curRef)
	labelsChanged := !labels.Equals(old.Labels, cur.Labels)
	if cur.DeletionTimestamp != nil {
		// A graceful deletion has begun: the pod stops counting now, so
		// its deletion is observed now rather than when it finally goes,
		// which may be much later.
		m.deletePod(cur, false)
		if refChanged {
			m.deletePod(old, false)
		}
		return
	}
	if refChanged && oldRef != nil {
		m.touch(old, oldRef)
		if obj, ok := m.resolveControllerRef(old.Namespace, oldRef); ok {
			m.enqueue(obj)
		}
	}
	if curRef != nil {
		m.touch(cur, curRef)
		obj, ok := m.resolveControllerRef(cur.Namespace, curRef)
		if !ok {
			return
		}
		m.enqueue(obj)
		if mrs := m.kind.MinReadySeconds(obj); mrs > 0 && !controller.IsPodReady(old) && controller.IsPodReady(cur) {
			// The pod becomes available minReadySeconds from now, and no
			// event will say so.
			m.Queue().AddAfter(objectKey(obj), time.Duration(mrs)*time.Second)
		}
		return
	}
	if labelsChanged || refChanged {
		m.enqueueMatching(cur)
	}
}

// deletePod counts a pod's deletion towards its controller's expected
// deletions and queues the controller. A deletion only inferred from a
// relist (finalStateUnknown) counts the same: the pod is gone either way.
func (m *Manager[T]) deletePod(pod *corev1.Pod, finalStateUnknown bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		// An orphan's deletion changes no owner's count.
		return
	}
	m.touch(pod, ref)
	obj, ok := m.resolveControllerRef(pod.Namespace, ref)
	if !ok {
		return
	}
	key := objectKey(obj)
	if finalStateUnknown {
		m.log.Debug("pod deletion inferred from a relist", "pod", podKey(pod), "key", key)
	}
	m.expectations.DeletionObserved(key, podKey(pod))
	m.Queue().Add(key)
}

// resolveControllerRef returns the cached object that ref names, or false
// when ref is not of the manager's kind or names one that no longer
// exists (a new one of the same name has another UID).
func (m *Manager[T]) resolveControllerRef(namespace string, ref *metav1.OwnerReference) (T, bool) {
	var zero T
	gvk := m.kind.GroupVersionKind()
	if ref.Kind != gvk.Kind {
		return zero, false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != gvk.Group {
		return zero, false
	}
	obj, err := m.lister.Namespace(namespace).Get(ref.Name)
	if err != nil || obj.GetUID() != ref.UID {
		return zero, false
	}
	return obj, true
}

// enqueueMatching queues every object of the pod's namespace whose
// selector matches the pod.
func (m *Manager[T]) enqueueMatching(pod *corev1.Pod) {
	if len(pod.Labels) == 0 {
		return
	}
	objs, err := m.lister.Namespace(pod.Namespace).List(labels.Everything())
	if err != nil {
		m.log.Error("listing owners for an orphan pod", "pod", podKey(pod), "err", err)
		return
	}
	set := labels.Set(pod.Labels)
	for _, obj := range objs {
		if m.kind.Selector(obj).Matches(set) {
			m.enqueue(obj)
		}
	}
}

func sameRef(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID
}
