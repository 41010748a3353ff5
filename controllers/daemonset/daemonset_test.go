package daemonset

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	"k8s.io/kubernetes/pkg/controller/daemon"
	"k8s.io/kubernetes/pkg/controller/daemon/util"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var (
	setsResource      = schema.GroupResource{Group: "apps", Resource: "daemonsets"}
	podsResource      = schema.GroupResource{Resource: "pods"}
	nodesResource     = schema.GroupResource{Resource: "nodes"}
	revisionsResource = schema.GroupResource{Group: "apps", Resource: "controllerrevisions"}
)

// api applies the controller's writes to cachetest sources as the API
// server would (generateName, a deleted pod marked terminating until the
// test's kubelet lets it go), and keeps its events.
type api struct {
	mu        sync.Mutex
	sets      *cachetest.Source[*appsv1.DaemonSet]
	pods      *cachetest.Source[*corev1.Pod]
	nodes     *cachetest.Source[*corev1.Node]
	revisions *cachetest.Source[*appsv1.ControllerRevision]
	events    []string
	serial    int
}

var _ Client = (*api)(nil)

// recorded makes a write as the API client would: it tells the sync's
// stale-read protection what the write returned.
func recorded[T cache.Object](ctx context.Context, gr schema.GroupResource, obj T, write func(T) (T, error)) (T, error) {
	out, err := write(obj)
	if err == nil {
		client.RecordWrite(ctx, gr, out)
	}
	return out, err
}

func (a *api) next() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.serial++
	return a.serial
}

func (a *api) GetDaemonSet(_ context.Context, ns, name string) (*appsv1.DaemonSet, error) {
	s, ok := a.sets.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(setsResource, name)
	}
	return s.DeepCopy(), nil
}

func (a *api) UpdateDaemonSetStatus(ctx context.Context, ds *appsv1.DaemonSet) (*appsv1.DaemonSet, error) {
	cur, ok := a.sets.Get(ds.Namespace, ds.Name)
	if !ok {
		return nil, apierrors.NewNotFound(setsResource, ds.Name)
	}
	next := cur.DeepCopy()
	next.Status = *ds.Status.DeepCopy()
	next.ResourceVersion = ds.ResourceVersion
	return recorded(ctx, setsResource, next, a.sets.Update)
}

func (a *api) CreatePod(ctx context.Context, ns string, pod *corev1.Pod, _ metav1.CreateOptions) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	n := a.next()
	pod.Namespace = ns
	pod.Name = pod.GenerateName + strconv.Itoa(n)
	pod.UID = types.UID(fmt.Sprintf("uid-pod-%d", n))
	pod.CreationTimestamp = metav1.Now()
	pod.Status.Phase = corev1.PodPending
	return recorded(ctx, podsResource, pod, a.pods.Create)
}

// DeletePod marks the pod terminating, as a graceful deletion does.
func (a *api) DeletePod(ctx context.Context, ns, name string, _ metav1.DeleteOptions) error {
	cur, ok := a.pods.Get(ns, name)
	if !ok {
		return apierrors.NewNotFound(podsResource, name)
	}
	if cur.DeletionTimestamp != nil {
		return nil
	}
	next := cur.DeepCopy()
	next.DeletionTimestamp = new(metav1.Now())
	_, err := recorded(ctx, podsResource, next, a.pods.Update)
	return err
}

func (a *api) PatchPod(ctx context.Context, ns, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions) (*corev1.Pod, error) {
	cur, ok := a.pods.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	next, err := patched(cur, pt, data, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	return recorded(ctx, podsResource, next, a.pods.Update)
}

func (a *api) GetRevision(_ context.Context, ns, name string) (*appsv1.ControllerRevision, error) {
	r, ok := a.revisions.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(revisionsResource, name)
	}
	return r.DeepCopy(), nil
}

func (a *api) CreateRevision(ctx context.Context, rev *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	rev = rev.DeepCopy()
	rev.UID = types.UID(fmt.Sprintf("uid-rev-%d", a.next()))
	rev.CreationTimestamp = metav1.Now()
	return recorded(ctx, revisionsResource, rev, a.revisions.Create)
}

func (a *api) UpdateRevision(ctx context.Context, rev *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	return recorded(ctx, revisionsResource, rev.DeepCopy(), a.revisions.Update)
}

