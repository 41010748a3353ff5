package namespace

// End to end: the controller, on the informers factory and the REST
// client, against listwatch's own API server on 127.0.0.1, on both storage
// backends.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/apiserver/serve"
	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/informers"
	"github.com/listwatch/listwatch/internal/testbackends"
	"github.com/listwatch/listwatch/storage"
)

// backends are the storage backends the end-to-end tests run on.
var backends = testbackends.All("namespace")

// crWidgets is the custom resource of the tests, and widgetsCRD its
// definition.
var crWidgets = struct{ Group, Version, Kind, Plural string }{"example.listwatch.dev", "v1", "Widget", "widgets"}

const widgetsCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"widgets.example.listwatch.dev"},
"spec":{"group":"example.listwatch.dev","scope":"Namespaced","names":{"kind":"Widget","plural":"widgets","singular":"widget"},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// e2eWait bounds every wait; it is what a hung controller fails on, never
// what a test measures.
const e2eWait = time.Minute

// waitFor polls cond until it holds, failing the test at the deadline with
// what cond last said.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(e2eWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
	}
	t.Fatalf("timed out waiting for %s; last: %s", what, last)
}

// e2eEnv is an API server, a client of it, and the namespace controller
// running on a shared informer factory.
type e2eEnv struct {
	st     storage.Interface
	client *client.Client
}

func startE2E(t *testing.T, st storage.Interface) *e2eEnv {
	t.Helper()
	objs, err := apiserver.ParseManifests([]byte(widgetsCRD))
	if err != nil {
		t.Fatal(err)
	}
	// The server as envtest and `listwatch up` serve it (envtest itself
	// runs this controller, and cannot be imported here).
	srv, err := serve.New(serve.Config{
		API: apiserver.Config{Storage: st,
			// No service account controller runs here: as kube's
			// integration tests and envtest, ServiceAccount admission is off.
			DisableAdmissionPlugins: []string{"ServiceAccount"}},
		CertDir:   t.TempDir(),
		AdminUser: "e2e",
		Manifests: objs,
	})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	run, stopServing := context.WithCancel(context.Background())
	go func() {
		defer close(served)
		if err := srv.Run(run); err != nil {
			t.Errorf("serving: %v", err)
		}
	}()
	if err := srv.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(&client.Config{REST: srv.RESTConfig(), QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(c, informers.Options{Reflector: cache.ReflectorOptions{Logger: quiet}})
	// A short grace period, so that the test does not wait kube's 5s for
	// each event, but one all the same: the delayed path is the one kube
	// takes.
	nc, err := New(informers.For[*corev1.Namespace](factory), NewClient(c), Options{Controller: controller.Options{Logger: quiet}, DeletionGracePeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := nc.Run(ctx); err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
		stopServing()
		<-served
	})
	return &e2eEnv{st: st, client: c}
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// content creates, in namespace ns, what the test deletes: pods, a
// configmap, a secret, a deployment, a custom resource, and, when held, a
// configmap with a finalizer nobody removes.
func (e *e2eEnv) content(t *testing.T, ns string, held bool) {
	t.Helper()
	ctx := t.Context()
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}
	}
	pods := client.For[*corev1.Pod](e.client, ns)
	must[*corev1.Pod](t)(pods.Create(ctx, pod("web-1"), metav1.CreateOptions{}))
	must[*corev1.Pod](t)(pods.Create(ctx, pod("web-2"), metav1.CreateOptions{}))
	cms := client.For[*corev1.ConfigMap](e.client, ns)
	must[*corev1.ConfigMap](t)(cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{}))
	if held {
		must[*corev1.ConfigMap](t)(cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{}))
	}
	must[*corev1.Secret](t)(client.For[*corev1.Secret](e.client, ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{}))
	labels := map[string]string{"app": "web"}
	must[*appsv1.Deployment](t)(client.For[*appsv1.Deployment](e.client, ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}},
		},
	}, metav1.CreateOptions{}))
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.listwatch.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "gizmo"}, "spec": map[string]any{"size": int64(3)},
	}}
	must[*unstructured.Unstructured](t)(client.NewUnstructured(e.client, widgetsE2E, ns).Create(ctx, w, metav1.CreateOptions{}))
}

