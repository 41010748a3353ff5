package disruption

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// now is the tests' clock.
var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// api records the writes of the controller and answers scale reads from
// scales (by name), as the server would.
type api struct {
	mu       sync.Mutex
	statuses []policyv1.PodDisruptionBudgetStatus
	pods     []*corev1.Pod
	scales   map[string]int32
}

func (a *api) UpdatePDBStatus(_ context.Context, pdb *policyv1.PodDisruptionBudget) (*policyv1.PodDisruptionBudget, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.statuses = append(a.statuses, pdb.Status)
	return pdb, nil
}

func (a *api) UpdatePodStatus(_ context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pods = append(a.pods, pod)
	return pod, nil
}

func (a *api) ResourceFor(_ context.Context, gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	if gvk.Kind == "Unknown" {
		return schema.GroupVersionResource{}, &apimeta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	return gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s"), nil
}

func (a *api) GetScale(_ context.Context, gvr schema.GroupVersionResource, _, name string) (*autoscalingv1.Scale, error) {
	n, ok := a.scales[name]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	return &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}, nil
}

func (a *api) ServesScale(context.Context, schema.GroupVersionResource) (bool, error) {
	return true, nil
}

// recorder keeps the events.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(_ runtime.Object, eventType, reason, messageFmt string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventType+" "+reason+": "+fmt.Sprintf(messageFmt, args...))
}

// objects are what the informers hold.
type objects struct {
	pods []*corev1.Pod
	rcs  []*corev1.ReplicationController
	rss  []*appsv1.ReplicaSet
	ds   []*appsv1.Deployment
	sss  []*appsv1.StatefulSet
}

func informer[T cache.Object](objs []T) cache.Informer[T] {
	inf := cache.NewSharedIndexInformer[T](cachetest.New[T](), cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{Logger: quiet}})
	for _, o := range objs {
		if err := inf.GetIndexer().Add(o); err != nil {
			panic(err)
		}
	}
	return inf
}

func newController(t *testing.T, objs objects, a *api, rec *recorder) *Controller {
	t.Helper()
	dc, err := New(Informers{
		PDBs:                   informer[*policyv1.PodDisruptionBudget](nil),
		Pods:                   informer(objs.pods),
		ReplicationControllers: informer(objs.rcs),
		ReplicaSets:            informer(objs.rss),
		Deployments:            informer(objs.ds),
		StatefulSets:           informer(objs.sss),
	}, a, Options{Recorder: rec, Now: func() time.Time { return now }, Controller: controller.Options{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

func ref(apiVersion, kind, name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(name), Controller: new(true)}
}

// pod is a pod labelled app=web, Ready unless notReady, controlled by
// owner when it has a name.
func pod(name string, owner metav1.OwnerReference, edit ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "web"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if owner.Name != "" {
		p.OwnerReferences = []metav1.OwnerReference{owner}
	}
	for _, e := range edit {
		e(p)
	}
	return p
}

func notReady(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
func deleting(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} }

func pdb(edit func(*policyv1.PodDisruptionBudgetSpec), status ...func(*policyv1.PodDisruptionBudgetStatus)) *policyv1.PodDisruptionBudget {
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 2},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	edit(&p.Spec)
	for _, s := range status {
		s(&p.Status)
	}
	return p
}

func minAvailable(v intstr.IntOrString) func(*policyv1.PodDisruptionBudgetSpec) {
	return func(s *policyv1.PodDisruptionBudgetSpec) { s.MinAvailable = &v }
}

func maxUnavailable(v intstr.IntOrString) func(*policyv1.PodDisruptionBudgetSpec) {
	return func(s *policyv1.PodDisruptionBudgetSpec) { s.MaxUnavailable = &v }
}

var (
	rsRef     = ref("apps/v1", "ReplicaSet", "rs")
	rsOfDep   = ref("apps/v1", "ReplicaSet", "rs-of-dep")
	ssRef     = ref("apps/v1", "StatefulSet", "ss")
	rcRef     = ref("v1", "ReplicationController", "rc")
	widgetRef = ref("example.com/v1", "Widget", "widget")
)

func workloads() objects {
	return objects{
		rss: []*appsv1.ReplicaSet{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs", UID: "rs"}, Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(4))}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs-of-dep", UID: "rs-of-dep", OwnerReferences: []metav1.OwnerReference{ref("apps/v1", "Deployment", "dep")}},
				Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(1))}},
		},
		ds:  []*appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dep", UID: "dep"}, Spec: appsv1.DeploymentSpec{Replicas: new(int32(6))}}},
		sss: []*appsv1.StatefulSet{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ss", UID: "ss"}, Spec: appsv1.StatefulSetSpec{Replicas: new(int32(5))}}},
		rcs: []*corev1.ReplicationController{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rc", UID: "rc"}, Spec: corev1.ReplicationControllerSpec{Replicas: new(int32(3))}}},
	}
}