func (a *api) PatchRevision(ctx context.Context, ns, name string, pt types.PatchType, data []byte) (*appsv1.ControllerRevision, error) {
	cur, ok := a.revisions.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(revisionsResource, name)
	}
	next, err := patched(cur, pt, data, &appsv1.ControllerRevision{})
	if err != nil {
		return nil, err
	}
	return recorded(ctx, revisionsResource, next, a.revisions.Update)
}

func (a *api) DeleteRevision(_ context.Context, ns, name string) error {
	_, err := a.revisions.Delete(ns, name)
	return err
}

// patched applies a strategic merge or merge patch to a copy of cur.
func patched[T cache.Object](cur T, pt types.PatchType, data []byte, schemaOf T) (T, error) {
	var zero T
	orig, err := json.Marshal(cur)
	if err != nil {
		return zero, err
	}
	var b []byte
	switch pt {
	case types.StrategicMergePatchType, types.MergePatchType:
		// A merge patch of labels merges as a strategic one does.
		b, err = strategicpatch.StrategicMergePatch(orig, data, schemaOf)
	default:
		err = fmt.Errorf("patch type %s", pt)
	}
	if err != nil {
		return zero, err
	}
	if err := json.Unmarshal(b, schemaOf); err != nil {
		return zero, err
	}
	return schemaOf, nil
}

func (a *api) Eventf(_ runtime.Object, _, reason, format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, reason+": "+fmt.Sprintf(format, args...))
}

// takeEvents returns the reasons of the events since the last call.
func (a *api) takeEvents() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, e := range a.events {
		out = append(out, e[:strings.Index(e, ":")])
	}
	a.events = nil
	return out
}

// kubelet runs the pods as the scheduler and nodes would: a pending pod
// is bound to the node its affinity names, if it exists, and becomes
// Running and Ready, a terminating one goes. It reports whether it changed anything.
func (a *api) kubelet(t *testing.T) bool {
	t.Helper()
	changed := false
	for _, p := range a.pods.Items() {
		switch {
		case p.DeletionTimestamp != nil:
			if _, err := a.pods.Delete(p.Namespace, p.Name); err != nil {
				t.Fatal(err)
			}
		case p.Status.Phase == corev1.PodPending:
			node, err := util.GetTargetNodeName(p)
			if err != nil {
				t.Fatalf("pod %s: %v", p.Name, err)
			}
			if _, ok := a.nodes.Get("", node); !ok {
				// The scheduler binds no pod to a node that is gone.
				continue
			}
			next := p.DeepCopy()
			next.Spec.NodeName = node
			next.Status.Phase = corev1.PodRunning
			next.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
			if _, err := a.pods.Update(next); err != nil {
				t.Fatal(err)
			}
		default:
			continue
		}
		changed = true
	}
	return changed
}

// settle runs the kubelet and the controller until neither changes
// anything.
func (a *api) settle(t *testing.T) {
	t.Helper()
	synctest.Wait()
	for a.kubelet(t) {
		synctest.Wait()
	}
}

