package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/internal/testbackends"
)

func TestMain(m *testing.M) { os.Exit(testbackends.Run(m)) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const ns = "default"

// The resources of the tests: deployments own RCs, RCs own pods.
var (
	deployments = Resource{
		GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespaced: true,
	}
	rcs = Resource{
		GVR: schema.GroupVersionResource{Version: "v1", Resource: "replicationcontrollers"},
		GVK: schema.GroupVersionKind{Version: "v1", Kind: "ReplicationController"}, Namespaced: true,
	}
	pods = Resource{
		GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespaced: true,
	}
	testResources = []Resource{deployments, rcs, pods}
)

// fakeAPI is the API layer of the tests: one cachetest Source per resource,
// which the informers watch, and the API server's deletion semantics on
// top. Delete with Orphan or Foreground adds that finalizer and sets the
// deletionTimestamp; an object whose deletionTimestamp is set goes when its
// finalizers are empty. Patches are JSON merge patches whose metadata.uid
// and metadata.resourceVersion, when present, are preconditions.
type fakeAPI struct {
	sources map[schema.GroupVersionResource]*cachetest.Source[*unstructured.Unstructured]

	mu  sync.Mutex // makes each call one atomic step
	seq int
	// removed lists the objects removed, in order, as "resource/name".
	removed []string
	// informers counts the informers made of each resource.
	informers map[schema.GroupVersionResource]int
}

func newFakeAPI(resources []Resource) *fakeAPI {
	a := &fakeAPI{
		sources:   map[schema.GroupVersionResource]*cachetest.Source[*unstructured.Unstructured]{},
		informers: map[schema.GroupVersionResource]int{},
	}
	for _, r := range resources {
		a.sources[r.GVR] = cachetest.New(cachetest.WithResource[*unstructured.Unstructured](r.GVR.GroupResource()))
	}
	return a
}

// ListerWatcher makes the fake an informers.Source.
func (a *fakeAPI) ListerWatcher(gvr schema.GroupVersionResource, _ string, _ func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.informers[gvr]++
	return cache.Erase[*unstructured.Unstructured](a.sources[gvr])
}

func (a *fakeAPI) source(gvr schema.GroupVersionResource) (*cachetest.Source[*unstructured.Unstructured], error) {
	s := a.sources[gvr]
	if s == nil {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), "")
	}
	return s, nil
}

