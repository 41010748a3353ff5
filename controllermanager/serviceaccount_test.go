package controllermanager_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/client"
	"github.com/listwatch/listwatch/controllermanager"
	"github.com/listwatch/listwatch/controllers/rootcacert"
	"github.com/listwatch/listwatch/envtest"
)

// TestServiceAccountsAndRootCA runs the service account controller and the
// root CA publisher against an API server that runs kube's ServiceAccount
// admission (envtest turns it on with the service account controller): a
// new namespace gets its account "default" and the ConfigMap
// kube-root-ca.crt with the CA the controllers trust the server by, and a
// pod created in it right away is admitted with the token volume that
// reads them.
func TestServiceAccountsAndRootCA(t *testing.T) {
	for _, name := range []string{controllermanager.ServiceAccount, controllermanager.RootCACert} {
		if !slices.Contains(controllermanager.AllControllers(), name) {
			t.Fatalf("AllControllers() = %v lacks %s", controllermanager.AllControllers(), name)
		}
	}
	env := envtest.Start(t, envtest.Options{
		Controllers: []string{controllermanager.ServiceAccount, controllermanager.RootCACert},
	})
	ca := string(env.Config.CAData)
	if ca == "" {
		t.Fatal("envtest's rest.Config has no CA")
	}
	c := env.Client
	if _, err := client.For[*corev1.Namespace](c, "").Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// ServiceAccount admission waits a moment for the account "default"
	// the controller is creating.
	p, err := client.For[*corev1.Pod](c, "fresh").Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.ServiceAccountName != "default" || len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].Projected == nil {
		t.Errorf("pod spec %+v", p.Spec)
	}
	var cm *corev1.ConfigMap
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if cm, err = client.For[*corev1.ConfigMap](c, "fresh").Get(t.Context(), rootcacert.ConfigMapName, metav1.GetOptions{}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data[rootcacert.DataKey] != ca || cm.Annotations[rootcacert.DescriptionAnnotation] == "" {
		t.Errorf("ConfigMap %+v", cm)
	}
}
