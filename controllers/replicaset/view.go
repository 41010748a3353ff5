package replicaset

import (
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/controller"
)

// A podView is what a sync knows of the pods one object controls: for
// each, the facts its status and its claim are made of, and their counts.
// It is kept from one sync of the object to the next and brought up to
// date from the pods the events in between touched (podViews), so that a
// sync costs what changed rather than what the object owns. With 10,000
// pods a sync that walked them all (to match the selector, find the
// controller reference, read readiness) was a third of the
// controller-manager's CPU in bench's controlplane-deployment-10k, the
// object being synced on nearly every pod event.
//
// The facts depend on the object's selector, template labels and
// minReadySeconds (its shape); a view whose object changed any of them is
// rebuilt from the pod index. Availability also depends on the time: the
// ready pods not yet available when last looked at are kept apart
// (pending) and looked at again by each sync.
//
// A podView is used by one sync at a time; it is not safe for concurrent
// use.
type podView struct {
	uid         types.UID
	selector    labels.Selector
	selectorKey string // selector.String(): what tells a changed selector
	template    labels.Selector
	templateSet map[string]string // never modified: the cached object's
	minReady    int32

	pods   map[string]podFacts // by pod key
	counts podCounts
	// pending holds, by pod key, when each ready pod that was not yet
	// available at the last look becomes available.
	pending map[string]time.Time
}

// podFacts is what a sync needs of one controlled pod.
type podFacts struct {
	pod *corev1.Pod
	// selected: the object's selector matches the pod's labels.
	selected bool
	// active: neither finished nor being deleted (controller.IsPodActive).
	active bool
	// terminating: being deleted and not finished.
	terminating bool
	// fullyLabeled: the pod has every label of the object's template.
	fullyLabeled bool
	// ready: the Ready condition is True, since readySince.
	ready      bool
	readySince metav1.Time
}

// podCounts are the counts a sync takes from its pods. Only selected
// pods count in the first five; available is left to tally, which knows
// the time.
type podCounts struct {
	// replicas is the number of active selected pods: status.replicas,
	// and what spec.replicas is made up to.
	replicas     int32
	fullyLabeled int32
	ready        int32
	available    int32
	// terminating is the selected pods being deleted and not finished
	// (a ReplicaSet's status.terminatingReplicas).
	terminating int32
	// unselected is the active pods the selector no longer matches: the
	// claim releases them.
	unselected int32
}

// newPodView returns an empty view for obj of kind.
func newPodView[T cache.Object](kind Kind[T], obj T) *podView {
	v := &podView{
		uid:      obj.GetUID(),
		selector: kind.Selector(obj),
		template: labels.Everything(),
		minReady: kind.MinReadySeconds(obj),
		pods:     map[string]podFacts{},
		pending:  map[string]time.Time{},
	}
	v.selectorKey = v.selector.String()
	if t := kind.Template(obj); t != nil {
		v.templateSet = t.Labels
		v.template = labels.SelectorFromValidatedSet(t.Labels)
	}
	return v
}

// fits tells whether v's facts still hold for obj: same UID, selector,
// template labels and minReadySeconds.
func fits[T cache.Object](v *podView, kind Kind[T], obj T) bool {
	if v.uid != obj.GetUID() || v.minReady != kind.MinReadySeconds(obj) {
		return false
	}
	var tmpl map[string]string
	if t := kind.Template(obj); t != nil {
		tmpl = t.Labels
	}
	return maps.Equal(v.templateSet, tmpl) && v.selectorKey == kind.Selector(obj).String()
}

// factsOf reads p's facts for v's object.
func (v *podView) factsOf(p *corev1.Pod) podFacts {
	set := labels.Set(p.Labels)
	f := podFacts{
		pod:          p,
		selected:     v.selector.Matches(set),
		active:       controller.IsPodActive(p),
		terminating:  p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed,
		fullyLabeled: v.template.Matches(set),
	}
	if c := readyCondition(p); c != nil && c.Status == corev1.ConditionTrue {
		f.ready, f.readySince = true, c.LastTransitionTime
	}
	return f
}

// add adds f to c (by one, or by -1 to take it away).
func (c *podCounts) add(f podFacts, by int32) {
	switch {
	case f.active && f.selected:
		c.replicas += by
		if f.fullyLabeled {
			c.fullyLabeled += by
		}
		if f.ready {
			c.ready += by
		}
	case f.active:
		c.unselected += by
	case f.terminating && f.selected:
		c.terminating += by
	}
}

// counted tells whether f counts as a replica, and so in readiness and
// availability.
func (f podFacts) counted() bool { return f.active && f.selected }

// set records p, read from the cache under key, as one of v's pods; a nil
// p (gone, or controlled by another) as none of them.
func (v *podView) set(key string, p *corev1.Pod) {
	if old, ok := v.pods[key]; ok {
		v.counts.add(old, -1)
		delete(v.pods, key)
		delete(v.pending, key)
	}
	if p == nil {
		return
	}
	f := v.factsOf(p)
	v.pods[key] = f
	v.counts.add(f, 1)
	if f.counted() && f.ready && v.minReady > 0 {
		// Looked at, against the time, by the next tally.
		v.pending[key] = f.readySince.Add(time.Duration(v.minReady) * time.Second)
	}
}