var widgetsE2E = schema.GroupVersionResource{Group: crWidgets.Group, Version: crWidgets.Version, Resource: crWidgets.Plural}

// namespacedE2E are the resources content fills.
var namespacedE2E = []schema.GroupVersionResource{
	podsGVR, configmapsGVR, secretsGVR, appsv1.SchemeGroupVersion.WithResource("deployments"), widgetsE2E,
}

// names lists the names of gvr's objects in ns, as the server has them.
func (e *e2eEnv) names(t *testing.T, gvr schema.GroupVersionResource, ns string) []string {
	t.Helper()
	l, err := client.NewMetadata(e.client, gvr, ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list %s in %s: %v", gvr.Resource, ns, err)
	}
	var out []string
	for _, o := range l.Items {
		out = append(out, o.Name)
	}
	slices.Sort(out)
	return out
}

// conditionsOf describes a namespace's status conditions.
func conditionsOf(ns *corev1.Namespace) string {
	var b strings.Builder
	for _, c := range ns.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s %s %q; ", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func TestE2EDeleteNamespace(t *testing.T) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			st := b.New(t)
			e := startE2E(t, st)
			ctx := t.Context()
			nss := client.For[*corev1.Namespace](e.client, "")
			for _, name := range []string{"scratch", "keep"} {
				ns := must[*corev1.Namespace](t)(nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))
				if !slices.Equal(ns.Spec.Finalizers, []corev1.FinalizerName{corev1.FinalizerKubernetes}) {
					t.Fatalf("namespace %s created with spec.finalizers %v", name, ns.Spec.Finalizers)
				}
			}
			e.content(t, "scratch", true)
			e.content(t, "keep", false)
			oldUID := must[*corev1.Namespace](t)(nss.Get(ctx, "scratch", metav1.GetOptions{})).UID

			if err := nss.Delete(ctx, "scratch", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			ns := must[*corev1.Namespace](t)(nss.Get(ctx, "scratch", metav1.GetOptions{}))
			if ns.DeletionTimestamp == nil || ns.Status.Phase != corev1.NamespaceTerminating {
				t.Fatalf("deleted namespace: deletionTimestamp %v, phase %q; want set, Terminating", ns.DeletionTimestamp, ns.Status.Phase)
			}

			// Everything goes but the held configmap, which the
			// conditions report.
			wantRemaining := "Some resources are remaining: configmaps. has 1 resource instances"
			wantFinalizers := "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
			waitFor(t, "the content to go and the conditions to report the held configmap", func() (bool, string) {
				ns, err := nss.Get(ctx, "scratch", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				var left []string
				for _, gvr := range namespacedE2E {
					for _, n := range e.names(t, gvr, "scratch") {
						left = append(left, gvr.Resource+"/"+n)
					}
				}
				rem, fin := find(ns.Status.Conditions, corev1.NamespaceContentRemaining), find(ns.Status.Conditions, corev1.NamespaceFinalizersRemaining)
				ok := slices.Equal(left, []string{"configmaps/held"}) && rem != nil && rem.Status == corev1.ConditionTrue && rem.Message == wantRemaining &&
					fin != nil && fin.Status == corev1.ConditionTrue && fin.Message == wantFinalizers
				return ok, fmt.Sprintf("left %v; conditions %s", left, conditionsOf(ns))
			})
			ns = must[*corev1.Namespace](t)(nss.Get(ctx, "scratch", metav1.GetOptions{}))
			for _, c := range ns.Status.Conditions {
				switch c.Type {
				case corev1.NamespaceContentRemaining, corev1.NamespaceFinalizersRemaining:
				default:
					if ok := okConditions[c.Type]; c.Status != corev1.ConditionFalse || c.Reason != ok.reason || c.Message != ok.message {
						t.Errorf("condition %s=%s %s %q, want False %s %q", c.Type, c.Status, c.Reason, c.Message, ok.reason, ok.message)
					}
				}
			}
			if len(ns.Status.Conditions) != len(conditionTypes) {
				t.Errorf("conditions: %s", conditionsOf(ns))
			}
			if !slices.Equal(ns.Spec.Finalizers, []corev1.FinalizerName{corev1.FinalizerKubernetes}) {
				t.Errorf("spec.finalizers %v while content remains", ns.Spec.Finalizers)
			}

			// Nothing new may be created in a Terminating namespace.
			_, err := client.For[*corev1.ConfigMap](e.client, "scratch").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
			var se *client.StatusError
			if !apierrors.IsForbidden(err) || !errors.As(err, &se) || se.ErrStatus.Details == nil ||
				!slices.ContainsFunc(se.ErrStatus.Details.Causes, func(c metav1.StatusCause) bool { return c.Type == corev1.NamespaceTerminatingCause }) {
				t.Fatalf("create in a Terminating namespace: %v, want Forbidden with cause %s", err, corev1.NamespaceTerminatingCause)
			}

			// Once the finalizer's owner lets go, the controller, at
			// its next look (kube's estimate for content held by
			// finalizers), removes its finalizer and the namespace goes.
			must[*corev1.ConfigMap](t)(client.For[*corev1.ConfigMap](e.client, "scratch").Patch(ctx, "held", types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}))
			waitFor(t, "the namespace to go", func() (bool, string) {
				ns, err := nss.Get(ctx, "scratch", metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true, ""
				}
				if err != nil {
					return false, err.Error()
				}
				return false, fmt.Sprintf("phase %s, spec.finalizers %v, conditions %s", ns.Status.Phase, ns.Spec.Finalizers, conditionsOf(ns))
			})

			// Nothing of it is left in storage.
			all, err := st.List(ctx, "/registry/", storage.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range all.Items {
				if strings.Contains(kv.Key, "/scratch/") || strings.HasSuffix(kv.Key, "/namespaces/scratch") {
					t.Errorf("left in storage: %s", kv.Key)
				}
			}
			// The other namespace's content is untouched.
			for _, gvr := range namespacedE2E {
				if got := e.names(t, gvr, "keep"); len(got) == 0 {
					t.Errorf("%s of namespace keep were deleted", gvr.Resource)
				}
			}

			// A namespace of the same name starts empty.
			ns = must[*corev1.Namespace](t)(nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "scratch"}}, metav1.CreateOptions{}))
			if ns.UID == oldUID || ns.DeletionTimestamp != nil || ns.Status.Phase != corev1.NamespaceActive || len(ns.Status.Conditions) != 0 {
				t.Errorf("recreated namespace: uid %s (old %s), deletionTimestamp %v, phase %q, conditions %s",
					ns.UID, oldUID, ns.DeletionTimestamp, ns.Status.Phase, conditionsOf(ns))
			}
			for _, gvr := range namespacedE2E {
				if got := e.names(t, gvr, "scratch"); len(got) != 0 {
					t.Errorf("recreated namespace holds old %s: %v", gvr.Resource, got)
				}
			}
			if _, err := client.For[*corev1.ConfigMap](e.client, "scratch").Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("old configmap in the recreated namespace: %v", err)
			}
		})
	}
}

// TestE2EImmortalAndEmpty: an empty namespace goes at the controller's
// first look; the namespaces kube keeps cannot be deleted and are left
// alone.
func TestE2EImmortalAndEmpty(t *testing.T) {
	e := startE2E(t, backends[0].New(t))
	ctx := t.Context()
	nss := client.For[*corev1.Namespace](e.client, "")
	// default is the server's own, made at start.
	must[*corev1.Namespace](t)(nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "empty"}}, metav1.CreateOptions{}))
	if err := nss.Delete(ctx, metav1.NamespaceDefault, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete of %s: %v, want Forbidden", metav1.NamespaceDefault, err)
	}
	if err := nss.Delete(ctx, "empty", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the empty namespace to go", func() (bool, string) {
		_, err := nss.Get(ctx, "empty", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	ns := must[*corev1.Namespace](t)(nss.Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{}))
	if ns.DeletionTimestamp != nil || ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("%s: deletionTimestamp %v, phase %s", metav1.NamespaceDefault, ns.DeletionTimestamp, ns.Status.Phase)
	}
}
