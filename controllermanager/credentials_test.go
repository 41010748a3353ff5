package controllermanager_test

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/envtest"
)

// TestServiceAccountCredentials runs the ReplicaSet controller as its own
// user behind the server's authentication and RBAC (kube's bootstrap
// controller roles, created at start): it does its work, creating a
// ReplicaSet's pods, which its role allows; and its client is refused
// what the role does not allow, deleting a namespace, with the 403 kube
// gives that user. The manager's own credentials (system:masters) could
// do both: the refusal shows the controller does not act with them.
func TestServiceAccountCredentials(t *testing.T) {
	// The server alone: the manager is made here, as a member of
	// system:masters (envtest's user), which may impersonate the
	// controllers' accounts.
	env := envtest.Start(t, envtest.Options{})
	cc := &client.Config{REST: env.Config, QPS: -1}
	if user, ok := controllermanager.ControllerUser(controllermanager.ReplicaSet); !ok || user != "system:serviceaccount:kube-system:replicaset-controller" {
		t.Fatalf("ControllerUser(%s) = %q, %v", controllermanager.ReplicaSet, user, ok)
	}
	if _, ok := controllermanager.ControllerUser(controllermanager.PodLifecycle); ok {
		t.Errorf("%s, the stand-in for kubelets, has a controller account", controllermanager.PodLifecycle)
	}
	m := runManager(t, controllermanager.Config{
		Client:                    cc,
		Controllers:               []string{controllermanager.ReplicaSet},
		ServiceAccountCredentials: true,
	})

	admin, err := client.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	replicas := int32(2)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	if _, err := client.For[*appsv1.ReplicaSet](admin, "default").Create(t.Context(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := client.For[*corev1.Pod](admin, "default")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		l, err := pods.List(t.Context(), metav1.ListOptions{LabelSelector: labels.SelectorFromSet(map[string]string{"app": "web"}).String()})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controllermanager.ReplicaSet controller made %d of 2 pods as its own user", len(l.Items))
		}
	}

	err = client.For[*corev1.Namespace](controllermanager.ControllerClient(m, controllermanager.ReplicaSet), "").Delete(t.Context(), "kube-system", metav1.DeleteOptions{})
	want := `namespaces "kube-system" is forbidden: User "system:serviceaccount:kube-system:replicaset-controller" cannot delete resource "namespaces" in API group "" in the namespace "kube-system"`
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("delete namespace kube-system as the controllermanager.ReplicaSet controller: %v, want 403 %s", err, want)
	}
	if _, err := client.For[*corev1.Namespace](admin, "").Get(t.Context(), "kube-system", metav1.GetOptions{}); err != nil {
		t.Errorf("kube-system after the refused delete: %v", err)
	}
}