// placement returns "node@image" for each pod, sorted ("~" marks a
// terminating pod).
func (a *api) placement(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range a.pods.Items() {
		node, err := util.GetTargetNodeName(p)
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		n := node + "@" + p.Spec.Containers[0].Image
		if p.DeletionTimestamp != nil {
			n = "~" + n
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (a *api) set(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	s, ok := a.sets.Get("ns", "ds")
	if !ok {
		t.Fatal("daemonset gone")
	}
	return s
}

// edit changes the DaemonSet's spec as a user's update does: a new
// generation and, for a new template, a new template generation.
func (a *api) edit(t *testing.T, change func(*appsv1.DaemonSetSpec)) {
	t.Helper()
	s := a.set(t).DeepCopy()
	change(&s.Spec)
	s.Generation++
	gen, _ := strconv.Atoi(s.Annotations[appsv1.DeprecatedTemplateGeneration])
	s.Annotations[appsv1.DeprecatedTemplateGeneration] = strconv.Itoa(gen + 1)
	if _, err := a.sets.Update(s); err != nil {
		t.Fatal(err)
	}
}

// start starts the controller over an api holding ds and nodes, until the
// returned stop.
func start(t *testing.T, ds *appsv1.DaemonSet, nodes ...*corev1.Node) (*api, func()) {
	t.Helper()
	a := &api{
		sets:      cachetest.New(cachetest.WithResource[*appsv1.DaemonSet](setsResource)),
		pods:      cachetest.New(cachetest.WithResource[*corev1.Pod](podsResource)),
		nodes:     cachetest.New(cachetest.WithResource[*corev1.Node](nodesResource)),
		revisions: cachetest.New(cachetest.WithResource[*appsv1.ControllerRevision](revisionsResource)),
	}
	if _, err := a.sets.Create(ds); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if _, err := a.nodes.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(informers.SourceFunc(
		func(gvr schema.GroupVersionResource, _ string, _ func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
			switch gvr.Resource {
			case "daemonsets":
				return cache.Erase(a.sets)
			case "pods":
				return cache.Erase(a.pods)
			case "nodes":
				return cache.Erase(a.nodes)
			}
			return cache.Erase(a.revisions)
		}), informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
	c, err := New(Informers{
		DaemonSets:          informers.For[*appsv1.DaemonSet](factory),
		Pods:                informers.For[*corev1.Pod](factory),
		Nodes:               informers.For[*corev1.Node](factory),
		ControllerRevisions: informers.For[*appsv1.ControllerRevision](factory),
	}, a, Options{Recorder: a, Controller: controller.Options{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	factory.Start(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// The workers start once the caches have synced, which the
	// controller polls for.
	time.Sleep(time.Second)
	synctest.Wait()
	return a, func() { cancel(); wg.Wait(); factory.Shutdown() }
}

// newSet is a DaemonSet "ds" defaulted as the API server defaults it
// (kube's own defaulting, and the template generation its strategy
// sets), then changed by edit.
func newSet(edit func(*appsv1.DaemonSetSpec)) *appsv1.DaemonSet {
	labels := map[string]string{"app": "ds"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ds", UID: "uid-ds", Generation: 1, CreationTimestamp: metav1.Now(),
			Annotations: map[string]string{appsv1.DeprecatedTemplateGeneration: "1"}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "agent:1"}}},
			},
		},
	}
	if edit != nil {
		edit(&ds.Spec)
	}
	legacyscheme.Scheme.Default(ds)
	return ds
}

// node is a node called name with labels "k=v" and taints
// "key=value:Effect".
func node(name string, labels []string, taints ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		n.Labels[k] = v
	}
	for _, tt := range taints {
		kv, effect, _ := strings.Cut(tt, ":")
		k, v, _ := strings.Cut(kv, "=")
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	}
	return n
}

func image(img string) func(*appsv1.DaemonSetSpec) {
	return func(s *appsv1.DaemonSetSpec) { s.Template.Spec.Containers[0].Image = img }
}

// TestPlacement: a set runs one pod on each node its template selects and
// whose taints it tolerates (kube's default daemon tolerations included),
// and none on the others; the status counts them.
func TestPlacement(t *testing.T) {
	three := func(n3 *corev1.Node) []*corev1.Node {
		return []*corev1.Node{node("node-1", []string{"zone=a"}), node("node-2", []string{"zone=b"}), n3}
	}
	tests := []struct {
		name  string
		edit  func(*appsv1.DaemonSetSpec)
		nodes []*corev1.Node
		want  []string
	}{{
		name:  "a NoSchedule taint not tolerated",
		nodes: three(node("node-3", nil, "dedicated=db:NoSchedule")),
		want:  []string{"node-1@agent:1", "node-2@agent:1"},
	}, {
		name: "a NoSchedule taint tolerated",
		edit: func(s *appsv1.DaemonSetSpec) {
			s.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}}
		},
		nodes: three(node("node-3", nil, "dedicated=db:NoSchedule")),
		want:  []string{"node-1@agent:1", "node-2@agent:1", "node-3@agent:1"},
	}, {
		name:  "kube's default toleration of unschedulable and pressure taints",
		nodes: three(node("node-3", nil, corev1.TaintNodeUnschedulable+":NoSchedule", corev1.TaintNodeDiskPressure+":NoSchedule", corev1.TaintNodeNotReady+":NoExecute")),
		want:  []string{"node-1@agent:1", "node-2@agent:1", "node-3@agent:1"},
	}, {
		name:  "network-unavailable is tolerated by hostNetwork pods only",
		nodes: three(node("node-3", nil, corev1.TaintNodeNetworkUnavailable+":NoSchedule")),
		want:  []string{"node-1@agent:1", "node-2@agent:1"},
	}, {
		name:  "network-unavailable with hostNetwork",
		edit:  func(s *appsv1.DaemonSetSpec) { s.Template.Spec.HostNetwork = true },
		nodes: three(node("node-3", nil, corev1.TaintNodeNetworkUnavailable+":NoSchedule")),
		want:  []string{"node-1@agent:1", "node-2@agent:1", "node-3@agent:1"},
	}, {
		name:  "a nodeSelector",
		edit:  func(s *appsv1.DaemonSetSpec) { s.Template.Spec.NodeSelector = map[string]string{"zone": "b"} },
		nodes: three(node("node-3", []string{"zone=b"})),
		want:  []string{"node-2@agent:1", "node-3@agent:1"},
	}, {
		name: "a required node affinity",
		edit: func(s *appsv1.DaemonSetSpec) {
			s.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}}}}},
			}}}
		},
		nodes: three(node("node-3", nil)),
		want:  []string{"node-2@agent:1", "node-3@agent:1"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, stop := start(t, newSet(tc.edit), tc.nodes...)
				defer stop()
				a.settle(t)
				if got := a.placement(t); !slices.Equal(got, tc.want) {
					t.Fatalf("pods on %v, want %v", got, tc.want)
				}
				n := int32(len(tc.want))
				st := a.set(t).Status
				want := appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: n, CurrentNumberScheduled: n, NumberReady: n, NumberAvailable: n, UpdatedNumberScheduled: n}
				if !equality.Semantic.DeepEqual(st, want) {
					t.Errorf("status %+v, want %+v", st, want)
				}
				if got := a.takeEvents(); len(got) != len(tc.want) || slices.ContainsFunc(got, func(r string) bool { return r != controller.SuccessfulCreatePodReason }) {
					t.Errorf("events %v, want %d SuccessfulCreate", got, len(tc.want))
				}
			})
		})
	}
}

