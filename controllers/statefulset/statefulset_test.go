package statefulset

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var (
	setsResource      = schema.GroupResource{Group: "apps", Resource: "statefulsets"}
	podsResource      = schema.GroupResource{Resource: "pods"}
	claimsResource    = schema.GroupResource{Resource: "persistentvolumeclaims"}
	revisionsResource = schema.GroupResource{Group: "apps", Resource: "controllerrevisions"}
)

// api applies the controller's writes to cachetest sources as the API
// server would (a pod deleted is marked terminating, and goes when the
// test's kubelet lets it), and keeps its events.
type api struct {
	mu        sync.Mutex
	sets      *cachetest.Source[*appsv1.StatefulSet]
	pods      *cachetest.Source[*corev1.Pod]
	claims    *cachetest.Source[*corev1.PersistentVolumeClaim]
	revisions *cachetest.Source[*appsv1.ControllerRevision]
	events    []string
	uids      int
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

func (a *api) uid(name string) types.UID {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.uids++
	return types.UID(fmt.Sprintf("uid-%s-%d", name, a.uids))
}

func (a *api) GetStatefulSet(_ context.Context, ns, name string) (*appsv1.StatefulSet, error) {
	s, ok := a.sets.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(setsResource, name)
	}
	return s.DeepCopy(), nil
}

func (a *api) UpdateStatefulSetStatus(ctx context.Context, set *appsv1.StatefulSet) (*appsv1.StatefulSet, error) {
	cur, ok := a.sets.Get(set.Namespace, set.Name)
	if !ok {
		return nil, apierrors.NewNotFound(setsResource, set.Name)
	}
	next := cur.DeepCopy()
	next.Status = *set.Status.DeepCopy()
	next.ResourceVersion = set.ResourceVersion
	return recorded(ctx, setsResource, next, a.sets.Update)
}

func (a *api) CreatePod(ctx context.Context, ns string, pod *corev1.Pod, _ metav1.CreateOptions) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	pod.Namespace = ns
	pod.UID = a.uid(pod.Name)
	pod.CreationTimestamp = metav1.Now()
	pod.Status.Phase = corev1.PodPending
	return recorded(ctx, podsResource, pod, a.pods.Create)
}

func (a *api) UpdatePod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	return recorded(ctx, podsResource, pod.DeepCopy(), a.pods.Update)
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

func (a *api) CreateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	claim = claim.DeepCopy()
	claim.UID = a.uid(claim.Name)
	claim.Status.Phase = corev1.ClaimPending
	return recorded(ctx, claimsResource, claim, a.claims.Create)
}

func (a *api) UpdateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	return recorded(ctx, claimsResource, claim.DeepCopy(), a.claims.Update)
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
	rev.UID = a.uid(rev.Name)
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

// patched applies a strategic merge patch to a copy of cur.
func patched[T cache.Object](cur T, pt types.PatchType, data []byte, schemaOf any) (T, error) {
	var zero T
	if pt != types.StrategicMergePatchType {
		return zero, fmt.Errorf("patch type %s", pt)
	}
	orig, err := json.Marshal(cur)
	if err != nil {
		return zero, err
	}
	b, err := strategicpatch.StrategicMergePatch(orig, data, schemaOf)
	if err != nil {
		return zero, err
	}
	out := schemaOf.(T)
	if err := json.Unmarshal(b, out); err != nil {
		return zero, err
	}
	return out, nil
}

func (a *api) Eventf(_ runtime.Object, _, reason, format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, reason+": "+fmt.Sprintf(format, args...))
}

// takeEvents returns the events since the last call.
func (a *api) takeEvents() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.events
	a.events = nil
	return out
}

// kubelet runs the pods as nodes would: a pending pod becomes Running and
// Ready, a terminating one goes. It reports whether it changed anything.
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
			next := p.DeepCopy()
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

