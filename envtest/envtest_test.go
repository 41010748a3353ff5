package envtest_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/envtest"
	"github.com/listwatch/listwatch/internal/kubelog"
)

func TestMain(m *testing.M) {
	kubelog.ToStderr()
	goleak.VerifyTestMain(m)
}

// eventually polls cond until it holds, failing t after a while.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
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

// TestStart starts a bare server on each store and reaches it as users
// would: client-go from Config, and a client-go built from the kubeconfig
// file, as kubectl reads it.
func TestStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts envtest.Options
	}{
		{"memory", envtest.Options{}},
		{"etcd", envtest.Options{Etcd: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := envtest.Start(t, tc.opts)
			cs := kubernetes.NewForConfigOrDie(env.Config)
			for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
				if _, err := cs.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{}); err != nil {
					t.Errorf("namespace %s: %v", ns, err)
				}
			}
			fromFile, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": "b"}}
			if _, err := kubernetes.NewForConfigOrDie(fromFile).CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// Kubernetes' validation, as a real cluster answers.
			bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "no-containers"}}
			if _, err := cs.CoreV1().Pods("default").Create(t.Context(), bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
				t.Errorf("pod without containers: %v, want 422 Invalid", err)
			}
		})
	}
}

// TestParallel runs several environments at once, each isolated.
func TestParallel(t *testing.T) {
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			env := envtest.Start(t, envtest.Options{})
			cs := kubernetes.NewForConfigOrDie(env.Config)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-here"}}
			if _, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create in environment %d: %v", i, err)
			}
		})
	}
}

// TestCRDPaths installs the sample controller's CRD file and a Foo's:
// the Foo is created, and checked against the schema.
func TestCRDPaths(t *testing.T) {
	env := envtest.Start(t, envtest.Options{CRDPaths: []string{"../examples/samplecontroller/crd.yaml", "../examples/samplecontroller/example-foo.yaml"}})
	foos := dynamic.NewForConfigOrDie(env.Config).Resource(schema.GroupVersionResource{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Resource: "foos"})
	foo, err := foos.Namespace("default").Get(t.Context(), "example-foo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	foo.Object["spec"] = map[string]any{"deploymentName": "x", "replicas": int64(11)}
	foo.SetResourceVersion("")
	foo.SetName("too-many")
	if _, err := foos.Namespace("default").Create(t.Context(), foo, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a Foo of 11 replicas: %v, want 422 Invalid (the schema's maximum is 10)", err)
	}
}

// TestControllers runs the controller-manager's controllers, which
// envtest's users do without: a ReplicationController's pods are made and
// become Ready, the garbage collector deletes them with it, and a deleted
// namespace is emptied and goes away.
func TestControllers(t *testing.T) {
	env := envtest.Start(t, envtest.Options{Controllers: controllermanager.AllControllers()})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	rc := &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: new(int32(3)),
			Selector: labels,
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
	if _, err := cs.CoreV1().ReplicationControllers("work").Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the RC's 3 pods are ready", func() (bool, error) {
		got, err := cs.CoreV1().ReplicationControllers("work").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas == 3, err
	})

	foreground := metav1.DeletePropagationForeground
	if err := cs.CoreV1().ReplicationControllers("work").Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the RC and its pods are gone", func() (bool, error) {
		pods, err := cs.CoreV1().Pods("work").List(ctx, metav1.ListOptions{})
		_, gerr := cs.CoreV1().ReplicationControllers("work").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && len(pods.Items) == 0 && apierrors.IsNotFound(gerr), err
	})

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "left"}}
	if _, err := cs.CoreV1().ConfigMaps("work").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "work", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "namespace work is gone", func() (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "work", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

// TestNew starts and stops an environment without a testing.TB, as a
// Ginkgo suite does, and finds its files removed.
func TestNew(t *testing.T) {
	env, err := envtest.New(envtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	env.Stop()
	env.Stop()
	if _, err := os.Stat(env.Kubeconfig); !os.IsNotExist(err) {
		t.Errorf("kubeconfig after Stop: %v, want it removed", err)
	}
}
