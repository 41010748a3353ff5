package deployment

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/kubelog"
)

func TestMain(m *testing.M) {
	kubelog.ToStderr()
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const ns = "ns"

// fakeAPI is an API server in memory over the fake informers: each write
// is checked as the server would (resourceVersion preconditions, names
// taken), applied to the informer's cache, and recorded.
type fakeAPI struct {
	mu      sync.Mutex
	ds      *cachetest.Informer[*appsv1.Deployment]
	rss     *cachetest.Informer[*appsv1.ReplicaSet]
	rv      int
	created int
	actions []string
	// failCreate, when set, fails ReplicaSet creations.
	failCreate error
}

func (f *fakeAPI) record(format string, args ...any) {
	f.actions = append(f.actions, fmt.Sprintf(format, args...))
}

// take returns the actions recorded since the last take.
func (f *fakeAPI) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.actions
	f.actions = nil
	return a
}

func (f *fakeAPI) nextRV() string {
	f.rv++
	return strconv.Itoa(f.rv)
}

func (f *fakeAPI) GetDeployment(_ context.Context, namespace, name string) (*appsv1.Deployment, error) {
	d, ok, _ := f.ds.GetIndexer().GetByKey(namespace + "/" + name)
	if !ok {
		return nil, apierrors.NewNotFound(appsv1.Resource("deployments"), name)
	}
	return d.DeepCopy(), nil
}

func (f *fakeAPI) deployment(d *appsv1.Deployment) (*appsv1.Deployment, error) {
	cur, ok, _ := f.ds.GetIndexer().GetByKey(d.Namespace + "/" + d.Name)
	if !ok {
		return nil, apierrors.NewNotFound(appsv1.Resource("deployments"), d.Name)
	}
	if cur.ResourceVersion != d.ResourceVersion {
		return nil, apierrors.NewConflict(appsv1.Resource("deployments"), d.Name, fmt.Errorf("resourceVersion %s, have %s", d.ResourceVersion, cur.ResourceVersion))
	}
	return cur, nil
}

func (f *fakeAPI) UpdateDeployment(_ context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, err := f.deployment(d)
	if err != nil {
		return nil, err
	}
	out := d.DeepCopy()
	out.Status = cur.Status
	if !equality.Semantic.DeepEqual(cur.Spec, out.Spec) {
		out.Generation++
	}
	out.ResourceVersion = f.nextRV()
	f.record("update deployment %s", d.Name)
	_ = f.ds.Update(out)
	return out.DeepCopy(), nil
}

// UpdateDeploymentStatus takes status and annotations, as kube's status
// strategy does.
func (f *fakeAPI) UpdateDeploymentStatus(_ context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, err := f.deployment(d)
	if err != nil {
		return nil, err
	}
	out := cur.DeepCopy()
	out.Status = *d.Status.DeepCopy()
	out.Annotations = d.DeepCopy().Annotations
	out.ResourceVersion = f.nextRV()
	f.record("status deployment %s", d.Name)
	_ = f.ds.Update(out)
	return out.DeepCopy(), nil
}

var baseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (f *fakeAPI) CreateReplicaSet(_ context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failCreate != nil {
		return nil, f.failCreate
	}
	if _, ok, _ := f.rss.GetIndexer().GetByKey(rs.Namespace + "/" + rs.Name); ok {
		return nil, apierrors.NewAlreadyExists(appsv1.Resource("replicasets"), rs.Name)
	}
	out := rs.DeepCopy()
	f.created++
	out.UID = types.UID("uid-" + rs.Name)
	out.Generation = 1
	out.CreationTimestamp = metav1.NewTime(baseTime.Add(time.Duration(f.created) * time.Second))
	out.ResourceVersion = f.nextRV()
	f.record("create rs %s replicas=%d", rs.Name, rsReplicas(rs))
	_ = f.rss.Add(out)
	return out.DeepCopy(), nil
}

