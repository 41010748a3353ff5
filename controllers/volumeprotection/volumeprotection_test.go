package volumeprotection

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/internal/kubelog"
)

func TestMain(m *testing.M) {
	kubelog.ToStderr()
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// api applies the controllers' writes to cachetest sources, as the API
// server would: an object being deleted goes once its last finalizer
// does. livePods, when set, is what the server lists in place of the
// cached pods (a pod the cache has not seen yet).
type api struct {
	claims   *cachetest.Source[*corev1.PersistentVolumeClaim]
	pods     *cachetest.Source[*corev1.Pod]
	volumes  *cachetest.Source[*corev1.PersistentVolume]
	mu       sync.Mutex
	livePods []*corev1.Pod
	lists    int
}

func (a *api) UpdateClaim(_ context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if pvc.DeletionTimestamp != nil && len(pvc.Finalizers) == 0 {
		_, err := a.claims.Delete(pvc.Namespace, pvc.Name)
		return err
	}
	_, err := a.claims.Update(pvc)
	return err
}

func (a *api) UpdateClaimStatus(_ context.Context, pvc *corev1.PersistentVolumeClaim) error {
	_, err := a.claims.Update(pvc)
	return err
}

func (a *api) ListPods(_ context.Context, ns string) ([]*corev1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lists++
	if a.livePods != nil {
		return a.livePods, nil
	}
	var out []*corev1.Pod
	for _, p := range a.pods.Items() {
		if p.Namespace == ns {
			out = append(out, p)
		}
	}
	return out, nil
}

func (a *api) UpdateVolume(_ context.Context, pv *corev1.PersistentVolume) error {
	if pv.DeletionTimestamp != nil && len(pv.Finalizers) == 0 {
		_, err := a.volumes.Delete("", pv.Name)
		return err
	}
	_, err := a.volumes.Update(pv)
	return err
}

// run starts both controllers over a's sources until the returned stop.
func run(t *testing.T, a *api) func() {
	t.Helper()
	opts := cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{Logger: quiet}}
	ci := cache.NewSharedIndexInformer[*corev1.PersistentVolumeClaim](a.claims, opts)
	pi := cache.NewSharedIndexInformer[*corev1.Pod](a.pods, opts)
	vi := cache.NewSharedIndexInformer[*corev1.PersistentVolume](a.volumes, opts)
	o := Options{Now: func() time.Time { return time.Unix(1e9, 0) }, Controller: controller.Options{Logger: quiet}}
	claims, err := NewClaims(ci, pi, a, o)
	if err != nil {
		t.Fatal(err)
	}
	volumes, err := NewVolumes(vi, a, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, r := range []func(context.Context){ci.Run, pi.Run, vi.Run} {
		wg.Go(func() { r(ctx) })
	}
	for _, c := range []interface{ Run(context.Context) error }{claims, volumes} {
		wg.Go(func() {
			if err := c.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

func claim(name string, deleting bool, phase corev1.PersistentVolumeClaimPhase, finalizers ...string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Finalizers: finalizers}}
	if deleting {
		pvc.DeletionTimestamp = new(metav1.Now())
	}
	pvc.Status.Phase = phase
	return pvc
}

func pod(name, node, claimName string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.PodSpec{NodeName: node, Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName},
		}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

// TestClaims: a claim being deleted loses its finalizer once no pod
// scheduled to a node names it, in the cache or on the server; one not
// being deleted gets it back; a Bound claim's Unused condition says
// whether a pod that has not terminated names it.
func TestClaims(t *testing.T) {
	for _, tc := range []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		pods []*corev1.Pod
		// live, when set, is the server's list of pods.
		live []*corev1.Pod
		// gone: the claim is deleted; else it has finalizers and the
		// Unused condition's status (none: "").
		gone       bool
		finalizers []string
		unused     corev1.ConditionStatus
		reason     string
	}{{
		name: "deleted, unused", pvc: claim("c", true, corev1.ClaimPending, PVCFinalizer), gone: true,
	}, {
		name: "deleted, used by a running pod", pvc: claim("c", true, corev1.ClaimPending, PVCFinalizer),
		pods: []*corev1.Pod{pod("p", "node-1", "c", corev1.PodRunning)}, finalizers: []string{PVCFinalizer},
	}, {
		name: "deleted, named by an unscheduled pod", pvc: claim("c", true, corev1.ClaimPending, PVCFinalizer),
		pods: []*corev1.Pod{pod("p", "", "c", corev1.PodPending)}, gone: true,
	}, {
		name: "deleted, used by a pod of another claim", pvc: claim("c", true, corev1.ClaimPending, PVCFinalizer),
		pods: []*corev1.Pod{pod("p", "node-1", "other", corev1.PodRunning)}, gone: true,
	}, {
		name: "deleted, used by a pod only the server has", pvc: claim("c", true, corev1.ClaimPending, PVCFinalizer),
		live: []*corev1.Pod{pod("p", "node-1", "c", corev1.PodRunning)}, finalizers: []string{PVCFinalizer},
	}, {
		name: "deleted, another finalizer stays", pvc: claim("c", true, corev1.ClaimPending, "example.com/keep", PVCFinalizer),
		finalizers: []string{"example.com/keep"},
	}, {
		name: "the finalizer put back", pvc: claim("c", false, corev1.ClaimPending), finalizers: []string{PVCFinalizer},
	}, {
		name: "bound, unused", pvc: claim("c", false, corev1.ClaimBound, PVCFinalizer), finalizers: []string{PVCFinalizer},
		unused: corev1.ConditionTrue, reason: "NoPodsUsingPVC",
	}, {
		name: "bound, used", pvc: claim("c", false, corev1.ClaimBound, PVCFinalizer), finalizers: []string{PVCFinalizer},
		pods:   []*corev1.Pod{pod("p", "", "c", corev1.PodPending)},
		unused: corev1.ConditionFalse, reason: "PodUsingPVC",
	}, {
		name: "bound, named by a pod that succeeded", pvc: claim("c", false, corev1.ClaimBound, PVCFinalizer), finalizers: []string{PVCFinalizer},
		pods:   []*corev1.Pod{pod("p", "node-1", "c", corev1.PodSucceeded)},
		unused: corev1.ConditionTrue, reason: "NoPodsUsingPVC",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := &api{claims: cachetest.New[*corev1.PersistentVolumeClaim](), pods: cachetest.New[*corev1.Pod](), volumes: cachetest.New[*corev1.PersistentVolume](), livePods: tc.live}
				if _, err := a.claims.Create(tc.pvc); err != nil {
					t.Fatal(err)
				}
				for _, p := range tc.pods {
					if _, err := a.pods.Create(p); err != nil {
						t.Fatal(err)
					}
				}
				stop := run(t, a)
				defer stop()
				time.Sleep(time.Second)
				synctest.Wait()
				got, ok := a.claims.Get("ns", "c")
				if tc.gone {
					if ok {
						t.Fatalf("claim kept, finalizers %v", got.Finalizers)
					}
					return
				}
				if !ok {
					t.Fatal("claim deleted")
				}
				if !slices.Equal(got.Finalizers, tc.finalizers) {
					t.Errorf("finalizers %v, want %v", got.Finalizers, tc.finalizers)
				}
				c := unusedCondition(got)
				switch {
				case tc.unused == "" && c != nil:
					t.Errorf("Unused condition %+v, want none", c)
				case tc.unused != "" && (c == nil || c.Status != tc.unused || c.Reason != tc.reason || !c.LastTransitionTime.Time.Equal(time.Unix(1e9, 0))):
					t.Errorf("Unused condition %+v, want %s/%s", c, tc.unused, tc.reason)
				}
			})
		})
	}
}

