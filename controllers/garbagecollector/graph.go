package garbagecollector

import (
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The finalizers through which the API server hands a deletion's
// propagation to the collector.
const (
	finalizerOrphan     = metav1.FinalizerOrphanDependents
	finalizerForeground = metav1.FinalizerDeleteDependents
)

// objectID locates one object: where to read it and which incarnation of
// it (uid) is meant.
type objectID struct {
	res       *Resource // nil for an owner of a kind the collector does not know
	namespace string
	name      string
	uid       types.UID
}

func (id objectID) String() string {
	r := "?"
	if id.res != nil {
		r = id.res.GVR.Resource
	}
	if id.namespace != "" {
		return r + "/" + id.namespace + "/" + id.name + "@" + string(id.uid)
	}
	return r + "/" + id.name + "@" + string(id.uid)
}

// node is an object of the dependency graph. A virtual node stands for an
// owner that dependents reference but no informer has shown (yet); its id
// comes from the first reference to it.
type node struct {
	id objectID
	// kind is the kind of an owner that references name and id.res
	// could not resolve (a kind the collector does not watch, yet or any
	// more): it is resolved when a resource of that kind is added.
	kind       schema.GroupVersionKind
	virtual    bool
	owners     []metav1.OwnerReference
	dependents map[*node]struct{}
	// deletingDependents: the object has a deletionTimestamp and the
	// foregroundDeletion finalizer.
	deletingDependents bool
	// rechecks counts the times a virtual node was found to exist while
	// no informer had shown it.
	rechecks int
}

// Bounds of the delay before a virtual node found to exist is looked at
// again: it doubles from the first to the last.
const (
	firstRecheck = 100 * time.Millisecond
	lastRecheck  = 5 * time.Minute
)

// recheck reports whether node uid is still virtual and, if so, after how
// long to look at it again.
func (g *graph) recheck(uid types.UID) (time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[uid]
	if n == nil || !n.virtual {
		return 0, false
	}
	d := firstRecheck << min(n.rechecks, 12)
	n.rechecks++
	return min(d, lastRecheck), true
}

// blocks reports whether n's reference to owner blocks owner's deletion.
func (n *node) blocks(owner types.UID) bool {
	for _, r := range n.owners {
		if r.UID == owner {
			return r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
		}
	}
	return false
}

// graph is the dependency graph of every object the informers show, built
// from their events. It is safe for concurrent use; it tells the workers
// what to look at through the enqueue functions, called with its lock held
// (they must not block).
type graph struct {
	locate   func(ref metav1.OwnerReference, depNamespace string) (objectID, bool)
	toDelete func(types.UID)
	toOrphan func(types.UID)

	mu     sync.Mutex
	nodes  map[types.UID]*node
	absent uidSet
}

func newGraph(locate func(metav1.OwnerReference, string) (objectID, bool), toDelete, toOrphan func(types.UID), absentSize int) *graph {
	return &graph{
		locate: locate, toDelete: toDelete, toOrphan: toOrphan,
		nodes:  map[types.UID]*node{},
		absent: uidSet{max: absentSize},
	}
}

// feed is one informer subscription's stream of events into the graph.
// Once cut, under the graph's lock, the events it still delivers are
// ignored: they would bring back nodes of a resource no longer watched.
type feed struct {
	res *Resource
	cut bool // guarded by graph.mu
}

// upsertFrom is upsert of an event of f.
func (g *graph) upsertFrom(f *feed, obj metav1.Object) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !f.cut {
		g.upsertLocked(f.res, obj)
	}
}

// removeFrom is remove of an event of f.
func (g *graph) removeFrom(f *feed, obj metav1.Object) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !f.cut {
		g.removeLocked(obj.GetUID())
	}
}

// upsert records the state of obj, an object of resource res, as an
// informer showed it.
func (g *graph) upsert(res *Resource, obj metav1.Object) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.upsertLocked(res, obj)
}

