package compat_test

// Seed 002's sample controller scenario through client-go and
// controller-runtime against listwatch's server (envtest, with the
// controller-manager's controllers): listwatch's own sample controller,
// run as its binary, driven and watched by client-go's dynamic client,
// clientset and shared informers; and the same controller written with
// controller-runtime, run by a manager.

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/envtest"
)

// sampleCRDs are the Foo CRD and example-foo of examples/samplecontroller.
var sampleCRDs = []string{"../examples/samplecontroller/crd.yaml", "../examples/samplecontroller/example-foo.yaml"}

// TestSampleControllerThroughClientGo runs listwatch's sample controller
// (go build ./examples/samplecontroller, run with -kubeconfig) and drives
// seed 002's scenario with client-go alone: example-foo's Deployment of one
// replica, controlled by the Foo, appears in a client-go informer with its
// ReplicaSet's Ready pod; the Foo's status says 1 available; a merge patch
// through the dynamic client to 3 replicas reaches the Deployment and the
// status; a foreground delete of the Foo leaves it in place until the
// Deployment, its ReplicaSets and pods are gone, as a watch of the Foo
// shows.
func TestSampleControllerThroughClientGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sample controller")
	}
	bin := filepath.Join(t.TempDir(), "samplecontroller")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/listwatch/listwatch/examples/samplecontroller").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := envtest.Start(t, envtest.Options{CRDPaths: sampleCRDs, Controllers: controllermanager.AllControllers()})
	sc := exec.Command(bin, "-kubeconfig", env.Kubeconfig)
	sc.Stderr = tLog{t}
	if err := sc.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sc.Wait() }()
	// Registered after envtest's: the controller stops before the server.
	t.Cleanup(func() {
		_ = sc.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("sample controller exited with %v after SIGINT, want 0", err)
			}
		case <-time.After(30 * time.Second):
			_ = sc.Process.Kill()
			t.Error("sample controller still running 30 s after SIGINT")
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	foos := dynamic.NewForConfigOrDie(env.Config).Resource(fooGVR).Namespace("default")
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	deployments := factory.Apps().V1().Deployments().Lister()
	replicaSets := factory.Apps().V1().ReplicaSets().Lister()
	pods := factory.Core().V1().Pods().Lister()
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer of %v not synced", typ)
		}
	}
	seed := labels.SelectorFromSet(labels.Set{"controller": "example-foo"})
	foo, err := foos.Get(ctx, "example-foo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment of one replica controlled by example-foo, in the informer", func() (bool, string) {
		d, err := deployments.Deployments("default").Get("example-foo")
		if err != nil {
			return false, err.Error()
		}
		return *d.Spec.Replicas == 1 && metav1.IsControlledBy(d, foo), fmt.Sprintf("%+v", d.ObjectMeta)
	})
	ready := func(want int) func() (bool, string) {
		return func() (bool, string) {
			l, err := pods.List(seed)
			n := 0
			for _, p := range l {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						n++
					}
				}
			}
			return err == nil && n == want, fmt.Sprintf("%d of %d pods ready (%v)", n, len(l), err)
		}
	}
	eventually(t, "the pod is Ready", ready(1))
	if rs, err := replicaSets.List(seed); err != nil || len(rs) != 1 || metav1.GetControllerOf(rs[0]).Kind != "Deployment" {
		t.Errorf("replica sets %v (%v), want one controlled by the Deployment", rs, err)
	}
	status := func(want int64) func() (bool, string) {
		return func() (bool, string) {
			f, err := foos.Get(ctx, "example-foo", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			n, _, _ := unstructured.NestedInt64(f.Object, "status", "availableReplicas")
			return n == want, fmt.Sprintf("status.availableReplicas %d", n)
		}
	}
	eventually(t, "the Foo's status says 1 available", status(1))

	if _, err := foos.Patch(ctx, "example-foo", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment has 3 replicas", func() (bool, string) {
		d, err := deployments.Deployments("default").Get("example-foo")
		return err == nil && *d.Spec.Replicas == 3, fmt.Sprint(err)
	})
	eventually(t, "3 pods are Ready", ready(3))
	eventually(t, "the Foo's status says 3 available", status(3))

	w, err := foos.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=example-foo", ResourceVersion: foo.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := foos.Delete(ctx, "example-foo", metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(waitTimeout)
	for deleted := false; !deleted; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of the Foo ended before its deletion")
			}
			deleted = ev.Type == watch.Deleted
		case <-timeout:
			t.Fatalf("the Foo is still there %v after its foreground deletion", waitTimeout)
		}
	}
	// The Foo is gone: its dependents went first.
	if _, err := cs.AppsV1().Deployments("default").Get(ctx, "example-foo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment outlived the Foo's foreground deletion: %v", err)
	}
	rs, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: seed.String()})
	if err != nil || len(rs.Items) != 0 {
		t.Errorf("replica sets left after the Foo's foreground deletion: %d (%v)", len(rs.Items), err)
	}
	pl, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: seed.String()})
	if err != nil || len(pl.Items) != 0 {
		t.Errorf("pods left after the Foo's foreground deletion: %d (%v)", len(pl.Items), err)
	}
}

// TestSampleControllerRuntime runs the controller-runtime version of the
// sample controller (fooReconciler) on envtest: example-foo gets its
// Deployment, controlled by it; the Deployment's available replica reaches
// the Foo's status; 3 replicas asked of the Foo reach both.
func TestSampleControllerRuntime(t *testing.T) {
	env := envtest.Start(t, envtest.Options{CRDPaths: sampleCRDs, Controllers: controllermanager.AllControllers()})
	scheme, err := fooScheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := setupFooController(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	c := mgr.GetClient()
	key := types.NamespacedName{Namespace: "default", Name: "example-foo"}
	status := func(want int32) func() (bool, string) {
		return func() (bool, string) {
			var foo Foo
			if err := c.Get(ctx, key, &foo); err != nil {
				return false, err.Error()
			}
			return foo.Status.AvailableReplicas == want, fmt.Sprintf("status.availableReplicas %d", foo.Status.AvailableReplicas)
		}
	}
	eventually(t, "the Foo's status says 1 available", status(1))
	var foo Foo
	if err := c.Get(ctx, key, &foo); err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, key, &d); err != nil || !metav1.IsControlledBy(&d, &foo) || *d.Spec.Replicas != 1 {
		t.Fatalf("deployment %+v (%v), want 1 replica controlled by the Foo", d.ObjectMeta, err)
	}
	foo.Spec.Replicas = new(int32(3))
	if err := c.Update(ctx, &foo); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment has 3 replicas", func() (bool, string) {
		err := c.Get(ctx, key, &d)
		return err == nil && *d.Spec.Replicas == 3, fmt.Sprint(err)
	})
	eventually(t, "the Foo's status says 3 available", status(3))
}

// tLog writes a process's output to the test's log.
type tLog struct{ t *testing.T }

func (w tLog) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