// TestPodShape: the pods are kube's: generateName "<set>-", the set as
// controller, the revision hash and template generation labels, the
// default tolerations, and a required node affinity on the node's name
// that replaces the template's own.
func TestPodShape(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ds := newSet(func(s *appsv1.DaemonSetSpec) {
			s.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpExists}}}},
			}}}
		})
		a, stop := start(t, ds, node("node-1", []string{"zone=a"}))
		defer stop()
		pods := a.pods.Items()
		if len(pods) != 1 {
			t.Fatalf("%d pods, want 1", len(pods))
		}
		p := pods[0]
		revs := a.revisions.Items()
		if len(revs) != 1 {
			t.Fatalf("%d revisions, want 1", len(revs))
		}
		hash := revs[0].Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
		if revs[0].Name != "ds-"+hash || revs[0].Revision != 1 || !metav1.IsControlledBy(revs[0], a.set(t)) {
			t.Errorf("revision %s (revision %d, owners %v), want ds-%s, 1, controlled by the set", revs[0].Name, revs[0].Revision, revs[0].OwnerReferences, hash)
		}
		if ok, err := daemon.Match(a.set(t), revs[0]); err != nil || !ok {
			t.Errorf("kube's daemon.Match of the revision: %v, %v", ok, err)
		}
		if p.GenerateName != "ds-" || !metav1.IsControlledBy(p, a.set(t)) {
			t.Errorf("pod generateName %q, owners %v", p.GenerateName, p.OwnerReferences)
		}
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] != hash || p.Labels[extensionsv1beta1.DaemonSetTemplateGenerationKey] != "1" || p.Labels["app"] != "ds" {
			t.Errorf("pod labels %v, want app, controller-revision-hash=%s, pod-template-generation=1", p.Labels, hash)
		}
		terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		wantTerms := []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}}}}
		if fmt.Sprint(terms) != fmt.Sprint(wantTerms) {
			t.Errorf("pod node affinity %v, want %v", terms, wantTerms)
		}
		var tolerated []string
		for _, tol := range p.Spec.Tolerations {
			tolerated = append(tolerated, tol.Key+":"+string(tol.Effect))
		}
		want := []string{
			corev1.TaintNodeNotReady + ":NoExecute", corev1.TaintNodeUnreachable + ":NoExecute",
			corev1.TaintNodeDiskPressure + ":NoSchedule", corev1.TaintNodeMemoryPressure + ":NoSchedule",
			corev1.TaintNodePIDPressure + ":NoSchedule", corev1.TaintNodeUnschedulable + ":NoSchedule",
		}
		if !slices.Equal(tolerated, want) {
			t.Errorf("pod tolerations %v, want %v", tolerated, want)
		}
	})
}