func (f *fakeAPI) UpdateReplicaSet(_ context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok, _ := f.rss.GetIndexer().GetByKey(rs.Namespace + "/" + rs.Name)
	if !ok {
		return nil, apierrors.NewNotFound(appsv1.Resource("replicasets"), rs.Name)
	}
	if cur.ResourceVersion != rs.ResourceVersion {
		return nil, apierrors.NewConflict(appsv1.Resource("replicasets"), rs.Name, fmt.Errorf("stale"))
	}
	out := rs.DeepCopy()
	out.Status = cur.Status
	if !equality.Semantic.DeepEqual(cur.Spec, out.Spec) {
		out.Generation++
	}
	out.ResourceVersion = f.nextRV()
	if rsReplicas(cur) != rsReplicas(out) {
		f.record("scale rs %s %d->%d", rs.Name, rsReplicas(cur), rsReplicas(out))
	} else {
		f.record("update rs %s", rs.Name)
	}
	_ = f.rss.Update(out)
	return out.DeepCopy(), nil
}

// ScaleReplicaSet scales as the JSON patch the REST client sends does:
// refused with a conflict when the ReplicaSet was replaced or its
// generation moved, whatever its status.
func (f *fakeAPI) ScaleReplicaSet(_ context.Context, rs *appsv1.ReplicaSet, replicas int32, annotations map[string]string) (*appsv1.ReplicaSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok, _ := f.rss.GetIndexer().GetByKey(rs.Namespace + "/" + rs.Name)
	if !ok {
		return nil, apierrors.NewNotFound(appsv1.Resource("replicasets"), rs.Name)
	}
	if cur.UID != rs.UID || cur.Generation != rs.Generation {
		return nil, apierrors.NewConflict(appsv1.Resource("replicasets"), rs.Name, fmt.Errorf("test failed"))
	}
	out := cur.DeepCopy()
	if rsReplicas(cur) != replicas {
		out.Generation++
		f.record("scale rs %s %d->%d", rs.Name, rsReplicas(cur), replicas)
	} else {
		f.record("update rs %s", rs.Name)
	}
	out.Spec.Replicas = &replicas
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	maps.Copy(out.Annotations, annotations)
	out.ResourceVersion = f.nextRV()
	_ = f.rss.Update(out)
	return out.DeepCopy(), nil
}

