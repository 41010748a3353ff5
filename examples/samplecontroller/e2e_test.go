package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/envtest"
)

// eventually polls cond until it holds, failing t after a while.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s (last error: %v)", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSeedScenario is seed 002's walk-through on a real API server with
// the controller-manager's controllers: crd.yaml's example-foo gets a
// Deployment of one replica that it controls, whose ReplicaSet's pod
// becomes Ready and whose available replica reaches the Foo's status;
// three replicas asked of the Foo reach the Deployment and the status;
// deleting the Foo in the foreground removes the Deployment, its
// ReplicaSets and pods before the Foo goes.
func TestSeedScenario(t *testing.T) {
	env := envtest.Start(t, envtest.Options{CRDPaths: []string{"crd.yaml", "example-foo.yaml"}, Controllers: controllermanager.AllControllers()})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		if err := runController(ctx, env.Client, slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("sample controller: %v", err)
		}
	})

	foos := client.NewResource[*Foo](env.Client, fooGVR, "default")
	deployments := client.For[*appsv1.Deployment](env.Client, "default")
	foo, err := foos.Get(ctx, "example-foo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment example-foo exists, of 1 replica, controlled by the Foo", func() (bool, error) {
		d, err := deployments.Get(ctx, "example-foo", metav1.GetOptions{})
		return err == nil && *d.Spec.Replicas == 1 && metav1.IsControlledBy(d, foo), err
	})
	status := func(n int32) func() (bool, error) {
		return func() (bool, error) {
			f, err := foos.Get(ctx, "example-foo", metav1.GetOptions{})
			return err == nil && f.Status.AvailableReplicas == n, err
		}
	}
	eventually(t, "the pod is Ready and the Foo's status says 1 available", status(1))
	pods, err := client.For[*corev1.Pod](env.Client, "default").List(ctx, metav1.ListOptions{LabelSelector: "app=nginx,controller=example-foo"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods: %v, %v", pods, err)
	}
	if ref := metav1.GetControllerOf(pods.Items[0]); ref == nil || ref.Kind != "ReplicaSet" {
		t.Errorf("the pod's controller is %v, want a ReplicaSet", ref)
	}

	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"replicas": 3}})
	if _, err := foos.Patch(ctx, "example-foo", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment has 3 replicas", func() (bool, error) {
		d, err := deployments.Get(ctx, "example-foo", metav1.GetOptions{})
		return err == nil && *d.Spec.Replicas == 3, err
	})
	eventually(t, "the Foo's status says 3 available", status(3))

	foreground := metav1.DeletePropagationForeground
	if err := foos.Delete(ctx, "example-foo", metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Foo, its Deployment, ReplicaSets and pods are gone", func() (bool, error) {
		_, ferr := foos.Get(ctx, "example-foo", metav1.GetOptions{})
		_, derr := deployments.Get(ctx, "example-foo", metav1.GetOptions{})
		rss, err := client.For[*appsv1.ReplicaSet](env.Client, "default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err := client.For[*corev1.Pod](env.Client, "default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return apierrors.IsNotFound(ferr) && apierrors.IsNotFound(derr) && len(rss.Items) == 0 && len(pods.Items) == 0, nil
	})
}