// TestNodeChanges: a node added gets a pod; a node tainted NoExecute
// loses its pod, while a NoSchedule taint added keeps the pod it has (it
// only counts as misscheduled); a node's heartbeat changes nothing.
func TestNodeChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, stop := start(t, newSet(nil), node("node-1", nil), node("node-2", nil))
		defer stop()
		a.settle(t)
		if _, err := a.nodes.Create(node("node-3", nil)); err != nil {
			t.Fatal(err)
		}
		a.settle(t)
		if got, want := a.placement(t), []string{"node-1@agent:1", "node-2@agent:1", "node-3@agent:1"}; !slices.Equal(got, want) {
			t.Fatalf("after node-3 joined: %v, want %v", got, want)
		}
		for name, taint := range map[string]string{"node-1": "evict=yes:NoExecute", "node-2": "keep=yes:NoSchedule"} {
			n, _ := a.nodes.Get("", name)
			n = n.DeepCopy()
			n.Spec.Taints = node(name, nil, taint).Spec.Taints
			if _, err := a.nodes.Update(n); err != nil {
				t.Fatal(err)
			}
		}
		a.settle(t)
		if got, want := a.placement(t), []string{"node-2@agent:1", "node-3@agent:1"}; !slices.Equal(got, want) {
			t.Fatalf("after the taints: %v, want %v", got, want)
		}
		st := a.set(t).Status
		if st.DesiredNumberScheduled != 1 || st.CurrentNumberScheduled != 1 || st.NumberMisscheduled != 1 || st.NumberAvailable != 1 || st.NumberUnavailable != 0 {
			t.Errorf("status %+v, want desired 1, current 1, misscheduled 1", st)
		}
		before := a.pods.Revision()
		n, _ := a.nodes.Get("", "node-3")
		n = n.DeepCopy()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		if _, err := a.nodes.Update(n); err != nil {
			t.Fatal(err)
		}
		a.settle(t)
		if a.pods.Revision() != before {
			t.Errorf("a heartbeat changed the pods")
		}
	})
}

// TestUpdateStrategies: a template change rolls the pods as the strategy
// says: RollingUpdate with maxUnavailable deletes that many old pods at a
// time and replaces them; with maxSurge it starts a new pod beside each
// old one and deletes the old one once the new one is available; OnDelete
// replaces only the pods deleted.
func TestUpdateStrategies(t *testing.T) {
	nodes := []*corev1.Node{node("node-1", nil), node("node-2", nil), node("node-3", nil)}
	tests := []struct {
		name     string
		strategy appsv1.DaemonSetUpdateStrategy
	}{{
		name: "RollingUpdate maxUnavailable 2",
		strategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{
			MaxUnavailable: new(intstr.FromInt32(2)), MaxSurge: new(intstr.FromInt32(0)),
		}},
	}, {
		name: "RollingUpdate maxSurge 1",
		strategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{
			MaxUnavailable: new(intstr.FromInt32(0)), MaxSurge: new(intstr.FromInt32(1)),
		}},
	}, {
		name:     "OnDelete",
		strategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, stop := start(t, newSet(func(s *appsv1.DaemonSetSpec) { s.UpdateStrategy = tc.strategy }), nodes...)
				defer stop()
				a.settle(t)
				a.takeEvents()
				a.edit(t, image("agent:2"))
				synctest.Wait()
				got := a.placement(t)
				old, fresh, terminating := 0, 0, 0
				for _, p := range got {
					switch {
					case strings.HasPrefix(p, "~"):
						terminating++
					case strings.HasSuffix(p, "@agent:2"):
						fresh++
					default:
						old++
					}
				}
				switch tc.strategy.Type {
				case appsv1.OnDeleteDaemonSetStrategyType:
					if old != 3 || fresh+terminating != 0 {
						t.Fatalf("OnDelete replaced pods on its own: %v", got)
					}
					p := a.pods.Items()[0]
					if err := a.DeletePod(t.Context(), p.Namespace, p.Name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					a.settle(t)
					got := a.placement(t)
					if n := len(slices.DeleteFunc(got, func(p string) bool { return !strings.HasSuffix(p, "@agent:2") })); n != 1 {
						t.Fatalf("OnDelete: %d new pods after one deletion, want 1: %v", n, a.placement(t))
					}
					return
				case appsv1.RollingUpdateDaemonSetStrategyType:
					if tc.strategy.RollingUpdate.MaxSurge.IntValue() > 0 {
						if old != 3 || fresh != 1 || terminating != 0 {
							t.Fatalf("surge step: %v, want the 3 old pods and 1 new", got)
						}
					} else if old != 1 || terminating != 2 || fresh != 0 {
						t.Fatalf("maxUnavailable step: %v, want 2 old pods deleted, 1 kept", got)
					}
				}
				a.settle(t)
				want := []string{"node-1@agent:2", "node-2@agent:2", "node-3@agent:2"}
				if got := a.placement(t); !slices.Equal(got, want) {
					t.Fatalf("after the roll: %v, want %v", got, want)
				}
				ds := a.set(t)
				if st := ds.Status; st.UpdatedNumberScheduled != 3 || st.NumberAvailable != 3 || st.ObservedGeneration != 2 {
					t.Errorf("status %+v, want 3 updated and available, generation 2", st)
				}
				if n := len(a.revisions.Items()); n != 2 {
					t.Errorf("%d revisions, want 2", n)
				}
				events := a.takeEvents()
				if c, d := count(events, controller.SuccessfulCreatePodReason), count(events, controller.SuccessfulDeletePodReason); c != 3 || d != 3 {
					t.Errorf("events %v, want 3 creations and 3 deletions", events)
				}
			})
		})
	}
}