// podNames returns the pods' names with their revision, sorted:
// "web-0@web-5d4f..." ("~" marks a terminating pod).
func (a *api) podNames() []string {
	var out []string
	for _, p := range a.pods.Items() {
		n := p.Name + "@" + p.Labels[appsv1.ControllerRevisionHashLabelKey]
		if p.DeletionTimestamp != nil {
			n = "~" + n
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (a *api) set(t *testing.T) *appsv1.StatefulSet {
	t.Helper()
	s, ok := a.sets.Get("ns", "web")
	if !ok {
		t.Fatal("statefulset gone")
	}
	return s
}

// edit changes the StatefulSet's spec, as a user's update does (a new
// generation).
func (a *api) edit(t *testing.T, change func(*appsv1.StatefulSetSpec)) {
	t.Helper()
	s := a.set(t).DeepCopy()
	change(&s.Spec)
	s.Generation++
	if _, err := a.sets.Update(s); err != nil {
		t.Fatal(err)
	}
}

// run starts the controller over an api holding set and objs (pods,
// claims, revisions), until the returned stop.
func run(t *testing.T, set *appsv1.StatefulSet, objs ...runtime.Object) (*api, func()) {
	t.Helper()
	a := &api{
		sets:      cachetest.New(cachetest.WithResource[*appsv1.StatefulSet](setsResource)),
		pods:      cachetest.New(cachetest.WithResource[*corev1.Pod](podsResource)),
		claims:    cachetest.New(cachetest.WithResource[*corev1.PersistentVolumeClaim](claimsResource)),
		revisions: cachetest.New(cachetest.WithResource[*appsv1.ControllerRevision](revisionsResource)),
	}
	if _, err := a.sets.Create(set); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Pod:
			_, err = a.pods.Create(o)
		case *appsv1.ControllerRevision:
			_, err = a.revisions.Create(o)
		default:
			err = fmt.Errorf("unexpected %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(informers.SourceFunc(
		func(gvr schema.GroupVersionResource, _ string, _ func(*metav1.ListOptions)) cache.ListerWatcher[cache.Object] {
			switch gvr.Resource {
			case "statefulsets":
				return cache.Erase(a.sets)
			case "pods":
				return cache.Erase(a.pods)
			case "persistentvolumeclaims":
				return cache.Erase(a.claims)
			}
			return cache.Erase(a.revisions)
		}), informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
	c, err := New(Informers{
		StatefulSets:        informers.For[*appsv1.StatefulSet](factory),
		Pods:                informers.For[*corev1.Pod](factory),
		Claims:              informers.For[*corev1.PersistentVolumeClaim](factory),
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

// newSet is a StatefulSet "web" of replicas, defaulted as the API server
// defaults it (kube's own defaulting), then changed by edit.
func newSet(replicas int32, edit func(*appsv1.StatefulSetSpec)) *appsv1.StatefulSet {
	labels := map[string]string{"app": "web"}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web", Generation: 1, CreationTimestamp: metav1.Now()},
		Spec: appsv1.StatefulSetSpec{
			Replicas: new(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx:1"}}},
			},
		},
	}
	if edit != nil {
		edit(&set.Spec)
	}
	legacyscheme.Scheme.Default(set)
	return set
}

// image sets the pods' image.
func image(img string) func(*appsv1.StatefulSetSpec) {
	return func(s *appsv1.StatefulSetSpec) { s.Template.Spec.Containers[0].Image = img }
}

// revisions returns the ControllerRevisions' names and numbers, oldest
// first.
func (a *api) revisionNames() []string {
	revs := a.revisions.Items()
	sort.Slice(revs, func(i, j int) bool { return revs[i].Revision < revs[j].Revision })
	var out []string
	for _, r := range revs {
		out = append(out, fmt.Sprintf("%s=%d", r.Name, r.Revision))
	}
	return out
}

// TestOrderedReady: an OrderedReady set creates its pods one at a time,
// each once the one before it is Running and Ready, names and labels
// them as kube does, and deletes them from the highest ordinal down, one
// at a time, on scale-down.
func TestOrderedReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, stop := run(t, newSet(3, nil))
		defer stop()
		rev := a.set(t).Status.UpdateRevision
		if got := a.revisionNames(); len(got) != 1 || !strings.HasPrefix(got[0], rev+"=1") || !strings.HasPrefix(rev, "web-") {
			t.Fatalf("revisions %v, updateRevision %q", got, rev)
		}
		if got, want := a.podNames(), []string{"web-0@" + rev}; !slices.Equal(got, want) {
			t.Fatalf("pods before web-0 is ready: %v, want %v", got, want)
		}
		p, _ := a.pods.Get("ns", "web-0")
		if p.Labels[appsv1.StatefulSetPodNameLabel] != "web-0" || p.Labels[appsv1.PodIndexLabel] != "0" || p.Spec.Hostname != "web-0" || !metav1.IsControlledBy(p, a.set(t)) {
			t.Errorf("web-0: labels %v, hostname %q, owners %v", p.Labels, p.Spec.Hostname, p.OwnerReferences)
		}
		a.kubelet(t)
		synctest.Wait()
		if got, want := a.podNames(), []string{"web-0@" + rev, "web-1@" + rev}; !slices.Equal(got, want) {
			t.Fatalf("pods once web-0 is ready: %v, want %v", got, want)
		}
		a.settle(t)
		st := a.set(t).Status
		want := appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3,
			CurrentRevision: rev, UpdateRevision: rev, CollisionCount: new(int32(0))}
		if !equalStatus(st, want) {
			t.Errorf("status %+v, want %+v", st, want)
		}
		if got, want := a.takeEvents(), []string{
			"SuccessfulCreate: Create Pod web-0 in StatefulSet web successful",
			"SuccessfulCreate: Create Pod web-1 in StatefulSet web successful",
			"SuccessfulCreate: Create Pod web-2 in StatefulSet web successful",
		}; !slices.Equal(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}

		a.edit(t, func(s *appsv1.StatefulSetSpec) { s.Replicas = new(int32(1)) })
		synctest.Wait()
		if got, want := a.podNames(), []string{"web-0@" + rev, "web-1@" + rev, "~web-2@" + rev}; !slices.Equal(got, want) {
			t.Fatalf("pods as web-2 terminates: %v, want %v", got, want)
		}
		a.settle(t)
		if got, want := a.podNames(), []string{"web-0@" + rev}; !slices.Equal(got, want) {
			t.Fatalf("pods scaled down: %v, want %v", got, want)
		}
		if got, want := a.takeEvents(), []string{
			"SuccessfulDelete: Delete Pod web-2 in StatefulSet web successful",
			"SuccessfulDelete: Delete Pod web-1 in StatefulSet web successful",
		}; !slices.Equal(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
		if st := a.set(t).Status; st.Replicas != 1 || st.ObservedGeneration != 2 {
			t.Errorf("status %+v", st)
		}
	})
}

// equalStatus compares the fields the tests state.
func equalStatus(got, want appsv1.StatefulSetStatus) bool {
	got.Conditions, want.Conditions = nil, nil
	b1, _ := json.Marshal(got)
	b2, _ := json.Marshal(want)
	return string(b1) == string(b2)
}

// TestParallel: a Parallel set creates all its pods at once, and deletes
// all it scales away at once.
func TestParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, stop := run(t, newSet(3, func(s *appsv1.StatefulSetSpec) { s.PodManagementPolicy = appsv1.ParallelPodManagement }))
		defer stop()
		rev := a.set(t).Status.UpdateRevision
		if got, want := a.podNames(), []string{"web-0@" + rev, "web-1@" + rev, "web-2@" + rev}; !slices.Equal(got, want) {
			t.Fatalf("pods %v, want %v", got, want)
		}
		a.settle(t)
		a.edit(t, func(s *appsv1.StatefulSetSpec) { s.Replicas = new(int32(1)) })
		synctest.Wait()
		if got, want := a.podNames(), []string{"web-0@" + rev, "~web-1@" + rev, "~web-2@" + rev}; !slices.Equal(got, want) {
			t.Fatalf("pods %v, want %v", got, want)
		}
	})
}

