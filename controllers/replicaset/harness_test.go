package replicaset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/internal/kubelog"
)

func TestMain(m *testing.M) {
	kubelog.ToStderr()
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const ns = "default"

// fakeAPI stands in for the API server behind the manager: pod writes go
// to the pods Source and RC status writes to the RCs Source, so the
// informers observe them as they would a real server's.
type fakeAPI struct {
	pods *cachetest.Source[*corev1.Pod]

	mu          sync.Mutex
	seq         int
	createCalls int
	created     int
	deleteCalls int
	patchCalls  int
	statusCalls int
	// failCreate, when set, is asked about every create call (numbered
	// from 1); a non-nil answer fails it.
	failCreate func(call int) error
	// holdCreates accepts creations without writing them: the server has
	// the pod but the watch has not said so yet.
	holdCreates bool
	held        []*corev1.Pod
	// holdDeletes accepts deletions without writing them.
	holdDeletes bool
	heldDeletes []string
	// failDelete, when set, is asked about every delete; a non-nil
	// answer fails it.
	failDelete func(name string) error
	// gracefulDeletes marks pods deleted instead of removing them, as a
	// kubelet-run node would until the containers stop.
	gracefulDeletes bool
	// rcGet, when set, answers Get instead of the Source.
	rcGet func(namespace, name string) (*corev1.ReplicationController, error)
}

var errInjected = apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("exceeded quota"))

func (f *fakeAPI) CreatePod(_ context.Context, namespace string, pod *corev1.Pod, _ metav1.CreateOptions) (*corev1.Pod, error) {
	f.mu.Lock()
	f.createCalls++
	if f.failCreate != nil {
		if err := f.failCreate(f.createCalls); err != nil {
			f.mu.Unlock()
			return nil, err
		}
	}
	f.seq++
	f.created++
	p := pod.DeepCopy()
	p.Namespace = namespace
	if p.Name == "" {
		p.Name = p.GenerateName + fmt.Sprintf("%05d", f.seq)
	}
	p.UID = types.UID("pod-uid-" + strconv.Itoa(f.seq))
	p.CreationTimestamp = metav1.NewTime(time.Now())
	if f.holdCreates {
		f.held = append(f.held, p)
		f.mu.Unlock()
		return p, nil
	}
	f.mu.Unlock()
	return f.pods.Create(p)
}

// releaseCreates writes the held creations.
func (f *fakeAPI) releaseCreates(t *testing.T) {
	f.mu.Lock()
	held := f.held
	f.held, f.holdCreates = nil, false
	f.mu.Unlock()
	for _, p := range held {
		if _, err := f.pods.Create(p); err != nil {
			t.Fatalf("releasing %s: %v", p.Name, err)
		}
	}
}

func (f *fakeAPI) DeletePod(_ context.Context, namespace, name string, _ metav1.DeleteOptions) error {
	f.mu.Lock()
	f.deleteCalls++
	if f.failDelete != nil {
		if err := f.failDelete(name); err != nil {
			f.mu.Unlock()
			return err
		}
	}
	if f.holdDeletes {
		f.heldDeletes = append(f.heldDeletes, name)
		f.mu.Unlock()
		return nil
	}
	graceful := f.gracefulDeletes
	f.mu.Unlock()
	if graceful {
		cur, ok := f.pods.Get(namespace, name)
		if !ok {
			return apierrors.NewNotFound(corev1.Resource("pods"), name)
		}
		if cur.DeletionTimestamp != nil {
			return nil
		}
		next := cur.DeepCopy()
		next.DeletionTimestamp = new(metav1.NewTime(time.Now()))
		_, err := f.pods.Update(next)
		return err
	}
	_, err := f.pods.Delete(namespace, name)
	return err
}

