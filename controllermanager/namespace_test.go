package controllermanager_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/namespace"
	"github.com/listwatch/listwatch/controllers/podlifecycle"
	"github.com/listwatch/listwatch/envtest"
)

// TestNamespaceDeletion runs the manager's namespace controller, with the
// pod lifecycle one standing in for kubelets, against an API server: a
// deleted namespace whose pod runs on a node waits for the pod's graceful
// termination, then its other content goes, then the namespace.
func TestNamespaceDeletion(t *testing.T) {
	if !slices.Contains(controllermanager.AllControllers(), controllermanager.Namespace) {
		t.Fatalf("AllControllers() = %v lacks %s", controllermanager.AllControllers(), controllermanager.Namespace)
	}
	env := envtest.Start(t, envtest.Options{
		Controllers:  []string{controllermanager.PodLifecycle, controllermanager.Namespace, controllermanager.ServiceAccount},
		PodLifecycle: podlifecycle.Options{StartDelay: time.Millisecond, TerminationDelay: 100 * time.Millisecond},
		Namespace:    namespace.Options{DeletionGracePeriod: 50 * time.Millisecond},
	})
	c := env.Client
	nss := client.For[*corev1.Namespace](c, "")
	pods := client.For[*corev1.Pod](c, "scratch")
	cms := client.For[*corev1.ConfigMap](c, "scratch")
	if _, err := nss.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "scratch"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grace := int64(1)
	if _, err := pods.Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll := func(what string, cond func() (bool, string)) {
		t.Helper()
		var last string
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var ok bool
			if ok, last = cond(); ok {
				return
			}
		}
		t.Fatalf("timed out waiting for %s; last: %s", what, last)
	}
	poll("the pod to run on a node", func() (bool, string) {
		p, err := pods.Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning, fmt.Sprintf("node %q phase %s", p.Spec.NodeName, p.Status.Phase)
	})

	if err := nss.Delete(t.Context(), "scratch", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The running pod is deleted gracefully; until it is gone, the
	// configmap stays.
	poll("the pod to terminate gracefully", func() (bool, string) {
		// The configmap first: gone while the pod is still there (read
		// after it) means it went while the pod was terminating.
		_, cmErr := cms.Get(t.Context(), "settings", metav1.GetOptions{})
		p, err := pods.Get(t.Context(), "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		if apierrors.IsNotFound(cmErr) {
			t.Fatalf("configmap deleted while the pod was terminating (deletionTimestamp %v)", p.DeletionTimestamp)
		}
		return false, fmt.Sprintf("deletionTimestamp %v", p.DeletionTimestamp)
	})
	poll("the namespace to go", func() (bool, string) {
		ns, err := nss.Get(t.Context(), "scratch", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s, spec.finalizers %v, conditions %v", ns.Status.Phase, ns.Spec.Finalizers, ns.Status.Conditions)
	})
	if _, err := cms.Get(t.Context(), "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("configmap after the namespace went: %v", err)
	}
}