func (f *fakeAPI) PatchReplicaSet(_ context.Context, namespace, name string, patch []byte) (*appsv1.ReplicaSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok, _ := f.rss.GetIndexer().GetByKey(namespace + "/" + name)
	if !ok {
		return nil, apierrors.NewNotFound(appsv1.Resource("replicasets"), name)
	}
	var p struct {
		Metadata struct {
			OwnerReferences []map[string]any `json:"ownerReferences"`
			UID             types.UID        `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if p.Metadata.UID != cur.UID {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}, name, nil)
	}
	out := cur.DeepCopy()
	for _, ref := range p.Metadata.OwnerReferences {
		if ref["$patch"] == "delete" {
			out.OwnerReferences = slices.DeleteFunc(out.OwnerReferences, func(o metav1.OwnerReference) bool { return string(o.UID) == ref["uid"] })
			f.record("release rs %s", name)
			continue
		}
		b, _ := json.Marshal(ref)
		var o metav1.OwnerReference
		_ = json.Unmarshal(b, &o)
		out.OwnerReferences = append(out.OwnerReferences, o)
		f.record("adopt rs %s", name)
	}
	out.ResourceVersion = f.nextRV()
	_ = f.rss.Update(out)
	return out.DeepCopy(), nil
}

func (f *fakeAPI) DeleteReplicaSet(_ context.Context, namespace, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok, _ := f.rss.GetIndexer().GetByKey(namespace + "/" + name)
	if !ok {
		return apierrors.NewNotFound(appsv1.Resource("replicasets"), name)
	}
	f.record("delete rs %s", name)
	return f.rss.Delete(cur, false)
}

// events records the controller's events as "Type Reason message".
type events struct {
	mu  sync.Mutex
	all []string
}

func (e *events) Eventf(_ runtime.Object, eventType, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, eventType+" "+reason+" "+fmt.Sprintf(format, args...))
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.all
	e.all = nil
	return a
}

// harness is a controller over fake informers and a fakeAPI, synced by
// the test (no workers), with the ReplicaSet controller played by settle.
type harness struct {
	t      *testing.T
	c      *Controller
	api    *fakeAPI
	events *events
	pods   *cachetest.Informer[*corev1.Pod]
}

func newHarness(t *testing.T, d *appsv1.Deployment, rss ...*appsv1.ReplicaSet) *harness {
	t.Helper()
	api := &fakeAPI{ds: cachetest.NewInformer(d), rss: cachetest.NewInformer(rss...)}
	for _, rs := range rss {
		api.created++
		if rs.CreationTimestamp.IsZero() {
			rs.CreationTimestamp = metav1.NewTime(baseTime.Add(time.Duration(api.created) * time.Second))
		}
	}
	ev := &events{}
	pods := cachetest.NewInformer[*corev1.Pod]()
	c, err := New(api.ds, api.rss, pods, api, Options{Recorder: ev, Controller: controller.Options{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, c: c, api: api, events: ev, pods: pods}
}

// sync syncs the Deployment once; a failure fails the test.
func (h *harness) sync() controller.Result {
	h.t.Helper()
	res, err := h.c.sync(context.Background(), ns+"/"+"web")
	if err != nil {
		h.t.Fatalf("sync: %v", err)
	}
	return res
}

func (h *harness) deployment() *appsv1.Deployment {
	h.t.Helper()
	d, ok, _ := h.api.ds.GetIndexer().GetByKey(ns + "/web")
	if !ok {
		h.t.Fatal("deployment gone")
	}
	return d
}

// update changes the Deployment's spec as a user would (generation up).
func (h *harness) update(change func(d *appsv1.Deployment)) {
	h.t.Helper()
	d := h.deployment().DeepCopy()
	change(d)
	d.Generation++
	h.api.mu.Lock()
	d.ResourceVersion = h.api.nextRV()
	h.api.mu.Unlock()
	if err := h.api.ds.Update(d); err != nil {
		h.t.Fatal(err)
	}
}

// rsList returns the cached ReplicaSets, oldest first.
func (h *harness) rsList() []*appsv1.ReplicaSet {
	l := h.api.rss.GetIndexer().List()
	slices.SortFunc(l, byCreation)
	return l
}

func (h *harness) rs(name string) *appsv1.ReplicaSet {
	h.t.Helper()
	rs, ok, _ := h.api.rss.GetIndexer().GetByKey(ns + "/" + name)
	if !ok {
		h.t.Fatalf("no replica set %s", name)
	}
	return rs
}

// setStatus plays the ReplicaSet controller for one ReplicaSet: its
// status shows replicas pods of which available are available (and
// ready).
func (h *harness) setStatus(name string, replicas, available int32) {
	h.t.Helper()
	rs := h.rs(name).DeepCopy()
	zero := int32(0)
	rs.Status = appsv1.ReplicaSetStatus{Replicas: replicas, ReadyReplicas: available, AvailableReplicas: available,
		FullyLabeledReplicas: replicas, ObservedGeneration: rs.Generation, TerminatingReplicas: &zero, Conditions: rs.Status.Conditions}
	h.api.mu.Lock()
	rs.ResourceVersion = h.api.nextRV()
	h.api.mu.Unlock()
	if err := h.api.rss.Update(rs); err != nil {
		h.t.Fatal(err)
	}
}

// settle plays a ReplicaSet controller whose pods start and become
// available at once: every ReplicaSet's status shows its spec.
func (h *harness) settle() {
	for _, rs := range h.rsList() {
		h.setStatus(rs.Name, rsReplicas(rs), rsReplicas(rs))
	}
}

// sizes describes the ReplicaSets, oldest first, as "name=spec/available".
func (h *harness) sizes() string {
	var parts []string
	for _, rs := range h.rsList() {
		parts = append(parts, fmt.Sprintf("%s=%d/%d", rs.Name, rsReplicas(rs), rs.Status.AvailableReplicas))
	}
	return strings.Join(parts, " ")
}

func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
}

// newDeployment is Deployment ns/web of replicas running image, rolling
// with surge and unavailable, as the API server would have defaulted it.
func newDeployment(replicas int32, image string, surge, unavailable intstr.IntOrString) *appsv1.Deployment {
	pds, rhl := int32(600), int32(10)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: "uid-web", Generation: 1, ResourceVersion: "1"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: template(image),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}},
			ProgressDeadlineSeconds: &pds,
			RevisionHistoryLimit:    &rhl,
		},
	}
}

// rsName is the name the controller gives d's ReplicaSet of image.
func rsName(image string) string {
	t := template(image)
	return replicaSetName("web", PodTemplateHash(&t, nil))
}