// create stores obj with a fresh UID.
func (a *fakeAPI) create(t testing.TB, r Resource, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	a.mu.Lock()
	a.seq++
	obj = obj.DeepCopy()
	obj.SetUID(types.UID(fmt.Sprintf("uid-%d", a.seq)))
	a.mu.Unlock()
	out, err := a.sources[r.GVR].Create(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (a *fakeAPI) Get(_ context.Context, gvr schema.GroupVersionResource, namespace, name string) (cache.Object, error) {
	s, err := a.source(gvr)
	if err != nil {
		return nil, err
	}
	obj, ok := s.Get(namespace, name)
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	return obj.DeepCopy(), nil
}

func (a *fakeAPI) Delete(_ context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deleteLocked(gvr, namespace, name, opts)
}

func (a *fakeAPI) deleteLocked(gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	s, err := a.source(gvr)
	if err != nil {
		return err
	}
	cur, ok := s.Get(namespace, name)
	if !ok {
		return apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	if p := opts.Preconditions; p != nil && p.UID != nil && *p.UID != cur.GetUID() {
		return apierrors.NewConflict(gvr.GroupResource(), name, errors.New("precondition failed: UID"))
	}
	if cur.GetDeletionTimestamp() != nil {
		return nil // already being deleted
	}
	policy := metav1.DeletePropagationBackground
	if gvr == rcs.GVR {
		policy = metav1.DeletePropagationOrphan
	}
	if opts.PropagationPolicy != nil {
		policy = *opts.PropagationPolicy
	}
	obj := cur.DeepCopy()
	switch policy {
	case metav1.DeletePropagationOrphan:
		obj.SetFinalizers(append(obj.GetFinalizers(), metav1.FinalizerOrphanDependents))
	case metav1.DeletePropagationForeground:
		obj.SetFinalizers(append(obj.GetFinalizers(), metav1.FinalizerDeleteDependents))
	}
	if len(obj.GetFinalizers()) == 0 {
		return a.removeLocked(gvr, obj)
	}
	now := metav1.Now()
	obj.SetDeletionTimestamp(&now)
	_, err = s.Update(obj)
	return err
}

func (a *fakeAPI) removeLocked(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	if _, err := a.sources[gvr].Delete(obj.GetNamespace(), obj.GetName()); err != nil {
		return err
	}
	a.removed = append(a.removed, gvr.Resource+"/"+obj.GetName())
	return nil
}

func (a *fakeAPI) Patch(_ context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, err := a.patchLocked(gvr, namespace, name, pt, data)
	return err
}

// patchLocked applies a merge patch and returns the object before it.
func (a *fakeAPI) patchLocked(gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte) (*unstructured.Unstructured, error) {
	s, err := a.source(gvr)
	if err != nil {
		return nil, err
	}
	if pt != types.MergePatchType {
		return nil, apierrors.NewBadRequest("only merge patches: " + string(pt))
	}
	cur, ok := s.Get(namespace, name)
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	var patch map[string]any
	if err := json.Unmarshal(data, &patch); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	meta, _ := patch["metadata"].(map[string]any)
	if uid, ok := meta["uid"]; ok && uid != string(cur.GetUID()) {
		return nil, apierrors.NewConflict(gvr.GroupResource(), name, errors.New("precondition failed: UID"))
	}
	if rv, ok := meta["resourceVersion"]; ok && rv != cur.GetResourceVersion() {
		return nil, apierrors.NewConflict(gvr.GroupResource(), name, errors.New("the object has been modified"))
	}
	merged, _ := mergePatch(cur.DeepCopy().Object, patch).(map[string]any)
	obj := &unstructured.Unstructured{Object: merged}
	if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 {
		return cur, a.removeLocked(gvr, obj)
	}
	_, err = s.Update(obj)
	return cur, err
}

// mergePatch applies an RFC 7386 JSON merge patch to target.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}

// byUID finds the live object with uid in any resource.
func (a *fakeAPI) byUID(uid types.UID) *unstructured.Unstructured {
	for _, s := range a.sources {
		for _, o := range s.Items() {
			if o.GetUID() == uid {
				return o
			}
		}
	}
	return nil
}

// revisions sums the sources' revisions: it moves with every write.
func (a *fakeAPI) revisions() int64 {
	var n int64
	for _, s := range a.sources {
		n += s.Revision()
	}
	return n
}

// all returns every live object.
func (a *fakeAPI) all() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, s := range a.sources {
		out = append(out, s.Items()...)
	}
	return out
}

func (a *fakeAPI) get(r Resource, name string) (*unstructured.Unstructured, bool) {
	return a.sources[r.GVR].Get(ns, name)
}

// gcClient is the collector's view of the fake: it checks at every write
// that the collector does only what it may, and can fail calls.
type gcClient struct {
	api *fakeAPI
	// fail, when set, is asked before each call; true fails it with a 500.
	fail func() bool
	// bump, when set, is asked before each patch; true changes the object
	// first, so that the patch meets a conflict.
	bump func() bool

	mu         sync.Mutex
	violations []string
	deletes    int            // objects the collector deleted
	calls      map[string]int // by verb, failed ones included
}

func (c *gcClient) violate(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

// injected counts a call of verb and fails it when told to.
func (c *gcClient) injected(verb string) error {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[verb]++
	c.mu.Unlock()
	if c.fail != nil && c.fail() {
		return apierrors.NewInternalError(errors.New("injected failure"))
	}
	return nil
}

func (c *gcClient) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (cache.Object, error) {
	if err := c.injected("get"); err != nil {
		return nil, err
	}
	return c.api.Get(ctx, gvr, namespace, name)
}

// ownerGoing reports whether the owner uid is absent, or being deleted with
// one of finalizers. The API's lock is held.
func (c *gcClient) ownerGoing(uid types.UID, finalizers ...string) bool {
	o := c.api.byUID(uid)
	if o == nil {
		return true
	}
	if o.GetDeletionTimestamp() == nil {
		return false
	}
	for _, f := range finalizers {
		if slices.Contains(o.GetFinalizers(), f) {
			return true
		}
	}
	return false
}

func (c *gcClient) Delete(_ context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	if err := c.injected("delete"); err != nil {
		return err
	}
	c.api.mu.Lock()
	defer c.api.mu.Unlock()
	pre := opts.Preconditions
	if pre == nil || pre.UID == nil {
		c.violate("delete of %s/%s without a UID precondition", gvr.Resource, name)
	} else if cur, ok := c.api.sources[gvr].Get(namespace, name); ok && *pre.UID == cur.GetUID() && cur.GetDeletionTimestamp() == nil {
		// The collector may delete only what has no owner left but those
		// deleting their dependents in the foreground.
		for _, r := range cur.GetOwnerReferences() {
			if !c.ownerGoing(r.UID, metav1.FinalizerDeleteDependents) {
				c.violate("deleted %s/%s although its owner %s/%s is present", gvr.Resource, name, r.Kind, r.Name)
			}
		}
		c.mu.Lock()
		c.deletes++
		c.mu.Unlock()
	}
	return c.api.deleteLocked(gvr, namespace, name, opts)
}

func (c *gcClient) Patch(_ context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte) error {
	if err := c.injected("patch"); err != nil {
		return err
	}
	c.api.mu.Lock()
	defer c.api.mu.Unlock()
	if cur, ok := c.api.sources[gvr].Get(namespace, name); ok && c.bump != nil && c.bump() {
		// Someone else writes first.
		cp := cur.DeepCopy()
		cp.SetLabels(map[string]string{"bumped": cur.GetResourceVersion()})
		if _, err := c.api.sources[gvr].Update(cp); err != nil {
			return err
		}
	}
	before, err := c.api.patchLocked(gvr, namespace, name, pt, data)
	if err != nil {
		return err
	}
	after, stillThere := c.api.sources[gvr].Get(namespace, name)
	// An object that the patch let go keeps its references to the end.
	afterRefs, afterFin := before.GetOwnerReferences(), []string(nil)
	if stillThere {
		afterRefs, afterFin = after.GetOwnerReferences(), after.GetFinalizers()
	}
	for _, r := range before.GetOwnerReferences() {
		if !slices.ContainsFunc(afterRefs, func(a metav1.OwnerReference) bool { return a.UID == r.UID }) &&
			!c.ownerGoing(r.UID, metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents) {
			c.violate("removed %s/%s's reference to present owner %s", gvr.Resource, name, r.Name)
		}
	}
	for _, f := range before.GetFinalizers() {
		if slices.Contains(afterFin, f) {
			continue
		}
		// An orphaning owner goes once nothing refers to it; a foreground
		// one once nothing blocks it.
		for _, o := range c.api.all() {
			for _, r := range o.GetOwnerReferences() {
				blocks := r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
				if r.UID == before.GetUID() && (f == metav1.FinalizerOrphanDependents || blocks) {
					c.violate("removed %s from %s/%s while %s still refers to it", f, gvr.Resource, name, o.GetName())
				}
			}
		}
	}
	return nil
}

func (c *gcClient) checkViolations(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.violations {
		t.Error(v)
	}
}

// env runs a collector over a fakeAPI inside a synctest bubble.
type env struct {
	t       testing.TB
	api     *fakeAPI
	client  *gcClient
	factory *informers.SharedInformerFactory
	gc      *GarbageCollector
}

// newEnv makes the fake and the collector; start runs it.
func newEnv(t testing.TB, resources []Resource) *env {
	api := newFakeAPI(resources)
	e := &env{t: t, api: api, client: &gcClient{api: api}}
	e.factory = informers.NewSharedInformerFactory(api, informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
	gc, err := New(e.factory, e.client, resources, Options{Controller: controller.Options{Workers: 3, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	e.gc = gc
	return e
}

// start runs the collector until the test ends.
func (e *env) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.gc.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
		e.factory.Shutdown()
		e.client.checkViolations(e.t)
	})
	e.settle()
}

// settle lets the collector work until it is quiet: both queues empty
// with no retry pending, and no write anywhere for two minutes of the
// bubble's clock, which outlasts any informer's backoff.
func (e *env) settle() {
	e.t.Helper()
	idle := func() bool {
		synctest.Wait()
		del, orph := e.gc.toDelete.Queue(), e.gc.toOrphan.Queue()
		return del.Len() == 0 && orph.Len() == 0 && del.Waiting() == 0 && orph.Waiting() == 0
	}
	for range 100_000 {
		if idle() {
			rev := e.api.revisions()
			time.Sleep(2 * time.Minute)
			if idle() && e.api.revisions() == rev {
				return
			}
			continue
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatal("the collector never went quiet")
}

// delete deletes an object as a user would.
func (e *env) delete(r Resource, name string, policy metav1.DeletionPropagation) {
	e.t.Helper()
	opts := metav1.DeleteOptions{}
	if policy != "" {
		opts.PropagationPolicy = &policy
	}
	if err := e.api.Delete(context.Background(), r.GVR, ns, name, opts); err != nil {
		e.t.Fatal(err)
	}
}

// whileNotWatching runs change while r's informer cannot watch, and then
// makes its watch unable to resume, so that the informer relists and
// infers what changed: deletions become tombstones.
func (e *env) whileNotWatching(r Resource, change func()) {
	src := e.api.sources[r.GVR]
	src.FailNext(cachetest.OpWatch, 1<<30, nil)
	src.BreakWatches(nil)
	synctest.Wait()
	change()
	src.Compact(src.Revision())
	src.FailNext(cachetest.OpWatch, 0, nil)
}

// mustGet returns the live object r/name, failing the test without one.
func (e *env) mustGet(r Resource, name string) *unstructured.Unstructured {
	e.t.Helper()
	obj, ok := e.api.get(r, name)
	if !ok {
		e.t.Fatalf("%s/%s is gone", r.GVR.Resource, name)
	}
	return obj
}

func newObj(r Resource, name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(r.GVK.GroupVersion().String())
	u.SetKind(r.GVK.Kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetOwnerReferences(owners)
	return u
}

func ownerRef(owner *unstructured.Unstructured, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(),
		UID: owner.GetUID(), BlockOwnerDeletion: &block}
}

// rng is a seeded random source safe for the collector's goroutines.
type rng struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newRNG(seed uint64) *rng { return &rng{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

func (g *rng) chance(p float64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.r.Float64() < p
}

func (g *rng) intN(n int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.r.IntN(n)
}
