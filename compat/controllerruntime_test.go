package compat_test

// A controller-runtime manager and reconciler of a custom resource, tested
// against listwatch's envtest as the kubebuilder book writes such a test
// (the CRD installed from a directory, objects created, waits until they
// converge), with what controller-runtime's own envtest cannot do: the
// controller-manager's controllers make the Deployment's pods, the garbage
// collector deletes what an owner reference ties to a deleted object, and
// a deleted namespace goes away.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/envtest"
)

var websiteGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Website"}

func newWebsite() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(websiteGVK)
	return u
}

// websiteReconciler keeps, for every Website, a Deployment of its image
// and replicas that the Website controls, and the Deployment's available
// replicas in the Website's status.
type websiteReconciler struct{ crclient.Client }

func (r *websiteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	site := newWebsite()
	if err := r.Get(ctx, req.NamespacedName, site); err != nil {
		return ctrl.Result{}, crclient.IgnoreNotFound(err)
	}
	image, _, _ := unstructured.NestedString(site.Object, "spec", "image")
	replicas, _, _ := unstructured.NestedInt64(site.Object, "spec", "replicas")
	labels := map[string]string{"website": site.GetName()}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: site.GetName(), Namespace: site.GetNamespace()}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, d, func() error {
		d.Spec.Replicas = new(int32(replicas))
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		d.Spec.Template.Labels = labels
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web", Image: image}}
		return controllerutil.SetControllerReference(site, d, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	have, _, _ := unstructured.NestedInt64(site.Object, "status", "availableReplicas")
	if have == int64(d.Status.AvailableReplicas) {
		return ctrl.Result{}, nil
	}
	if err := unstructured.SetNestedField(site.Object, int64(d.Status.AvailableReplicas), "status", "availableReplicas"); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.Status().Update(ctx, site)
}

func TestControllerRuntimeOnEnvtest(t *testing.T) {
	env := envtest.Start(t, envtest.Options{
		CRDPaths:    []string{"testdata/crds"},
		Controllers: controllermanager.AllControllers(),
	})
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).For(newWebsite()).Owns(&appsv1.Deployment{}).
		Complete(&websiteReconciler{mgr.GetClient()}); err != nil {
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
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	site := newWebsite()
	site.SetNamespace("shop")
	site.SetName("web")
	site.Object["spec"] = map[string]any{"image": "nginx:1.27", "replicas": int64(2)}
	if err := c.Create(ctx, site); err != nil {
		t.Fatal(err)
	}
	key := crclient.ObjectKeyFromObject(site)
	eventually(t, "the Website's status says 2 available", func() (bool, string) {
		got := newWebsite()
		if err := c.Get(ctx, key, got); err != nil {
			return false, err.Error()
		}
		n, _, _ := unstructured.NestedInt64(got.Object, "status", "availableReplicas")
		return n == 2, fmt.Sprintf("%d available", n)
	})
	var d appsv1.Deployment
	if err := c.Get(ctx, key, &d); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(&d); ref == nil || ref.Kind != "Website" {
		t.Fatalf("the Deployment's controller is %v, want the Website", ref)
	}

	if err := c.Delete(ctx, site); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the garbage collector deleted the Deployment and its pods", func() (bool, string) {
		err := c.Get(ctx, key, &appsv1.Deployment{})
		var pods corev1.PodList
		if lerr := c.List(ctx, &pods, crclient.InNamespace("shop")); lerr != nil {
			return false, lerr.Error()
		}
		return apierrors.IsNotFound(err) && len(pods.Items) == 0, fmt.Sprintf("deployment: %v, %d pods", err, len(pods.Items))
	})

	if err := c.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	eventually(t, "namespace shop is gone", func() (bool, string) {
		err := c.Get(ctx, crclient.ObjectKeyFromObject(ns), &corev1.Namespace{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestEnvtestParallel runs 20 tests at once, each with a server of its
// own: what one writes, no other sees.
func TestEnvtestParallel(t *testing.T) {
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			env := envtest.Start(t, envtest.Options{CRDPaths: []string{"testdata/crds"}})
			c, err := crclient.New(env.Config, crclient.Options{Scheme: scheme.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			site := newWebsite()
			site.SetNamespace("default")
			site.SetName(fmt.Sprintf("site-%d", i))
			site.Object["spec"] = map[string]any{"image": "nginx"}
			if err := c.Create(ctx, site); err != nil {
				t.Fatal(err)
			}
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(websiteGVK.GroupVersion().WithKind("WebsiteList"))
			if err := c.List(ctx, list); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 1 || list.Items[0].GetName() != site.GetName() {
				t.Fatalf("environment %d lists %d websites, want only its own", i, len(list.Items))
			}
			// The schema's default reached the object.
			if n, _, _ := unstructured.NestedInt64(list.Items[0].Object, "spec", "replicas"); n != 1 {
				t.Errorf("spec.replicas = %d, want the default 1", n)
			}
		})
	}
}
