package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const ns = "default"

// fakeAPI stands in for the API server behind the manager: pod writes go
// to the pods Source and RC status writes to the RCs Source, so the
// informers observe them as they would a real server's.
type fakeAPI struct {
	pods *cachetest.Source[*corev1.Pod]
	rcs  *cachetest.Source[*corev1.ReplicationController]

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

func (f *fakeAPI) Get(_ context.Context, namespace, name string) (*corev1.ReplicationController, error) {
	f.mu.Lock()
	get := f.rcGet
	f.mu.Unlock()
	if get != nil {
		return get(namespace, name)
	}
	rc, ok := f.rcs.Get(namespace, name)
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("replicationcontrollers"), name)
	}
	return rc.DeepCopy(), nil
}

// UpdateStatus writes only status, with rc's resourceVersion as
// precondition, like the status subresource.
func (f *fakeAPI) UpdateStatus(_ context.Context, rc *corev1.ReplicationController) (*corev1.ReplicationController, error) {
	f.mu.Lock()
	f.statusCalls++
	f.mu.Unlock()
	cur, ok := f.rcs.Get(rc.Namespace, rc.Name)
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("replicationcontrollers"), rc.Name)
	}
	if rc.ResourceVersion != cur.ResourceVersion {
		return nil, apierrors.NewConflict(corev1.Resource("replicationcontrollers"), rc.Name, errors.New("stale resourceVersion"))
	}
	next := cur.DeepCopy()
	next.Status = rc.Status
	return f.rcs.Update(next)
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

// env is a manager over informers fed from cachetest Sources.
type env struct {
	tb      testing.TB
	api     *fakeAPI
	pods    *cachetest.Source[*corev1.Pod]
	rcs     *cachetest.Source[*corev1.ReplicationController]
	factory *informers.SharedInformerFactory
	m       *Manager
	cancel  context.CancelFunc
	done    chan error
}

// newEnv builds the manager and starts the informers; run starts the
// workers. Tests call it inside a synctest bubble; benchmarks outside.
func newEnv(t testing.TB, opts Options) *env {
	t.Helper()
	pods := cachetest.New[*corev1.Pod]()
	rcs := cachetest.New[*corev1.ReplicationController]()
	api := &fakeAPI{pods: pods, rcs: rcs}
	f := informers.NewSharedInformerFactory(mapSource{
		corev1.SchemeGroupVersion.WithResource("pods"):                   cache.Erase[*corev1.Pod](pods),
		corev1.SchemeGroupVersion.WithResource("replicationcontrollers"): cache.Erase[*corev1.ReplicationController](rcs),
	}, informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
	if opts.Controller.Logger == nil {
		opts.Controller.Logger = quiet
	}
	if opts.Controller.Workers == 0 {
		opts.Controller.Workers = 1
	}
	// The workers start at the first poll after the handlers, registered
	// by Run, have been replayed the caches: a millisecond of the bubble's
	// clock after run.
	opts.Controller.CacheSyncPollInterval = time.Millisecond
	m, err := New(f.Pods(), f.ReplicationControllers(), api,
		&controller.RealPodControl{Client: api, Logger: quiet}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	e := &env{tb: t, api: api, pods: pods, rcs: rcs, factory: f, m: m, cancel: cancel}
	f.Start(ctx)
	t.Cleanup(e.stop)
	return e
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
	_, err1 := e.factory.Pods().AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.Pod]{
		AddFunc: e.m.addPod, UpdateFunc: e.m.updatePod, DeleteFunc: e.m.deletePod,
	})
	_, err2 := e.factory.ReplicationControllers().AddEventHandler(cache.ResourceEventHandlerFuncs[*corev1.ReplicationController]{
		AddFunc: e.m.addRC, UpdateFunc: e.m.updateRC, DeleteFunc: e.m.deleteRC,
	})
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

func newPod(name string, lbl map[string]string, owner *corev1.ReplicationController) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: lbl,
		CreationTimestamp: metav1.NewTime(time.Now())}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*controller.NewControllerRef(owner, controllerKind)}
	}
	return p
}