// TestRollingUpdate: a new template makes a second ControllerRevision;
// the pods at or above the partition are replaced from the highest
// ordinal down, maxUnavailable at a time, each with the new revision's
// template and label; those below keep the current revision, and the
// status says so.
func TestRollingUpdate(t *testing.T) {
	for _, tc := range []struct {
		name           string
		partition      int32
		maxUnavailable int
		policy         appsv1.PodManagementPolicyType
		// firstDeleted is what the first sync after the edit deletes.
		firstDeleted []string
		updated      []string
	}{
		{name: "one at a time", partition: 0, maxUnavailable: 1, policy: appsv1.OrderedReadyPodManagement, firstDeleted: []string{"web-3"}, updated: []string{"web-0", "web-1", "web-2", "web-3"}},
		{name: "partition", partition: 2, maxUnavailable: 1, policy: appsv1.OrderedReadyPodManagement, firstDeleted: []string{"web-3"}, updated: []string{"web-2", "web-3"}},
		{name: "maxUnavailable 2", partition: 0, maxUnavailable: 2, policy: appsv1.OrderedReadyPodManagement, firstDeleted: []string{"web-2", "web-3"}, updated: []string{"web-0", "web-1", "web-2", "web-3"}},
		{name: "parallel, partition, maxUnavailable 2", partition: 1, maxUnavailable: 2, policy: appsv1.ParallelPodManagement, firstDeleted: []string{"web-2", "web-3"}, updated: []string{"web-1", "web-2", "web-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, stop := run(t, newSet(4, func(s *appsv1.StatefulSetSpec) {
					s.PodManagementPolicy = tc.policy
					s.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{
						Partition: new(tc.partition), MaxUnavailable: new(intstr.FromInt(tc.maxUnavailable)),
					}}
				}))
				defer stop()
				a.settle(t)
				oldRev := a.set(t).Status.CurrentRevision
				a.edit(t, image("nginx:2"))
				synctest.Wait()
				newRev := a.set(t).Status.UpdateRevision
				if newRev == oldRev {
					t.Fatalf("updateRevision %q did not change", newRev)
				}
				var terminating []string
				for _, p := range a.pods.Items() {
					if p.DeletionTimestamp != nil {
						terminating = append(terminating, p.Name)
					}
				}
				if !slices.Equal(terminating, tc.firstDeleted) {
					t.Fatalf("terminating %v, want %v", terminating, tc.firstDeleted)
				}
				a.settle(t)
				var want []string
				for i := range 4 {
					name := fmt.Sprintf("web-%d", i)
					if slices.Contains(tc.updated, name) {
						want = append(want, name+"@"+newRev)
					} else {
						want = append(want, name+"@"+oldRev)
					}
				}
				if got := a.podNames(); !slices.Equal(got, want) {
					t.Fatalf("pods %v, want %v", got, want)
				}
				for _, name := range tc.updated {
					if p, _ := a.pods.Get("ns", name); p.Spec.Containers[0].Image != "nginx:2" {
						t.Errorf("%s runs %s", name, p.Spec.Containers[0].Image)
					}
				}
				st := a.set(t).Status
				n := int32(len(tc.updated))
				wantRev := oldRev
				if n == 4 {
					// Every pod updated: the update is complete.
					wantRev = newRev
				}
				if st.UpdatedReplicas != n || st.CurrentReplicas != 4-n && n != 4 || st.CurrentRevision != wantRev || st.UpdateRevision != newRev || st.ReadyReplicas != 4 || st.ObservedGeneration != 2 {
					t.Errorf("status %+v", st)
				}
				if got := a.revisionNames(); !slices.Equal(got, []string{oldRev + "=1", newRev + "=2"}) {
					t.Errorf("revisions %v", got)
				}
			})
		})
	}
}

