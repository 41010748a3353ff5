package replication

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/controller"
)

// controllerKind is the kind of the owner references the manager writes
// and recognises.
var controllerKind = corev1.SchemeGroupVersion.WithKind("ReplicationController")

func (m *Manager) addRC(rc *corev1.ReplicationController, _ bool) {
	m.enqueue(rc)
}

// updateRC queues the RC on every change: of spec (replicas, selector,
// template) to act on it, of status to check it against the pods.
func (m *Manager) updateRC(old, cur *corev1.ReplicationController) {
	if old.UID != cur.UID {
		// Deleted and recreated under the same name between two events:
		// what the old one expected is no concern of the new one.
		m.deleteRC(old, false)
	}
	m.enqueue(cur)
}

// deleteRC forgets the RC's expectations at once, so that a new RC of the
// same name starts clean, and queues it so that its sync sees it gone.
func (m *Manager) deleteRC(rc *corev1.ReplicationController, _ bool) {
	m.expectations.DeleteExpectations(rcKey(rc))
	m.enqueue(rc)
}

// addPod counts a pod created for an RC towards the RC's expected
// creations, and queues the RCs that might adopt an orphan.
func (m *Manager) addPod(pod *corev1.Pod, _ bool) {
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already being deleted (as after a
		// restart): it can only count as going, never as created.
		m.deletePod(pod, false)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		rc := m.resolveControllerRef(pod.Namespace, ref)
		if rc == nil {
			return
		}
		key := rcKey(rc)
		m.expectations.CreationObserved(key)
		m.Queue().Add(key)
		return
	}
	m.enqueueMatching(pod)
}

// updatePod queues the RCs a pod change concerns: its controller (old and
// new, if that changed), or, for an orphan whose labels changed, every RC
// that may now adopt it.
func (m *Manager) updatePod(old, cur *corev1.Pod) {
	if old.ResourceVersion == cur.ResourceVersion {
		// A periodic resync: nothing changed. RC resyncs cover what a
		// resync is for.
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
		if rc := m.resolveControllerRef(old.Namespace, oldRef); rc != nil {
			m.enqueue(rc)
		}
	}
	if curRef != nil {
		rc := m.resolveControllerRef(cur.Namespace, curRef)
		if rc == nil {
			return
		}
		m.enqueue(rc)
		if rc.Spec.MinReadySeconds > 0 && !controller.IsPodReady(old) && controller.IsPodReady(cur) {
			// The pod becomes available minReadySeconds from now, and no
			// event will say so.
			m.Queue().AddAfter(rcKey(rc), time.Duration(rc.Spec.MinReadySeconds)*time.Second)
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
func (m *Manager) deletePod(pod *corev1.Pod, finalStateUnknown bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		// An orphan's deletion changes no RC's count.
		return
	}
	rc := m.resolveControllerRef(pod.Namespace, ref)
	if rc == nil {
		return
	}
	key := rcKey(rc)
	if finalStateUnknown {
		m.log.Debug("pod deletion inferred from a relist", "pod", podKey(pod), "rc", key)
	}
	m.expectations.DeletionObserved(key, podKey(pod))
	m.Queue().Add(key)
}

// resolveControllerRef returns the cached RC that ref names, or nil when
// ref is not an RC's or names one that no longer exists (a new RC of the
// same name has another UID).
func (m *Manager) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *corev1.ReplicationController {
	if ref.Kind != controllerKind.Kind {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != controllerKind.Group {
		return nil
	}
	rc, err := m.rcLister.Namespace(namespace).Get(ref.Name)
	if err != nil || rc.UID != ref.UID {
		return nil
	}
	return rc
}

// enqueueMatching queues every RC of the pod's namespace whose selector
// matches the pod.
func (m *Manager) enqueueMatching(pod *corev1.Pod) {
	if len(pod.Labels) == 0 {
		return
	}
	rcs, err := m.rcLister.Namespace(pod.Namespace).List(labels.Everything())
	if err != nil {
		m.log.Error("listing RCs for an orphan pod", "pod", podKey(pod), "err", err)
		return
	}
	set := labels.Set(pod.Labels)
	for _, rc := range rcs {
		if selectorFor(rc).Matches(set) {
			m.enqueue(rc)
		}
	}
}

// selectorFor returns the RC's pod selector. An empty spec.selector means
// the template's labels, as the API server defaults it; with neither, the
// RC selects nothing rather than everything.
func selectorFor(rc *corev1.ReplicationController) labels.Selector {
	set := rc.Spec.Selector
	if len(set) == 0 && rc.Spec.Template != nil {
		set = rc.Spec.Template.Labels
	}
	if len(set) == 0 {
		return labels.Nothing()
	}
	sel, err := labels.ValidatedSelectorFromSet(set)
	if err != nil {
		// An invalid selector must not fall back to matching everything.
		return labels.Nothing()
	}
	return sel
}

func sameRef(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID
}