func (g *graph) upsertLocked(res *Resource, obj metav1.Object) {
	uid := obj.GetUID()
	if uid == "" {
		return
	}
	n := g.nodes[uid]
	if n == nil {
		n = &node{dependents: map[*node]struct{}{}}
		g.nodes[uid] = n
	}
	n.virtual = false
	n.id = objectID{res: res, namespace: obj.GetNamespace(), name: obj.GetName(), uid: uid}
	old := n.owners
	n.owners = slices.Clone(obj.GetOwnerReferences())
	g.relink(n, old)

	deleting := obj.GetDeletionTimestamp() != nil
	finalizers := obj.GetFinalizers()
	if deleting && slices.Contains(finalizers, finalizerOrphan) {
		g.toOrphan(uid)
	}
	was := n.deletingDependents
	n.deletingDependents = deleting && slices.Contains(finalizers, finalizerForeground)
	if n.deletingDependents && !was {
		// Foreground deletion begins: every dependent goes, and the owner
		// waits for the blocking ones.
		for d := range n.dependents {
			g.toDelete(d.id.uid)
		}
		g.toDelete(uid)
	}
}

// relink brings the edges from n to its owners in line with n.owners, given
// the references old it had before.
func (g *graph) relink(n *node, old []metav1.OwnerReference) {
	for _, r := range old {
		i := slices.IndexFunc(n.owners, func(o metav1.OwnerReference) bool { return o.UID == r.UID })
		o := g.nodes[r.UID]
		switch {
		case o == nil:
		case i < 0:
			delete(o.dependents, n)
			g.dependentGone(o)
		case n.blocks(r.UID) != (r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion) && o.deletingDependents:
			// A blocker appeared or went: the owner re-counts.
			g.toDelete(o.id.uid)
		}
	}
	for _, r := range n.owners {
		if !slices.ContainsFunc(old, func(o metav1.OwnerReference) bool { return o.UID == r.UID }) {
			g.link(n, r)
		}
	}
}

// link adds the edge from n to the owner ref names.
func (g *graph) link(n *node, ref metav1.OwnerReference) {
	o := g.nodes[ref.UID]
	if o == nil {
		if g.absent.has(ref.UID) {
			// A known-absent owner: n may be garbage already.
			g.toDelete(n.id.uid)
			return
		}
		id, ok := g.locate(ref, n.id.namespace)
		o = &node{id: id, virtual: true, dependents: map[*node]struct{}{}}
		if !ok {
			o.id = objectID{namespace: n.id.namespace, name: ref.Name, uid: ref.UID}
			o.kind, _ = gvkOf(ref)
		}
		g.nodes[ref.UID] = o
		// Whether it exists is for a worker to find out.
		g.toDelete(ref.UID)
	}
	o.dependents[n] = struct{}{}
	if o.deletingDependents {
		g.toDelete(n.id.uid)
	}
}

// resolve gives res to the virtual owners of its group and kind (at any
// version, as locate finds them) that no watched resource could locate
// until now, and sends them to be verified: an
// owner that turns out absent releases its dependents. A namespaced kind
// stays unresolved for an owner of cluster-scoped dependents, which
// cannot reference one.
func (g *graph) resolve(res *Resource) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for uid, n := range g.nodes {
		if n.id.res != nil || n.kind.GroupKind() != res.GVK.GroupKind() || (res.Namespaced && n.id.namespace == "") {
			continue
		}
		n.id.res = res
		if !res.Namespaced {
			n.id.namespace = ""
		}
		g.toDelete(uid)
	}
}

// cut stops f's events and turns the nodes of its resource into
// unresolved virtual owners (or forgets them when nothing depends on
// them): with the resource no longer watched, nothing would tell of their
// changes or their end. They are not taken to be absent, since the
// resource may only have left discovery for a moment; their dependents
// stay, and a resource of their kind added later resolves them again.
// Their own references are dropped, so no owner waits for them.
func (g *graph) cut(f *feed) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f.cut = true
	for uid, n := range g.nodes {
		if n.id.res != f.res {
			continue
		}
		for _, r := range n.owners {
			if o := g.nodes[r.UID]; o != nil {
				delete(o.dependents, n)
				g.dependentGone(o)
			}
		}
		n.owners = nil
		n.id.res, n.kind, n.virtual, n.deletingDependents = nil, f.res.GVK, true, false
		if len(n.dependents) == 0 {
			delete(g.nodes, uid)
		}
	}
}