// PatchPod applies the owner-reference patches controller.PodControl
// sends, the way a strategic merge patch merges ownerReferences by uid.
func (f *fakeAPI) PatchPod(_ context.Context, namespace, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions) (*corev1.Pod, error) {
	f.mu.Lock()
	f.patchCalls++
	f.mu.Unlock()
	if pt != types.StrategicMergePatchType {
		return nil, apierrors.NewBadRequest("unexpected patch type " + string(pt))
	}
	var patch struct {
		Metadata struct {
			OwnerReferences []map[string]any `json:"ownerReferences"`
			UID             types.UID        `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &patch); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	cur, ok := f.pods.Get(namespace, name)
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	if patch.Metadata.UID != "" && patch.Metadata.UID != cur.UID {
		return nil, apierrors.NewConflict(corev1.Resource("pods"), name, errors.New("uid precondition failed"))
	}
	next := cur.DeepCopy()
	for _, item := range patch.Metadata.OwnerReferences {
		uid := types.UID(fmt.Sprint(item["uid"]))
		next.OwnerReferences = slices.DeleteFunc(next.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == uid })
		if item["$patch"] == "delete" {
			continue
		}
		b, _ := json.Marshal(item)
		var ref metav1.OwnerReference
		if err := json.Unmarshal(b, &ref); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		next.OwnerReferences = append(next.OwnerReferences, ref)
	}
	return f.pods.Update(next)
}

// fakeStatus is the manager's StatusClient over the owners' Source,
// counting on f.
type fakeStatus[T cache.Object] struct {
	f    *fakeAPI
	objs *cachetest.Source[T]
	k    Kind[T]
	to   func(*corev1.ReplicationController) T
}

func (s fakeStatus[T]) Get(_ context.Context, namespace, name string) (T, error) {
	var zero T
	s.f.mu.Lock()
	get := s.f.rcGet
	s.f.mu.Unlock()
	if get != nil {
		rc, err := get(namespace, name)
		if err != nil {
			return zero, err
		}
		return s.to(rc), nil
	}
	obj, ok := s.objs.Get(namespace, name)
	if !ok {
		return zero, apierrors.NewNotFound(s.k.Resource(), name)
	}
	return obj.DeepCopyObject().(T), nil
}

// UpdateStatus writes only status, with obj's resourceVersion, unless
// empty, and UID, if set, as preconditions, like the status subresource.
func (s fakeStatus[T]) UpdateStatus(_ context.Context, obj T) (T, error) {
	var zero T
	s.f.mu.Lock()
	s.f.statusCalls++
	s.f.mu.Unlock()
	cur, ok := s.objs.Get(obj.GetNamespace(), obj.GetName())
	if !ok {
		return zero, apierrors.NewNotFound(s.k.Resource(), obj.GetName())
	}
	if rv := obj.GetResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
		return zero, apierrors.NewConflict(s.k.Resource(), obj.GetName(), errors.New("stale resourceVersion"))
	}
	if uid := obj.GetUID(); uid != "" && uid != cur.GetUID() {
		return zero, apierrors.NewConflict(s.k.Resource(), obj.GetName(), errors.New("Precondition failed: UID"))
	}
	return s.objs.Update(s.k.WithStatus(cur, s.k.Status(obj)))
}

func (f *fakeAPI) counts() (createCalls, created, deleteCalls, patchCalls, statusCalls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.createCalls, f.created, f.deleteCalls, f.patchCalls, f.statusCalls
}

func (f *fakeAPI) set(fn func(f *fakeAPI)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// mapSource serves the factory's informers from cachetest Sources.
type mapSource map[schema.GroupVersionResource]cache.ListerWatcher[cache.Object]

func (s mapSource) ListerWatcher(gvr schema.GroupVersionResource, _ string, _ func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
	return s[gvr]
}

// The tests describe the owners as ReplicationControllers (newRC) and run
// over both kinds: a kindCase converts what the tests write to its kind
// and what they read back, so one table serves both.

// store is the owners' Source seen as RCs.
type store interface {
	Create(rc *corev1.ReplicationController) (*corev1.ReplicationController, error)
	Get(namespace, name string) (*corev1.ReplicationController, bool)
	Update(rc *corev1.ReplicationController) (*corev1.ReplicationController, error)
	Delete(namespace, name string) (*corev1.ReplicationController, error)
}

// convStore is a store over a Source of the kind's objects.
type convStore[T cache.Object] struct {
	src  *cachetest.Source[T]
	to   func(*corev1.ReplicationController) T
	from func(T) *corev1.ReplicationController
	// keep, when set, carries over to an update what an RC cannot hold.
	keep func(cur, next T)
}

func (c convStore[T]) Create(rc *corev1.ReplicationController) (*corev1.ReplicationController, error) {
	out, err := c.src.Create(c.to(rc))
	if err != nil {
		return nil, err
	}
	return c.from(out), nil
}

func (c convStore[T]) Get(namespace, name string) (*corev1.ReplicationController, bool) {
	out, ok := c.src.Get(namespace, name)
	if !ok {
		return nil, false
	}
	return c.from(out), true
}

func (c convStore[T]) Update(rc *corev1.ReplicationController) (*corev1.ReplicationController, error) {
	next := c.to(rc)
	if cur, ok := c.src.Get(rc.Namespace, rc.Name); ok && c.keep != nil {
		c.keep(cur, next)
	}
	out, err := c.src.Update(next)
	if err != nil {
		return nil, err
	}
	return c.from(out), nil
}

func (c convStore[T]) Delete(namespace, name string) (*corev1.ReplicationController, error) {
	out, err := c.src.Delete(namespace, name)
	if err != nil {
		return nil, err
	}
	return c.from(out), nil
}

// sut is the manager under test with its steps taking and giving RCs.
type sut struct {
	*controller.Controller[string]
	expectations *controller.UIDTrackingControllerExpectations
	pods         cache.Informer[*corev1.Pod]

	addPod    func(pod *corev1.Pod, initial bool)
	updatePod func(old, cur *corev1.Pod)
	deletePod func(pod *corev1.Pod, finalStateUnknown bool)
	addRC     func(rc *corev1.ReplicationController, initial bool)
	updateRC  func(old, cur *corev1.ReplicationController)
	deleteRC  func(rc *corev1.ReplicationController, finalStateUnknown bool)

	manageReplicas func(ctx context.Context, pods []*corev1.Pod, rc *corev1.ReplicationController) error
	updateStatus   func(ctx context.Context, rc *corev1.ReplicationController, status corev1.ReplicationControllerStatus) error
	// latest is what a sync builds on when the cache shows rc.
	latest                    func(rc *corev1.ReplicationController) *corev1.ReplicationController
	syncReplicationController func(ctx context.Context, key string) (controller.Result, error)
	// candidatePods is what a sync of rc reads: its active pods (its
	// view's) and the active orphans of its namespace.
	candidatePods func(rc *corev1.ReplicationController) ([]*corev1.Pod, error)
	// tally is what a sync of rc at now counts of its pods, from its view
	// brought up to date (podView).
	tally func(rc *corev1.ReplicationController, now time.Time) (podCounts, time.Duration, bool, error)
	// secondManager makes another manager over the same pod informer.
	secondManager func() error
}

// kindCase is one kind the tests run over.
type kindCase struct {
	name string
	gvk  schema.GroupVersionKind
	// other is the kind of another controller, whose pods are not ours.
	other schema.GroupVersionKind
	// newEnv builds a manager over informers fed from cachetest Sources.
	newEnv func(t testing.TB, opts Options) *env
	// newIdle builds a manager whose informers never run, with objs in
	// the owners' cache.
	newIdle func(t testing.TB, objs ...*corev1.ReplicationController) *sut
	// calculateStatus is the kind's calculateStatus seen as an RC's.
	calculateStatus func(rc *corev1.ReplicationController, pods []*corev1.Pod, managed bool, err error, now time.Time) corev1.ReplicationControllerStatus
	// nextAvailable is how long until the first of rc's ready pods that
	// is not available yet becomes so, if one is waiting.
	nextAvailable func(rc *corev1.ReplicationController, pods []*corev1.Pod, now time.Time) (time.Duration, bool)
}

var kinds = []kindCase{
	newKindCase[*corev1.ReplicationController](ReplicationControllers{}, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
		func(rc *corev1.ReplicationController) *corev1.ReplicationController { return rc.DeepCopy() },
		func(rc *corev1.ReplicationController) *corev1.ReplicationController { return rc.DeepCopy() }, nil),
	newKindCase[*appsv1.ReplicaSet](ReplicaSets{}, corev1.SchemeGroupVersion.WithKind("ReplicationController"), rcToRS, rsToRC,
		func(cur, next *appsv1.ReplicaSet) { next.Status.TerminatingReplicas = cur.Status.TerminatingReplicas }),
}

// forEachKind runs f as a subtest for each kind.
func forEachKind(t *testing.T, f func(t *testing.T, k kindCase)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { f(t, k) })
	}
}

// rcToRS is the ReplicaSet an RC describes: a set-based selector of the
// RC's labels.
func rcToRS(rc *corev1.ReplicationController) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: *rc.ObjectMeta.DeepCopy(),
		Spec:       appsv1.ReplicaSetSpec{MinReadySeconds: rc.Spec.MinReadySeconds},
		Status:     ReplicationControllers{}.Status(rc),
	}
	if rc.Spec.Replicas != nil {
		rs.Spec.Replicas = new(*rc.Spec.Replicas)
	}
	if len(rc.Spec.Selector) > 0 {
		rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: maps.Clone(rc.Spec.Selector)}
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template.DeepCopy()
	}
	return rs
}

// rsToRC is rcToRS's inverse.
func rsToRC(rs *appsv1.ReplicaSet) *corev1.ReplicationController {
	rc := &corev1.ReplicationController{
		ObjectMeta: *rs.ObjectMeta.DeepCopy(),
		Spec: corev1.ReplicationControllerSpec{MinReadySeconds: rs.Spec.MinReadySeconds,
			Template: rs.Spec.Template.DeepCopy()},
	}
	if rs.Spec.Replicas != nil {
		rc.Spec.Replicas = new(*rs.Spec.Replicas)
	}
	if rs.Spec.Selector != nil {
		rc.Spec.Selector = maps.Clone(rs.Spec.Selector.MatchLabels)
	}
	return ReplicationControllers{}.WithStatus(rc, rs.Status)
}

func newKindCase[T cache.Object](k Kind[T], other schema.GroupVersionKind,
	to func(*corev1.ReplicationController) T, from func(T) *corev1.ReplicationController, keep func(cur, next T)) kindCase {
	kc := kindCase{name: k.ControllerName(), gvk: k.GroupVersionKind(), other: other}
	toStatus := func(st corev1.ReplicationControllerStatus) appsv1.ReplicaSetStatus {
		return ReplicationControllers{}.Status(&corev1.ReplicationController{Status: st})
	}
	wrap := func(m *Manager[T], objs cache.Informer[T], client StatusClient[T], pc controller.PodControl) *sut {
		return &sut{
			Controller:   m.Controller,
			expectations: m.expectations,
			pods:         m.pods,
			addPod:       m.addPod,
			updatePod:    m.updatePod,
			deletePod:    m.deletePod,
			addRC:        func(rc *corev1.ReplicationController, initial bool) { m.addObject(to(rc), initial) },
			updateRC:     func(old, cur *corev1.ReplicationController) { m.updateObject(to(old), to(cur)) },
			deleteRC:     func(rc *corev1.ReplicationController, unknown bool) { m.deleteObject(to(rc), unknown) },
			manageReplicas: func(ctx context.Context, pods []*corev1.Pod, rc *corev1.ReplicationController) error {
				return m.manageReplicas(ctx, to(rc), len(pods), func() []*corev1.Pod { return pods })
			},
			updateStatus: func(ctx context.Context, rc *corev1.ReplicationController, st corev1.ReplicationControllerStatus) error {
				return m.updateStatus(ctx, to(rc), toStatus(st))
			},
			latest: func(rc *corev1.ReplicationController) *corev1.ReplicationController {
				return from(m.writes.Latest(objectKey(to(rc)), to(rc)))
			},
			syncReplicationController: m.sync,
			candidatePods: func(rc *corev1.ReplicationController) ([]*corev1.Pod, error) {
				v, err := m.podView(to(rc))
				if err != nil {
					return nil, err
				}
				orphans, err := m.orphanPods(rc.Namespace)
				return append(append(v.replicas(nil), v.unselected()...), orphans...), err
			},
			tally: func(rc *corev1.ReplicationController, now time.Time) (podCounts, time.Duration, bool, error) {
				v, err := m.podView(to(rc))
				if err != nil {
					return podCounts{}, 0, false, err
				}
				c, next, ok := v.tally(nil, now)
				return c, next, ok, nil
			},
			secondManager: func() error {
				_, err := New(k, m.pods, cachetest.NewInformer[T](), client, pc, Options{})
				return err
			},
		}
	}
	kc.newEnv = func(t testing.TB, opts Options) *env {
		t.Helper()
		pods := cachetest.New[*corev1.Pod]()
		objs := cachetest.New[T]()
		api := &fakeAPI{pods: pods}
		status := fakeStatus[T]{f: api, objs: objs, k: k, to: to}
		f := informers.NewSharedInformerFactory(mapSource{
			corev1.SchemeGroupVersion.WithResource("pods"):                          cache.Erase[*corev1.Pod](pods),
			k.GroupVersionKind().GroupVersion().WithResource(k.Resource().Resource): cache.Erase[T](objs),
		}, informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
		if opts.Controller.Logger == nil {
			opts.Controller.Logger = quiet
		}
		if opts.Controller.Workers == 0 {
			opts.Controller.Workers = 1
		}
		// The workers start at the first poll after the handlers,
		// registered by Run, have been replayed the caches: a millisecond
		// of the bubble's clock after run.
		opts.Controller.CacheSyncPollInterval = time.Millisecond
		objInformer := informers.For[T](f)
		pc := &controller.RealPodControl{Client: api, Logger: quiet}
		m, err := New(k, informers.For[*corev1.Pod](f), objInformer, status, pc, opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		e := &env{tb: t, kind: kc, api: api, pods: pods, rcs: convStore[T]{src: objs, to: to, from: from, keep: keep},
			factory: f, m: wrap(m, objInformer, status, pc), cancel: cancel}
		e.objsSynced = objInformer.HasSynced
		e.cached = func(name string) (*corev1.ReplicationController, bool) {
			obj, err := m.lister.Namespace(ns).Get(name)
			if err != nil {
				return nil, false
			}
			return from(obj), true
		}
		e.observeObjs = func() error {
			_, err := objInformer.AddEventHandler(cache.ResourceEventHandlerFuncs[T]{
				AddFunc: m.addObject, UpdateFunc: m.updateObject, DeleteFunc: m.deleteObject,
			})
			return err
		}
		f.Start(ctx)
		t.Cleanup(e.stop)
		return e
	}
	kc.newIdle = func(t testing.TB, rcs ...*corev1.ReplicationController) *sut {
		t.Helper()
		api := &fakeAPI{}
		objs := make([]T, len(rcs))
		for i, rc := range rcs {
			objs[i] = to(rc)
		}
		inf := cachetest.NewInformer(objs...)
		status := fakeStatus[T]{f: api, k: k, to: to}
		pc := &controller.RealPodControl{Client: api}
		m, err := New(k, cachetest.NewInformer[*corev1.Pod](), inf, status, pc, Options{Controller: controller.Options{Logger: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Queue().ShutDown)
		return wrap(m, inf, status, pc)
	}
	kc.calculateStatus = func(rc *corev1.ReplicationController, pods []*corev1.Pod, managed bool, err error, now time.Time) corev1.ReplicationControllerStatus {
		obj := to(rc)
		counts, _, _ := newPodView(k, obj).tally(pods, now)
		st := calculateStatus(k, obj, counts, managed, err, now)
		return from(k.WithStatus(obj, st)).Status
	}
	kc.nextAvailable = func(rc *corev1.ReplicationController, pods []*corev1.Pod, now time.Time) (time.Duration, bool) {
		_, next, ok := newPodView(k, to(rc)).tally(pods, now)
		return next, ok
	}
	return kc
}

// env is a manager over informers fed from cachetest Sources.
type env struct {
	tb      testing.TB
	kind    kindCase
	api     *fakeAPI
	pods    *cachetest.Source[*corev1.Pod]
	rcs     store
	factory *informers.SharedInformerFactory
	m       *sut
	cancel  context.CancelFunc
	done    chan error

	objsSynced  func() bool
	observeObjs func() error
	// cached reads an owner from the manager's informer, not the Source.
	cached func(name string) (*corev1.ReplicationController, bool)
}

// newPod makes a pod of the env's kind.
func (e *env) newPod(name string, lbl map[string]string, owner *corev1.ReplicationController) *corev1.Pod {
	return e.kind.newPod(name, lbl, owner)
}

// run starts the workers once the informers have delivered what they
// hold, so that the first syncs see a cache that has caught up.
func (e *env) run() {
	synctest.Wait()
	e.start()
	time.Sleep(time.Millisecond)
	synctest.Wait()
}

// observe registers the manager's event handlers, which Run registers,
// for tests that call its sync steps without running it.
func (e *env) observe() {
	e.tb.Helper()
	_, err1 := informers.For[*corev1.Pod](e.factory).AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
		AddFunc: e.m.addPod, UpdateFunc: e.m.updatePod, DeleteFunc: e.m.deletePod,
	})
	err2 := e.observeObjs()
	if err := errors.Join(err1, err2); err != nil {
		e.tb.Fatal(err)
	}
}

func (e *env) start() {
	e.done = make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	prev := e.cancel
	e.cancel = func() { cancel(); prev() }
	go func() { e.done <- e.m.Run(ctx) }()
}

func (e *env) stop() {
	e.cancel()
	if e.done != nil {
		if err := <-e.done; err != nil {
			e.tb.Errorf("Run: %v", err)
		}
		e.done = nil
	}
	e.factory.Shutdown()
}

// settle lets the bubble run until nothing is left to do but wait on
// timers, then advances the clock step by step until cond holds, failing
// after limit.
func (e *env) settle(limit time.Duration, cond func() bool) {
	e.tb.Helper()
	for start := time.Now(); ; {
		synctest.Wait()
		if cond() {
			return
		}
		if time.Since(start) > limit {
			e.tb.Fatalf("condition not reached within %v (fake time)", limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) createRC(rc *corev1.ReplicationController) *corev1.ReplicationController {
	e.tb.Helper()
	out, err := e.rcs.Create(rc)
	if err != nil {
		e.tb.Fatal(err)
	}
	return out
}

func (e *env) rc(name string) *corev1.ReplicationController {
	e.tb.Helper()
	rc, ok := e.rcs.Get(ns, name)
	if !ok {
		e.tb.Fatalf("RC %s gone", name)
	}
	return rc
}

// scale sets spec.replicas, bumping generation as the API server does.
func (e *env) scale(name string, replicas int32) {
	e.tb.Helper()
	next := e.rc(name).DeepCopy()
	next.Spec.Replicas = &replicas
	next.Generation++
	if _, err := e.rcs.Update(next); err != nil {
		e.tb.Fatal(err)
	}
}

// owned returns the active pods controlled by the RC.
func (e *env) owned(rc *corev1.ReplicationController) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range e.pods.Items() {
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.UID == rc.UID && controller.IsPodActive(p) {
			out = append(out, p)
		}
	}
	return out
}

func (e *env) setReady(p *corev1.Pod, ready bool) {
	e.tb.Helper()
	cur, ok := e.pods.Get(p.Namespace, p.Name)
	if !ok {
		return
	}
	next := cur.DeepCopy()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	next.Status.Phase = corev1.PodRunning
	if next.Spec.NodeName == "" {
		next.Spec.NodeName = "node-1"
	}
	next.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(time.Now())}}
	if _, err := e.pods.Update(next); err != nil {
		e.tb.Fatal(err)
	}
}

func newRC(name string, replicas int32) *corev1.ReplicationController {
	lbl := map[string]string{"app": name}
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("rc-uid-" + name), Generation: 1},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: &replicas,
			Selector: lbl,
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, "tier": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

// newPod makes a pod, controlled by owner (of the kind's kind) unless nil.
func (k kindCase) newPod(name string, lbl map[string]string, owner *corev1.ReplicationController) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: lbl,
		CreationTimestamp: metav1.NewTime(time.Now())}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*controller.NewControllerRef(owner, k.gvk)}
	}
	return p
}

// rcFailureCondition returns the index of an RC's ReplicaFailure
// condition, or -1.
func rcFailureCondition(conds []corev1.ReplicationControllerCondition) int {
	for i, c := range conds {
		if c.Type == corev1.ReplicationControllerReplicaFailure {
			return i
		}
	}
	return -1
}