// TestOnDelete: with OnDelete a new template replaces no pod; a pod
// deleted is made again from it.
func TestOnDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, stop := run(t, newSet(2, func(s *appsv1.StatefulSetSpec) {
			s.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		}))
		defer stop()
		a.settle(t)
		oldRev := a.set(t).Status.CurrentRevision
		a.edit(t, image("nginx:2"))
		a.settle(t)
		newRev := a.set(t).Status.UpdateRevision
		if got, want := a.podNames(), []string{"web-0@" + oldRev, "web-1@" + oldRev}; !slices.Equal(got, want) {
			t.Fatalf("pods %v, want %v", got, want)
		}
		if _, err := a.pods.Delete("ns", "web-1"); err != nil {
			t.Fatal(err)
		}
		a.settle(t)
		if got, want := a.podNames(), []string{"web-0@" + oldRev, "web-1@" + newRev}; !slices.Equal(got, want) {
			t.Fatalf("pods %v, want %v", got, want)
		}
		if st := a.set(t).Status; st.CurrentReplicas != 1 || st.UpdatedReplicas != 1 {
			t.Errorf("status %+v", st)
		}
	})
}

// TestMinReadySeconds: a pod counts as available minReadySeconds after
// it is ready, and an OrderedReady set waits for that before it creates
// the next pod; nothing but the passing of time tells the controller.
func TestMinReadySeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, stop := run(t, newSet(2, func(s *appsv1.StatefulSetSpec) { s.MinReadySeconds = 10 }))
		defer stop()
		a.kubelet(t) // web-0 ready
		synctest.Wait()
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if st := a.set(t).Status; st.ReadyReplicas != 1 || st.AvailableReplicas != 0 || len(a.podNames()) != 1 {
			t.Fatalf("9s after web-0 is ready: status %+v, pods %v", st, a.podNames())
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if st := a.set(t).Status; st.AvailableReplicas != 1 || len(a.podNames()) != 2 {
			t.Fatalf("11s after web-0 is ready: status %+v, pods %v", st, a.podNames())
		}
	})
}