func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// TestFailedPod: a failed daemon pod is deleted (a FailedDaemonPod event)
// and replaced; a node whose pods keep failing sees its deletions spaced
// by a backoff that doubles from a second.
func TestFailedPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, stop := start(t, newSet(nil), node("node-1", nil))
		defer stop()
		a.settle(t)
		a.takeEvents()
		fail := func() {
			t.Helper()
			p := a.pods.Items()[0].DeepCopy()
			p.Status.Phase = corev1.PodFailed
			if _, err := a.pods.Update(p); err != nil {
				t.Fatal(err)
			}
		}
		fail()
		a.settle(t)
		if got := a.takeEvents(); !slices.Equal(got, []string{FailedDaemonPodReason, controller.SuccessfulDeletePodReason, controller.SuccessfulCreatePodReason}) {
			t.Fatalf("events after the first failure %v", got)
		}
		fail()
		synctest.Wait()
		if got := a.takeEvents(); len(got) != 0 {
			t.Fatalf("events at once after the second failure %v, want none (backoff)", got)
		}
		time.Sleep(2 * time.Second)
		a.settle(t)
		if got := a.takeEvents(); !slices.Equal(got, []string{FailedDaemonPodReason, controller.SuccessfulDeletePodReason, controller.SuccessfulCreatePodReason}) {
			t.Fatalf("events after the backoff %v", got)
		}
	})
}

// TestMinReadySeconds: a ready pod counts as available only
// minReadySeconds after it became ready, with no event to announce it.
func TestMinReadySeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, stop := start(t, newSet(func(s *appsv1.DaemonSetSpec) { s.MinReadySeconds = 10 }), node("node-1", nil))
		defer stop()
		a.settle(t)
		if st := a.set(t).Status; st.NumberReady != 1 || st.NumberAvailable != 0 || st.NumberUnavailable != 1 {
			t.Fatalf("status at once %+v, want 1 ready, 0 available", st)
		}
		time.Sleep(12 * time.Second)
		synctest.Wait()
		if st := a.set(t).Status; st.NumberAvailable != 1 || st.NumberUnavailable != 0 {
			t.Fatalf("status after minReadySeconds %+v, want 1 available", st)
		}
	})
}

// TestTemplatePatch: the revision's data is what kube's getPatch makes:
// kube's daemon.Match accepts it for the set, and not for another
// template.
func TestTemplatePatch(t *testing.T) {
	for _, edit := range []func(*appsv1.DaemonSetSpec){
		nil, image("agent:2"),
		func(s *appsv1.DaemonSetSpec) {
			s.Template.Spec.HostNetwork = true
			s.Template.Annotations = map[string]string{"a": "b"}
		},
	} {
		ds := newSet(edit)
		patch, err := templatePatch(ds)
		if err != nil {
			t.Fatal(err)
		}
		rev := &appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: patch}}
		if ok, err := daemon.Match(ds, rev); err != nil || !ok {
			t.Errorf("daemon.Match(%s): %v, %v", patch, ok, err)
		}
		other := newSet(image("other"))
		if ok, _ := daemon.Match(other, rev); ok {
			t.Errorf("daemon.Match of another template accepted %s", patch)
		}
	}
}
