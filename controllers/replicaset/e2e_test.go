package replicaset_test

// End to end: the ReplicaSet controller as the controller-manager runs it,
// with the pod lifecycle controller standing in for kubelets and the
// garbage collector, against listwatch's own API server.

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
	"github.com/listwatch/listwatch/controllers/replicaset"
	"github.com/listwatch/listwatch/envtest"
)

// TestE2E runs, for a ReplicaSet and for an RC, what a user of
// listwatch up sees: an owner of 3 gets 3 pods that the pod lifecycle
// controller makes Ready, its status says 3 available, a scale down to 1
// deletes two, and deleting it has the garbage collector delete its pod.
func TestE2E(t *testing.T) {
	lbl := map[string]string{"app": "web"}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: lbl},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	}
	t.Run("replicaset", func(t *testing.T) {
		testE2E(t, replicaset.ReplicaSets{}, controllermanager.ReplicaSet, "replicaset-controller", new(int32(0)), &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       appsv1.ReplicaSetSpec{Replicas: new(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: lbl}, Template: template},
		})
	})
	t.Run("replication", func(t *testing.T) {
		testE2E(t, replicaset.ReplicationControllers{}, controllermanager.Replication, "replication-controller", nil, &corev1.ReplicationController{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       corev1.ReplicationControllerSpec{Replicas: new(int32(3)), Selector: lbl, Template: &template},
		})
	})
}

// testE2E runs TestE2E for obj, of kind's kind, run by the controller
// called name, whose events come from component; terminating is what its
// status says of terminatingReplicas once no pod is terminating.
func testE2E[T cache.Object](t *testing.T, kind replicaset.Kind[T], name, component string, terminating *int32, obj T) {
	env := envtest.Start(t, envtest.Options{
		Controllers:  []string{name, controllermanager.PodLifecycle, controllermanager.GarbageCollector},
		PodLifecycle: podlifecycle.Options{StartDelay: time.Millisecond, TerminationDelay: 50 * time.Millisecond},
	})
	c := env.Client
	const ns = "e2e"
	if _, err := client.For[*corev1.Namespace](c, "").Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	objs := client.For[T](c, ns)
	pods := client.For[*corev1.Pod](c, ns)
	eventsAPI := client.For[*corev1.Event](c, ns)
	gvk := kind.GroupVersionKind()
	owner, err := objs.Create(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// owned returns the owner's pods: the active ones, and how many are
	// left in all.
	owned := func() (active []*corev1.Pod, all int, err error) {
		list, err := pods.List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return nil, 0, err
		}
		for _, p := range list.Items {
			if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != owner.GetUID() || ref.Kind != gvk.Kind || ref.APIVersion != gvk.GroupVersion().String() {
				return nil, 0, fmt.Errorf("pod %s has owner references %+v", p.Name, p.OwnerReferences)
			}
			if controller.IsPodActive(p) {
				active = append(active, p)
			}
		}
		return active, len(list.Items), nil
	}
	status := func(want appsv1.ReplicaSetStatus) func() (bool, string) {
		return func() (bool, string) {
			cur, err := objs.Get(t.Context(), "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			want.TerminatingReplicas = terminating
			got := kind.Status(cur)
			return apiequality.Semantic.DeepEqual(got, want), fmt.Sprintf("%+v", got)
		}
	}

	envtest.Eventually(t, "3 available replicas", status(appsv1.ReplicaSetStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 3,
		AvailableReplicas: 3, ObservedGeneration: 1}))
	active, _, err := owned()
	if err != nil || len(active) != 3 {
		t.Fatalf("pods of the owner: %d active, %v; want 3", len(active), err)
	}
	for _, p := range active {
		if !controller.IsPodReady(p) || p.Spec.NodeName == "" {
			t.Errorf("pod %s not ready on a node: %+v", p.Name, p.Status)
		}
	}
	// events waits for n events of reason about the owner, from the
	// controller, counting repeats.
	events := func(reason string, n int32) {
		t.Helper()
		envtest.Eventually(t, reason+" events", func() (bool, string) {
			list, err := eventsAPI.List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=" + reason})
			if err != nil {
				return false, err.Error()
			}
			got := int32(0)
			for _, ev := range list.Items {
				if ev.InvolvedObject.Kind == gvk.Kind && ev.Source.Component == component {
					got += max(ev.Count, 1)
				}
			}
			return got == n, fmt.Sprintf("%d events", got)
		})
	}
	events("SuccessfulCreate", 3)

	// Scale down to 1: two pods go, the status says so.
	if _, err := objs.Patch(t.Context(), "web", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, "1 replica", status(appsv1.ReplicaSetStatus{Replicas: 1, FullyLabeledReplicas: 1, ReadyReplicas: 1,
		AvailableReplicas: 1, ObservedGeneration: 2}))
	envtest.Eventually(t, "the scaled-down pods gone", func() (bool, string) {
		active, all, err := owned()
		if err != nil {
			return false, err.Error()
		}
		return len(active) == 1 && all == 1, fmt.Sprintf("%d active of %d", len(active), all)
	})
	events("SuccessfulDelete", 2)

	// Deleted with background propagation: the garbage collector
	// removes the pod.
	if err := objs.Delete(t.Context(), "web", metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, "the pods deleted", func() (bool, string) {
		_, all, err := owned()
		if err != nil {
			return false, err.Error()
		}
		return all == 0, fmt.Sprintf("%d pods left", all)
	})
}