// tally returns v's counts at now with extra, the pods a sync adopted,
// counted as v's replicas are; and how long until the first ready pod
// that is not available yet becomes so, if there is one.
func (v *podView) tally(extra []*corev1.Pod, now time.Time) (c podCounts, next time.Duration, waiting bool) {
	soonest := func(at time.Time) {
		if d := at.Sub(now); !waiting || d < next {
			next, waiting = d, true
		}
	}
	for key, at := range v.pending {
		if !at.After(now) {
			delete(v.pending, key)
			continue
		}
		soonest(at)
	}
	c = v.counts
	c.available = c.ready - int32(len(v.pending))
	for _, p := range extra {
		f := v.factsOf(p)
		f.active, f.selected = true, true
		c.add(f, 1)
		if !f.ready {
			continue
		}
		if at := f.readySince.Add(time.Duration(v.minReady) * time.Second); v.minReady > 0 && at.After(now) {
			soonest(at)
			continue
		}
		c.available++
	}
	return c, next, waiting
}

// replicas returns v's active selected pods, with extra.
func (v *podView) replicas(extra []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, int(v.counts.replicas)+len(extra))
	for _, f := range v.pods {
		if f.counted() {
			out = append(out, f.pod)
		}
	}
	return append(out, extra...)
}

// unselected returns v's active pods its selector no longer matches.
func (v *podView) unselected() []*corev1.Pod {
	if v.counts.unselected == 0 {
		return nil
	}
	var out []*corev1.Pod
	for _, f := range v.pods {
		if f.active && !f.selected {
			out = append(out, f.pod)
		}
	}
	return out
}

// podViews holds the manager's views, by object key, with the pods
// touched since each view's last sync. The event handlers touch pods
// (touch) after the informer's cache has them, and before they settle
// the expectations a sync waits on; a sync takes its view and the
// touched pods (take) after reading its expectations, and reads those
// pods from the cache. So a sync whose expectations are satisfied sees
// every pod they counted, and a pod touched while a sync reads the cache
// is read again by the next sync, which the same event queued.
//
// The zero value is ready to use.
type podViews struct {
	mu    sync.Mutex
	views map[string]*viewEntry
}

type viewEntry struct {
	uid     types.UID
	view    *podView // nil until the first sync builds it
	touched map[string]struct{}
}

// touch records that the pod under podKey changed, for the view of the
// object under ownerKey with uid, if there is one. An object nothing
// has synced has no view, and its first sync reads all of its pods.
func (vs *podViews) touch(ownerKey string, uid types.UID, podKey string) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if e, ok := vs.views[ownerKey]; ok && e.uid == uid {
		if e.touched == nil {
			e.touched = map[string]struct{}{}
		}
		e.touched[podKey] = struct{}{}
	}
}

// take returns the view of the object under key with uid (nil if there
// is none: the object never synced, was replaced since, or its last sync
// failed before it put the view back) and the pods touched since it was
// last taken, and from now on records the pods touched for that uid.
func (vs *podViews) take(key string, uid types.UID) (*podView, map[string]struct{}) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	e, ok := vs.views[key]
	if !ok || e.uid != uid {
		if vs.views == nil {
			vs.views = map[string]*viewEntry{}
		}
		vs.views[key] = &viewEntry{uid: uid}
		return nil, nil
	}
	v, touched := e.view, e.touched
	e.view, e.touched = nil, nil
	return v, touched
}

// put keeps v as the view of the object under key, unless the object
// was forgotten or replaced meanwhile.
func (vs *podViews) put(key string, v *podView) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if e, ok := vs.views[key]; ok && e.uid == v.uid {
		e.view = v
	}
}

// forget drops the view of the object under key, which is gone.
func (vs *podViews) forget(key string) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	delete(vs.views, key)
}

// touch touches pod for the view of ref, its controller (any kind's: a
// view is found by name and UID), if that has one.
func (m *Manager[T]) touch(pod *corev1.Pod, ref *metav1.OwnerReference) {
	m.views.touch(pod.Namespace+"/"+ref.Name, ref.UID, podKey(pod))
}

// podView returns obj's view, up to date with the pod cache: the view of
// its last sync with the touched pods read again, or, for an object that
// never synced or changed its shape, one read from the pod index.
func (m *Manager[T]) podView(obj T) (*podView, error) {
	key := objectKey(obj)
	v, touched := m.views.take(key, obj.GetUID())
	idx := m.pods.GetIndexer()
	if v == nil || !fits(v, m.kind, obj) {
		v = newPodView(m.kind, obj)
		owned, err := controller.ControlledPods(idx, obj.GetNamespace(), obj.GetUID())
		if err != nil {
			return nil, fmt.Errorf("listing controlled pods: %w", err)
		}
		for _, p := range owned {
			v.set(podKey(p), p)
		}
	} else {
		for pk := range touched {
			p, ok, err := idx.GetByKey(pk)
			if err != nil {
				return nil, fmt.Errorf("reading pod %s: %w", pk, err)
			}
			if ok {
				if ref := metav1.GetControllerOfNoCopy(p); ref == nil || ref.UID != v.uid {
					ok = false
				}
			}
			if !ok {
				p = nil
			}
			v.set(pk, p)
		}
	}
	m.views.put(key, v)
	return v, nil
}

// orphanPods returns the active pods of namespace without a controller,
// which a sync may adopt.
func (m *Manager[T]) orphanPods(namespace string) ([]*corev1.Pod, error) {
	orphans, err := controller.Orphans(m.pods.GetIndexer(), namespace)
	if err != nil {
		return nil, fmt.Errorf("listing orphan pods: %w", err)
	}
	// ByIndex returns a fresh slice: filter in place.
	active := orphans[:0]
	for _, p := range orphans {
		if controller.IsPodActive(p) {
			active = append(active, p)
		}
	}
	clear(orphans[len(active):])
	return active, nil
}