func TestStatus(t *testing.T) {
	recent := metav1.Time{Time: now.Add(-time.Minute)}
	old := metav1.Time{Time: now.Add(-3 * time.Minute)}
	tests := []struct {
		name    string
		pdb     *policyv1.PodDisruptionBudget
		pods    []*corev1.Pod
		want    policyv1.PodDisruptionBudgetStatus
		reason  string // of the DisruptionAllowed condition
		events  []string
		recheck time.Duration
		err     bool
	}{{
		name:   "minAvailable int counts the pods there are",
		pdb:    pdb(minAvailable(intstr.FromInt32(2))),
		pods:   []*corev1.Pod{pod("a", rsRef), pod("b", rsRef), pod("c", rsRef, notReady), pod("d", rsRef, deleting)},
		want:   policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 2, DesiredHealthy: 2, ExpectedPods: 4, DisruptionsAllowed: 0, ObservedGeneration: 2},
		reason: policyv1.InsufficientPodsReason,
	}, {
		name:   "minAvailable percent of a ReplicaSet's scale, rounded up",
		pdb:    pdb(minAvailable(intstr.FromString("50%"))),
		pods:   []*corev1.Pod{pod("a", rsRef), pod("b", rsRef), pod("c", rsRef)},
		want:   policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 4, DisruptionsAllowed: 1, ObservedGeneration: 2},
		reason: policyv1.SufficientPodsReason,
	}, {
		name:   "maxUnavailable of a Deployment's scale, through its ReplicaSet",
		pdb:    pdb(maxUnavailable(intstr.FromInt32(1))),
		pods:   []*corev1.Pod{pod("a", rsOfDep), pod("b", rsOfDep), pod("c", rsOfDep)},
		want:   policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 3, DesiredHealthy: 5, ExpectedPods: 6, DisruptionsAllowed: 0, ObservedGeneration: 2},
		reason: policyv1.InsufficientPodsReason,
	}, {
		name:   "maxUnavailable percent of a StatefulSet and a ReplicationController",
		pdb:    pdb(maxUnavailable(intstr.FromString("25%"))),
		pods:   []*corev1.Pod{pod("a", ssRef), pod("b", ssRef), pod("c", rcRef), pod("d", ssRef), pod("e", rcRef), pod("f", ssRef), pod("g", ssRef), pod("h", rcRef)},
		want:   policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 8, DesiredHealthy: 6, ExpectedPods: 8, DisruptionsAllowed: 2, ObservedGeneration: 2},
		reason: policyv1.SufficientPodsReason,
	}, {
		name:   "a controller with a scale subresource",
		pdb:    pdb(maxUnavailable(intstr.FromInt32(1))),
		pods:   []*corev1.Pod{pod("a", widgetRef), pod("b", widgetRef)},
		want:   policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 2, DesiredHealthy: 6, ExpectedPods: 7, DisruptionsAllowed: 0, ObservedGeneration: 2},
		reason: policyv1.InsufficientPodsReason,
	}, {
		name:   "no pods",
		pdb:    pdb(minAvailable(intstr.FromInt32(1))),
		want:   policyv1.PodDisruptionBudgetStatus{DesiredHealthy: 1, ObservedGeneration: 2},
		reason: policyv1.InsufficientPodsReason,
		events: []string{"Normal NoPods: No matching pods found"},
	}, {
		name:   "unmanaged pods under a percentage",
		pdb:    pdb(maxUnavailable(intstr.FromString("50%"))),
		pods:   []*corev1.Pod{pod("a", metav1.OwnerReference{}), pod("b", rsRef)},
		want:   policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 2, DesiredHealthy: 2, ExpectedPods: 4, DisruptionsAllowed: 0, ObservedGeneration: 2},
		reason: policyv1.InsufficientPodsReason,
		events: []string{`Warning UnmanagedPods: Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:map[string]string{app: web,},MatchExpressions:[]LabelSelectorRequirement{},}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set ".spec.minAvailable" field of the PDB to an integer value.`},
	}, {
		name: "a controller that is not there fails the sync safe",
		pdb: pdb(maxUnavailable(intstr.FromInt32(1)), func(s *policyv1.PodDisruptionBudgetStatus) {
			s.DisruptionsAllowed, s.ObservedGeneration = 3, 1
		}),
		pods:   []*corev1.Pod{pod("a", ref("apps/v1", "ReplicaSet", "gone"))},
		want:   policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1},
		reason: policyv1.SyncFailedReason,
		events: []string{`Warning CalculateExpectedPodCountFailed: Failed to calculate the number of expected pods: found no controllers for pod "a"`},
	}, {
		name: "evicted pods count as gone until the timeout, then are dropped",
		pdb: pdb(minAvailable(intstr.FromInt32(1)), func(s *policyv1.PodDisruptionBudgetStatus) {
			s.DisruptedPods = map[string]metav1.Time{"a": recent, "b": old, "gone": recent}
		}),
		pods:    []*corev1.Pod{pod("a", rsRef), pod("b", rsRef), pod("c", rsRef)},
		want:    policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 3, DisruptionsAllowed: 1, ObservedGeneration: 2, DisruptedPods: map[string]metav1.Time{"a": recent}},
		reason:  policyv1.SufficientPodsReason,
		events:  []string{"Warning NotDeleted: Pod was expected by PDB ns/ns to be deleted but it wasn't"},
		recheck: time.Minute,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := workloads()
			objs.pods = tt.pods
			a := &api{scales: map[string]int32{"widget": 7}}
			rec := &recorder{}
			dc := newController(t, objs, a, rec)
			if err := dc.inf.PDBs.GetIndexer().Add(tt.pdb); err != nil {
				t.Fatal(err)
			}
			res, err := dc.sync(t.Context(), key{namespace: "ns", name: "web"})
			if (err != nil) != tt.err {
				t.Fatalf("sync: %v, want an error: %v", err, tt.err)
			}
			if res.RequeueAfter != tt.recheck {
				t.Errorf("requeued after %v, want %v", res.RequeueAfter, tt.recheck)
			}
			if len(a.statuses) != 1 {
				t.Fatalf("%d status writes, want 1", len(a.statuses))
			}
			got := a.statuses[0]
			c := apimeta.FindStatusCondition(got.Conditions, policyv1.DisruptionAllowedCondition)
			if c == nil || c.Reason != tt.reason {
				t.Errorf("condition %+v, want reason %s", c, tt.reason)
			}
			got.Conditions = nil
			if tt.want.DisruptedPods == nil && !tt.err {
				tt.want.DisruptedPods = map[string]metav1.Time{}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("status\n got %+v\nwant %+v", got, tt.want)
			}
			if fmt.Sprint(rec.events) != fmt.Sprint(tt.events) {
				t.Errorf("events\n got %q\nwant %q", rec.events, tt.events)
			}
		})
	}
}