// TestClaimReleasedWhenItsPodGoes: a claim kept by its pod goes once
// the pod is deleted.
func TestClaimReleasedWhenItsPodGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &api{claims: cachetest.New[*corev1.PersistentVolumeClaim](), pods: cachetest.New[*corev1.Pod](), volumes: cachetest.New[*corev1.PersistentVolume]()}
		if _, err := a.claims.Create(claim("c", true, corev1.ClaimPending, PVCFinalizer)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.pods.Create(pod("p", "node-1", "c", corev1.PodRunning)); err != nil {
			t.Fatal(err)
		}
		stop := run(t, a)
		defer stop()
		time.Sleep(time.Second)
		synctest.Wait()
		if _, ok := a.claims.Get("ns", "c"); !ok {
			t.Fatal("claim deleted while its pod runs")
		}
		if _, err := a.pods.Delete("ns", "p"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if _, ok := a.claims.Get("ns", "c"); ok {
			t.Fatal("claim kept after its pod went")
		}
	})
}

// TestVolumes: a volume being deleted loses its finalizer unless Bound;
// one not being deleted gets it back.
func TestVolumes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		deleting   bool
		phase      corev1.PersistentVolumePhase
		finalizers []string
		gone       bool
		want       []string
	}{
		{name: "deleted, released", deleting: true, phase: corev1.VolumeReleased, finalizers: []string{PVFinalizer}, gone: true},
		{name: "deleted, bound", deleting: true, phase: corev1.VolumeBound, finalizers: []string{PVFinalizer}, want: []string{PVFinalizer}},
		{name: "the finalizer put back", phase: corev1.VolumeAvailable, want: []string{PVFinalizer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := &api{claims: cachetest.New[*corev1.PersistentVolumeClaim](), pods: cachetest.New[*corev1.Pod](), volumes: cachetest.New[*corev1.PersistentVolume]()}
				pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "v", Finalizers: tc.finalizers}, Status: corev1.PersistentVolumeStatus{Phase: tc.phase}}
				if tc.deleting {
					pv.DeletionTimestamp = new(metav1.Now())
				}
				if _, err := a.volumes.Create(pv); err != nil {
					t.Fatal(err)
				}
				stop := run(t, a)
				defer stop()
				time.Sleep(time.Second)
				synctest.Wait()
				got, ok := a.volumes.Get("", "v")
				if ok == tc.gone || (ok && !slices.Equal(got.Finalizers, tc.want)) {
					t.Errorf("volume kept %v with finalizers %v; want kept %v with %v", ok, got, !tc.gone, tc.want)
				}
			})
		})
	}
}
