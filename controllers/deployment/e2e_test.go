package deployment_test

// End to end: the Deployment controller as the controller-manager runs it,
// with the ReplicaSet controller making pods and the pod lifecycle
// controller standing in for kubelets, against listwatch's own API server.

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/deployment"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
	"github.com/listwatch/listwatch/envtest"
)

func podTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
}

// startCluster runs an environment (envtest) with the ReplicaSet,
// Deployment and pod lifecycle controllers (with the simulated nodes of
// nodes) until the test ends; it returns a client of the server and
// creates the namespace e2e. wrap, when set, wraps the controllers'
// transport.
func startCluster(tb testing.TB, nodes podlifecycle.Options, wrap func(http.RoundTripper) http.RoundTripper) *client.Client {
	tb.Helper()
	env := envtest.Start(tb, envtest.Options{
		Controllers:              []string{controllermanager.ReplicaSet, controllermanager.Deployment, controllermanager.PodLifecycle},
		PodLifecycle:             nodes,
		WrapControllersTransport: wrap,
	})
	if _, err := client.For[*corev1.Namespace](env.Client, "").Create(tb.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	return env.Client
}

// podReady reports whether a pod counts as available (minReadySeconds is
// 0): not being deleted, and Ready.
func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestE2ERollout: a Deployment of 3 becomes available; a new image rolls
// to a new ReplicaSet with availability never below replicas -
// maxUnavailable and never more than replicas + maxSurge pods; putting the
// old template back (kubectl rollout undo) makes the old ReplicaSet
// current again as revision 3.
func TestE2ERollout(t *testing.T) {
	c := startCluster(t, podlifecycle.Options{StartDelay: 30 * time.Millisecond, TerminationDelay: 30 * time.Millisecond}, nil)
	deployments := client.For[*appsv1.Deployment](c, "e2e")
	replicaSets := client.For[*appsv1.ReplicaSet](c, "e2e")
	pods := client.For[*corev1.Pod](c, "e2e")

	replicas := int32(3)
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(1)
	_, err := deployments.Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: podTemplate("web:1"),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	get := func() *appsv1.Deployment {
		t.Helper()
		d, err := deployments.Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// rolledOut is kubectl rollout status's test: the current generation
	// observed, every replica updated and available, no old ones.
	rolledOut := func() (bool, string) {
		d := get()
		s := d.Status
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == replicas && s.Replicas == replicas &&
				s.AvailableReplicas == replicas && s.UnavailableReplicas == 0,
			fmt.Sprintf("generation %d, status %+v", d.Generation, s)
	}
	envtest.Eventually(t, "the deployment to become available", rolledOut)
	// The name is the hash of the template as the server defaulted it.
	d := get()
	oldRS := "web-" + deployment.PodTemplateHash(&d.Spec.Template, nil)
	if d.Annotations[deployment.RevisionAnnotation] != "1" {
		t.Errorf("deployment annotations %v", d.Annotations)
	}
	for _, ct := range []appsv1.DeploymentConditionType{appsv1.DeploymentAvailable, appsv1.DeploymentProgressing} {
		found := false
		for _, cond := range d.Status.Conditions {
			if cond.Type == ct {
				found = cond.Status == corev1.ConditionTrue
			}
		}
		if !found {
			t.Errorf("condition %s not True: %+v", ct, d.Status.Conditions)
		}
	}
	if rs, err := replicaSets.Get(t.Context(), oldRS, metav1.GetOptions{}); err != nil || *rs.Spec.Replicas != 3 {
		t.Fatalf("replica set %s: %v, %v", oldRS, rs, err)
	}

	// Sample the pods through the rollout, as kubectl get pods -w would.
	var mu sync.Mutex
	minAvailable, maxPods := int(replicas), 0
	sctx, stopSampling := context.WithCancel(t.Context())
	var sampling sync.WaitGroup
	sampling.Go(func() {
		for sctx.Err() == nil {
			l, err := pods.List(sctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err == nil {
				var available, running int
				for _, p := range l.Items {
					if podReady(p) {
						available++
					}
					if p.DeletionTimestamp == nil {
						running++
					}
				}
				mu.Lock()
				minAvailable, maxPods = min(minAvailable, available), max(maxPods, running)
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	// setImage is kubectl set image: a read, a change and a write, again
	// when the controller's status write came in between.
	setImage := func(image string) {
		t.Helper()
		for {
			d := get()
			d.Spec.Template = podTemplate(image)
			_, err := deployments.Update(t.Context(), d, metav1.UpdateOptions{})
			if err == nil {
				return
			}
			if !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
		}
	}
	setImage("web:2")
	envtest.Eventually(t, "the rollout to web:2", rolledOut)
	newRS := "web-" + deployment.PodTemplateHash(&get().Spec.Template, nil)
	envtest.Eventually(t, "the old replica set at zero", func() (bool, string) {
		a, errA := replicaSets.Get(t.Context(), oldRS, metav1.GetOptions{})
		b, errB := replicaSets.Get(t.Context(), newRS, metav1.GetOptions{})
		if errA != nil || errB != nil {
			return false, fmt.Sprint(errA, errB)
		}
		return *a.Spec.Replicas == 0 && *b.Spec.Replicas == 3 && b.Annotations[deployment.RevisionAnnotation] == "2",
			fmt.Sprintf("%s=%d %s=%d %v", oldRS, *a.Spec.Replicas, newRS, *b.Spec.Replicas, b.Annotations)
	})
	stopSampling()
	sampling.Wait()
	floor, ceiling := int(replicas-unavailable.IntVal), int(replicas+surge.IntVal)
	t.Logf("rollout of 3 (maxSurge 1, maxUnavailable 1): available pods never below %d, pods never above %d", minAvailable, maxPods)
	if minAvailable < floor || maxPods > ceiling {
		t.Errorf("available pods fell to %d (floor %d) or pods rose to %d (ceiling %d)", minAvailable, floor, maxPods, ceiling)
	}

	// kubectl rollout undo: the old template back.
	setImage("web:1")
	envtest.Eventually(t, "the rollback", rolledOut)
	envtest.Eventually(t, "the old replica set current again", func() (bool, string) {
		a, err := replicaSets.Get(t.Context(), oldRS, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		d := get()
		return *a.Spec.Replicas == 3 && a.Annotations[deployment.RevisionAnnotation] == "3" &&
				a.Annotations[deployment.RevisionHistoryAnnotation] == "1" && d.Annotations[deployment.RevisionAnnotation] == "3",
			fmt.Sprintf("%s: replicas %d, annotations %v; deployment's %v", oldRS, *a.Spec.Replicas, a.Annotations, d.Annotations)
	})
	l, err := replicaSets.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 2 {
		var names []string
		for _, rs := range l.Items {
			names = append(names, rs.Name)
		}
		t.Errorf("replica sets %v, want %s and %s only", names, oldRS, newRS)
	}
}

// TestE2EProgressDeadline: a Deployment whose pods never become ready
// (no scheduler takes them, as when no node fits) ends with
// Progressing=False, reason ProgressDeadlineExceeded, once
// progressDeadlineSeconds have passed without progress.
//
// Pods that end Failed (the simulated nodes' FailFraction) would not do:
// the ReplicaSet controller replaces them, status.replicas goes up and
// down, and kube's rule counts each rise of updatedReplicas as progress.
func TestE2EProgressDeadline(t *testing.T) {
	c := startCluster(t, podlifecycle.Options{StartDelay: 30 * time.Millisecond}, nil)
	deployments := client.For[*appsv1.Deployment](c, "e2e")
	replicas, deadline := int32(2), int32(2)
	unschedulable := podTemplate("web:1")
	unschedulable.Spec.SchedulerName = "no-such-scheduler"
	_, err := deployments.Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "broken"},
		Spec: appsv1.DeploymentSpec{
			Replicas:                &replicas,
			Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template:                unschedulable,
			ProgressDeadlineSeconds: &deadline,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	envtest.Eventually(t, "ProgressDeadlineExceeded", func() (bool, string) {
		d, err := deployments.Get(t.Context(), "broken", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentProgressing {
				return cond.Status == corev1.ConditionFalse && cond.Reason == deployment.ReasonProgressDeadlineExceeded,
					fmt.Sprintf("%+v", d.Status)
			}
		}
		return false, fmt.Sprintf("%+v", d.Status)
	})
	// Condition times are kept to the second, so the deadline counts from
	// up to a second before the last progress.
	if took := time.Since(start); took < time.Second {
		t.Errorf("timed out after %v, before the deadline of 2s", took)
	}
}

// TestScaleReplicaSetAgainstServer: the Deployment controller's scale, a
// JSON patch that tests the ReplicaSet's uid and generation, goes through
// when only the status moved since the copy it was decided on (as the
// ReplicaSet controller writes it while pods come and go), and is refused
// with a conflict when the spec moved or the ReplicaSet was replaced.
func TestScaleReplicaSetAgainstServer(t *testing.T) {
	env := envtest.Start(t, envtest.Options{})
	ctx := t.Context()
	if _, err := client.For[*corev1.Namespace](env.Client, "").Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rss := client.For[*appsv1.ReplicaSet](env.Client, "e2e")
	api := deployment.NewClient(env.Client)
	two := int32(2)
	seen, err := rss.Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"keep": "me"}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: podTemplate("web:1")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Status moves on: the copy seen is stale, but its spec is not.
	st := seen.DeepCopy()
	st.Status.Replicas = 2
	if _, err := rss.UpdateStatus(ctx, st, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{deployment.DesiredReplicasAnnotation: "5", deployment.MaxReplicasAnnotation: "6", "example.com/escaped": "yes"}
	scaled, err := api.ScaleReplicaSet(ctx, seen, 5, want)
	if err != nil {
		t.Fatalf("scale of a copy whose status alone is stale: %v", err)
	}
	if *scaled.Spec.Replicas != 5 || scaled.Status.Replicas != 2 || scaled.Generation != seen.Generation+1 {
		t.Errorf("scaled: replicas %d, status.replicas %d, generation %d (was %d)", *scaled.Spec.Replicas, scaled.Status.Replicas, scaled.Generation, seen.Generation)
	}
	for k, v := range map[string]string{deployment.DesiredReplicasAnnotation: "5", deployment.MaxReplicasAnnotation: "6", "example.com/escaped": "yes", "keep": "me"} {
		if scaled.Annotations[k] != v {
			t.Errorf("annotation %q = %q, want %q (all: %v)", k, scaled.Annotations[k], v, scaled.Annotations)
		}
	}
	// The spec moved on since seen (the scale itself did): refused.
	if _, err := api.ScaleReplicaSet(ctx, seen, 3, want); !apierrors.IsConflict(err) {
		t.Errorf("scale of a copy whose spec is stale: %v, want a conflict", err)
	}
	// Replaced under the same name: refused.
	if err := rss.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh := scaled.DeepCopy()
	fresh.ResourceVersion, fresh.UID, fresh.Generation = "", "", 0
	recreated, err := rss.Create(ctx, fresh, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := scaled.DeepCopy()
	old.Generation = recreated.Generation
	if _, err := api.ScaleReplicaSet(ctx, old, 3, want); !apierrors.IsConflict(err) {
		t.Errorf("scale of a replaced ReplicaSet: %v, want a conflict", err)
	}
}