// A status already counted is not written again.
func TestStatusUnchanged(t *testing.T) {
	a := &api{}
	dc := newController(t, objects{pods: []*corev1.Pod{pod("a", rsRef), pod("b", rsRef)}}, a, &recorder{})
	p := pdb(minAvailable(intstr.FromInt32(1)))
	if err := dc.inf.PDBs.GetIndexer().Add(p); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.sync(t.Context(), key{namespace: "ns", name: "web"}); err != nil {
		t.Fatal(err)
	}
	p = p.DeepCopy()
	p.Status = a.statuses[0]
	if err := dc.inf.PDBs.GetIndexer().Update(p); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.sync(t.Context(), key{namespace: "ns", name: "web"}); err != nil {
		t.Fatal(err)
	}
	if len(a.statuses) != 1 {
		t.Errorf("%d status writes, want 1", len(a.statuses))
	}
}

// A DisruptionTarget condition left True on a pod not deleted is set to
// False once stale, and not before; a kubelet's, or a terminal pod's, is
// left alone.
func TestStaleDisruptionTarget(t *testing.T) {
	cond := func(reason string, age time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: reason, LastTransitionTime: metav1.Time{Time: now.Add(-age)}})
		}
	}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		cleared bool
		after   time.Duration
	}{
		{name: "stale", pod: pod("a", rsRef, cond("EvictionByEvictionAPI", 3*time.Minute)), cleared: true},
		{name: "not yet", pod: pod("a", rsRef, cond("EvictionByEvictionAPI", 30*time.Second)), after: 90 * time.Second},
		{name: "kubelet's", pod: pod("a", rsRef, cond(corev1.PodReasonTerminationByKubelet, time.Hour))},
		{name: "being deleted", pod: pod("a", rsRef, cond("EvictionByEvictionAPI", time.Hour), deleting)},
		{name: "terminal", pod: pod("a", rsRef, cond("EvictionByEvictionAPI", time.Hour), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &api{}
			dc := newController(t, objects{pods: []*corev1.Pod{tt.pod}}, a, &recorder{})
			res, err := dc.sync(t.Context(), key{pod: true, namespace: "ns", name: "a"})
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != tt.after {
				t.Errorf("requeued after %v, want %v", res.RequeueAfter, tt.after)
			}
			if !tt.cleared {
				if len(a.pods) != 0 {
					t.Errorf("pod written: %+v", a.pods[0].Status.Conditions)
				}
				return
			}
			if len(a.pods) != 1 {
				t.Fatalf("%d pod writes, want 1", len(a.pods))
			}
			for _, c := range a.pods[0].Status.Conditions {
				if c.Type == corev1.DisruptionTarget && c.Status != corev1.ConditionFalse {
					t.Errorf("DisruptionTarget still %s", c.Status)
				}
			}
		})
	}
}

// A pod two budgets select is reported once, as kube does.
func TestMultipleBudgets(t *testing.T) {
	rec := &recorder{}
	dc := newController(t, objects{}, &api{}, rec)
	for _, name := range []string{"b", "a"} {
		p := pdb(minAvailable(intstr.FromInt32(1)))
		p.Name = name
		if err := dc.inf.PDBs.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	got := dc.budgetFor(pod("x", rsRef))
	if got == nil || got.Name != "a" {
		t.Fatalf("budget %v, want a", got)
	}
	want := `Warning MultiplePodDisruptionBudgets: Pod "ns"/"x" matches multiple PodDisruptionBudgets.  Chose "a" arbitrarily.`
	if len(rec.events) != 1 || rec.events[0] != want {
		t.Errorf("events %q, want %q", rec.events, want)
	}
}