// TestUnconditionalStatusAgainstServer: the controller's status write,
// with no resourceVersion, lands on an object whose spec moved on since
// the copy it was computed on, and leaves that spec alone; onto an object
// replaced under the same name it is refused with a conflict (the UID it
// carries is a precondition), as kube-apiserver answers.
func TestUnconditionalStatusAgainstServer(t *testing.T) {
	lbl := map[string]string{"app": "web"}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: lbl},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	}
	env := envtest.Start(t, envtest.Options{})
	if _, err := client.For[*corev1.Namespace](env.Client, "").Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("replicaset", func(t *testing.T) {
		testUnconditionalStatus(t, env.Client, replicaset.ReplicaSets{}, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "e2e"},
			Spec:       appsv1.ReplicaSetSpec{Replicas: new(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: lbl}, Template: template},
		}, func(rs *appsv1.ReplicaSet, n int32) { rs.Spec.Replicas = &n })
	})
	t.Run("replication", func(t *testing.T) {
		testUnconditionalStatus(t, env.Client, replicaset.ReplicationControllers{}, &corev1.ReplicationController{
			ObjectMeta: metav1.ObjectMeta{Name: "rc", Namespace: "e2e"},
			Spec:       corev1.ReplicationControllerSpec{Replicas: new(int32(3)), Selector: lbl, Template: &template},
		}, func(rc *corev1.ReplicationController, n int32) { rc.Spec.Replicas = &n })
	})
}

func testUnconditionalStatus[T cache.Object](t *testing.T, c *client.Client, kind replicaset.Kind[T], obj T, scale func(T, int32)) {
	ctx := t.Context()
	objs := client.For[T](c, "e2e")
	api := replicaset.NewClient[T](c)
	seen, err := objs.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moved := seen.DeepCopyObject().(T)
	scale(moved, 5)
	moved, err = objs.Update(ctx, moved, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	write := kind.WithStatus(seen, appsv1.ReplicaSetStatus{Replicas: 2, ObservedGeneration: seen.GetGeneration()})
	write.SetResourceVersion("")
	got, err := api.UpdateStatus(ctx, write)
	if err != nil {
		t.Fatalf("status on a copy whose spec is stale: %v", err)
	}
	if kind.Status(got).Replicas != 2 || kind.Replicas(got) != 5 || got.GetGeneration() != moved.GetGeneration() {
		t.Errorf("after the status write: status.replicas %d, replicas %d, generation %d; want 2, 5, %d",
			kind.Status(got).Replicas, kind.Replicas(got), got.GetGeneration(), moved.GetGeneration())
	}
	// In the background: an RC's default is to orphan, which waits for a
	// garbage collector this server does not run.
	background := metav1.DeletePropagationBackground
	if err := objs.Delete(ctx, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	if _, err := objs.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.UpdateStatus(ctx, write); !apierrors.IsConflict(err) {
		t.Errorf("status of a replaced object: %v, want a conflict", err)
	}
}
