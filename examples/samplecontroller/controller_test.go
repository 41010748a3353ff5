package main

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
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache/cachetest"
	"github.com/listwatch/listwatch/controller"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClient writes into the fake informers, as an API server and its
// watches would, and counts the writes.
type fakeClient struct {
	foos        *cachetest.Informer[*Foo]
	deployments *cachetest.Informer[*appsv1.Deployment]
	mu          sync.Mutex
	writes      []string
}

func (f *fakeClient) record(w string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, w)
}

func (f *fakeClient) CreateDeployment(_ context.Context, d *appsv1.Deployment) error {
	f.record("create " + d.Name)
	return f.deployments.Add(d)
}

func (f *fakeClient) UpdateDeployment(_ context.Context, d *appsv1.Deployment) error {
	f.record("update " + d.Name)
	return f.deployments.Update(d)
}

func (f *fakeClient) UpdateFooStatus(_ context.Context, foo *Foo) error {
	f.record("status " + foo.GetName())
	return f.foos.Update(foo)
}

func (f *fakeClient) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.writes
	f.writes = nil
	return out
}

func newFoo(name, deployment string, replicas int32) *Foo {
	return &Foo{
		TypeMeta:   metav1.TypeMeta{APIVersion: "samplecontroller.k8s.io/v1alpha1", Kind: "Foo"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec:       FooSpec{DeploymentName: deployment, Replicas: &replicas},
	}
}

// fakeEvents records the reasons of the events recorded.
type fakeEvents struct {
	mu      sync.Mutex
	reasons []string
}

func (f *fakeEvents) Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reasons = append(f.reasons, reason)
}

// took returns the distinct reasons recorded since the last call.
func (f *fakeEvents) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Compact(f.reasons)
	f.reasons = nil
	return out
}

// TestSampleController runs the controller on fake informers, with no API
// server: a Foo gets its Deployment, a change of replicas reaches it, the
// Deployment's available replicas reach the Foo's status, and a
// Deployment someone else controls is left alone, and a Foo being deleted
// gets no new Deployment.
func TestSampleController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &fakeClient{foos: cachetest.NewInformer(newFoo("web", "web", 2)), deployments: cachetest.NewInformer[*appsv1.Deployment]()}
		events := &fakeEvents{}
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		c, err := New(api.foos, api.deployments, api, events, controller.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		step := func(name string, wantEvents []string, want ...string) {
			t.Helper()
			time.Sleep(time.Minute)
			synctest.Wait()
			if got := api.took(); !slices.Equal(got, want) {
				t.Errorf("%s: writes %q, want %q", name, got, want)
			}
			if got := events.took(); !slices.Equal(got, wantEvents) {
				t.Errorf("%s: events %q, want %q", name, got, wantEvents)
			}
		}
		synced := []string{SuccessSynced}

		step("a Foo gets its Deployment", synced, "create web")
		d, ok, _ := api.deployments.GetIndexer().GetByKey("default/web")
		if !ok || *d.Spec.Replicas != 2 || !metav1.IsControlledBy(d, newFoo("web", "web", 2)) {
			t.Fatalf("deployment %+v", d)
		}

		if err := api.foos.Update(newFoo("web", "web", 3)); err != nil {
			t.Fatal(err)
		}
		step("replicas reach the Deployment", synced, "update web")

		d, _, _ = api.deployments.GetIndexer().GetByKey("default/web")
		d = d.DeepCopy()
		d.Status.AvailableReplicas = 3
		d.ResourceVersion = "2"
		if err := api.deployments.Update(d); err != nil {
			t.Fatal(err)
		}
		step("available replicas reach the status", synced, "status web")
		foo, _, _ := api.foos.GetIndexer().GetByKey("default/web")
		if n := foo.Status.AvailableReplicas; n != 3 {
			t.Errorf("status.availableReplicas = %d, want 3", n)
		}

		if err := api.deployments.Add(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "taken"}}); err != nil {
			t.Fatal(err)
		}
		if err := api.foos.Add(newFoo("other", "taken", 1)); err != nil {
			t.Fatal(err)
		}
		step("someone else's Deployment is left alone", []string{ErrResourceExists})

		if err := api.foos.Delete(newFoo("other", "taken", 1), false); err != nil {
			t.Fatal(err)
		}
		// In a foreground deletion the Foo outlives its Deployment for a
		// moment: it must not get a new one.
		going := newFoo("going", "going", 1)
		going.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		going.Finalizers = []string{metav1.FinalizerDeleteDependents}
		if err := api.foos.Add(going); err != nil {
			t.Fatal(err)
		}
		step("a Foo being deleted gets no Deployment", nil)

		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