// dependentGone is called when o lost a dependent.
func (g *graph) dependentGone(o *node) {
	if o.deletingDependents {
		g.toDelete(o.id.uid)
	}
	if o.virtual && len(o.dependents) == 0 {
		delete(g.nodes, o.id.uid)
	}
}

// remove records that the object with obj's uid is gone.
func (g *graph) remove(obj metav1.Object) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(obj.GetUID())
}

// removeLocked forgets the node uid, which is known not to exist, and sends
// its dependents to be checked.
func (g *graph) removeLocked(uid types.UID) {
	if uid == "" {
		return
	}
	// UIDs are never reused: once gone, always gone.
	g.absent.add(uid)
	n := g.nodes[uid]
	if n == nil {
		return
	}
	for _, r := range n.owners {
		if o := g.nodes[r.UID]; o != nil {
			delete(o.dependents, n)
			g.dependentGone(o)
		}
	}
	n.owners = nil
	delete(g.nodes, uid)
	for d := range n.dependents {
		g.toDelete(d.id.uid)
	}
}

// removeVirtual forgets the virtual node uid once its owner was found
// absent. An observed node is left alone: the informer is the authority
// on it.
func (g *graph) removeVirtual(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := g.nodes[uid]; n != nil && n.virtual {
		g.removeLocked(uid)
	}
}

// markAbsent records that uid was found not to exist.
func (g *graph) markAbsent(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.absent.add(uid)
}

// dependentView is what a worker needs to know of a dependent.
type dependentView struct {
	id                 objectID
	blocking           bool // its reference blocks the owner's deletion
	deletingDependents bool
}

// nodeView is a copy of a node taken for a worker.
type nodeView struct {
	id                 objectID
	virtual            bool
	deletingDependents bool
	dependents         []dependentView
}

// view returns a copy of node uid, if the graph has it.
func (g *graph) view(uid types.UID) (nodeView, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[uid]
	if n == nil {
		return nodeView{}, false
	}
	v := nodeView{id: n.id, virtual: n.virtual, deletingDependents: n.deletingDependents}
	for d := range n.dependents {
		v.dependents = append(v.dependents, dependentView{id: d.id, blocking: d.blocks(uid), deletingDependents: d.deletingDependents})
	}
	return v, true
}

// ownerState is what the graph knows of an owner.
type ownerState int

const (
	ownerUnknown ownerState = iota
	ownerAbsent
	ownerPresent
	ownerDeletingDependents
)

// owner tells what the graph knows of the owner uid. Only absence must be
// verified against the server before acting on it; presence and foreground
// deletion seen in the cache are safe to act on, since an owner goes
// from present to deleting to gone and never back.
func (g *graph) owner(uid types.UID) ownerState {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.absent.has(uid) {
		return ownerAbsent
	}
	n := g.nodes[uid]
	switch {
	case n == nil || n.virtual:
		return ownerUnknown
	case n.deletingDependents:
		return ownerDeletingDependents
	}
	return ownerPresent
}

// uidSet is a set of UIDs bounded to about max entries: when the newer of
// its two generations fills up, the older is dropped. Forgetting is safe:
// a forgotten absent owner is looked up again.
type uidSet struct {
	max       int
	cur, prev map[types.UID]struct{}
}

func (s *uidSet) has(uid types.UID) bool {
	_, a := s.cur[uid]
	_, b := s.prev[uid]
	return a || b
}

func (s *uidSet) add(uid types.UID) {
	if s.cur == nil {
		s.cur = map[types.UID]struct{}{}
	}
	if len(s.cur) >= max(s.max/2, 1) {
		s.prev, s.cur = s.cur, map[types.UID]struct{}{}
	}
	s.cur[uid] = struct{}{}
}

// gvkOf parses an owner reference's kind.
func gvkOf(ref metav1.OwnerReference) (schema.GroupVersionKind, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, false
	}
	return gv.WithKind(ref.Kind), true
}