// TestClaims: each pod gets its claims from the templates, named
// "<template>-<set>-<ordinal>" and mounted; their owner references follow
// the retention policy: with whenScaled Delete, the claim of a pod scaled
// away is handed to that pod (so the garbage collector deletes it with
// the pod), the others stay the set's.
func TestClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, stop := run(t, newSet(2, func(s *appsv1.StatefulSetSpec) {
			s.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}}
			s.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
			}
		}))
		defer stop()
		a.settle(t)
		owners := func() map[string]string {
			out := map[string]string{}
			for _, c := range a.claims.Items() {
				var o []string
				for _, r := range c.OwnerReferences {
					o = append(o, r.Kind+"/"+r.Name)
				}
				out[c.Name] = strings.Join(o, ",")
			}
			return out
		}
		if got, want := owners(), map[string]string{"data-web-0": "StatefulSet/web", "data-web-1": "StatefulSet/web"}; !mapsEqual(got, want) {
			t.Fatalf("claims %v, want %v", got, want)
		}
		p, _ := a.pods.Get("ns", "web-1")
		if v := p.Spec.Volumes; len(v) != 1 || v[0].Name != "data" || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != "data-web-1" {
			t.Errorf("web-1's volumes %+v", v)
		}
		a.edit(t, func(s *appsv1.StatefulSetSpec) { s.Replicas = new(int32(1)) })
		a.settle(t)
		if got, want := owners(), map[string]string{"data-web-0": "StatefulSet/web", "data-web-1": "Pod/web-1"}; !mapsEqual(got, want) {
			t.Fatalf("claims after scale-down %v, want %v", got, want)
		}
		var claimEvents []string
		for _, e := range a.takeEvents() {
			if strings.Contains(e, "Claim") {
				claimEvents = append(claimEvents, e)
			}
		}
		if want := []string{
			"SuccessfulCreate: Create Claim data-web-0 Pod web-0 in StatefulSet web success",
			"SuccessfulCreate: Create Claim data-web-1 Pod web-1 in StatefulSet web success",
		}; !slices.Equal(claimEvents, want) {
			t.Errorf("claim events %q, want %q", claimEvents, want)
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestAdoption: an orphan pod named as the set's and matching its
// selector is adopted, as is an orphan ControllerRevision; an orphan
// that matches but is named otherwise is left alone, and an owned pod
// that no longer matches is released.
func TestAdoption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set := newSet(1, nil)
		orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: "uid-orphan", Labels: map[string]string{"app": "web"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		stranger := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other-0", UID: "uid-other", Labels: map[string]string{"app": "web"}}}
		released := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-7", UID: "uid-7", Labels: map[string]string{"app": "gone"},
			OwnerReferences: []metav1.OwnerReference{*controller.NewControllerRef(set, controllerKind)}}}
		rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-old", UID: "uid-rev", Labels: map[string]string{"app": "web"}}, Revision: 1}
		a, stop := run(t, set, orphan, stranger, released, rev)
		defer stop()
		owned := func(name string) bool {
			p, ok := a.pods.Get("ns", name)
			return ok && metav1.IsControlledBy(p, set)
		}
		if !owned("web-0") || owned("other-0") || owned("web-7") {
			t.Errorf("owned: web-0 %v, other-0 %v, web-7 %v", owned("web-0"), owned("other-0"), owned("web-7"))
		}
		if p, _ := a.pods.Get("ns", "web-0"); p.UID != "uid-orphan" {
			t.Errorf("web-0 was replaced, not adopted")
		}
		if r, ok := a.revisions.Get("ns", "web-old"); !ok || !metav1.IsControlledBy(r, set) {
			t.Errorf("revision web-old not adopted")
		}
	})
}

// TestParentAndOrdinal: kube's reading of a pod's name.
func TestParentAndOrdinal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		parent  string
		ordinal int
		ok      bool
	}{
		{"web-0", "web", 0, true},
		{"web-12", "web", 12, true},
		{"my-web-3", "my-web", 3, true},
		{"web", "", 0, false},
		{"web-", "", 0, false},
		{"web-a1", "", 0, false},
		{"123", "", 0, false},
		{"-4", "", 4, true},
		{"web-99999999999", "web", -1, true},
	} {
		parent, ordinal, ok := parentAndOrdinal(tc.name)
		if parent != tc.parent || ordinal != tc.ordinal || ok != tc.ok {
			t.Errorf("parentAndOrdinal(%q) = %q, %d, %v; want %q, %d, %v", tc.name, parent, ordinal, ok, tc.parent, tc.ordinal, tc.ok)
		}
	}
}
