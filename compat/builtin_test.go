package compat_test

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// TestTypedClientsOfBuiltinResources uses client-go's typed clients and
// shared informers on resources beyond pods and RCs (config maps, secrets,
// service accounts, deployments, replica sets, jobs, roles), in JSON and
// protobuf: what they create comes back with kube's defaults, what kube
// refuses is refused with its 422, and the informers converge on the
// server's state through creates, updates and deletes.
func TestTypedClientsOfBuiltinResources(t *testing.T) {
	for _, b := range backends {
		for _, ct := range []string{mediaJSON, mediaProtobuf} {
			t.Run(b.name+"/"+ct, func(t *testing.T) {
				s := startServer(t, b, serverOptions{})
				cs := s.clientset(ct)
				ctx := t.Context()

				factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
				cms := factory.Core().V1().ConfigMaps().Informer()
				deps := factory.Apps().V1().Deployments().Informer()
				jobs := factory.Batch().V1().Jobs().Informer()
				factory.Start(ctx.Done())
				t.Cleanup(factory.Shutdown)
				if !cache.WaitForCacheSync(ctx.Done(), cms.HasSynced, deps.HasSynced, jobs.HasSynced) {
					t.Fatal("informers did not sync")
				}

				for i := range 3 {
					if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
						ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"k": "v"},
					}, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				sec, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"password": "s3cret"},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if sec.Type != corev1.SecretTypeOpaque || string(sec.Data["password"]) != "s3cret" {
					t.Errorf("secret: type %q data %q, want Opaque with stringData moved to data", sec.Type, sec.Data)
				}
				if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				labels := map[string]string{"app": "web"}
				template := corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
				}
				dep, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
					ObjectMeta: metav1.ObjectMeta{Name: "web"},
					Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
					dep.Spec.Template.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent || dep.Generation != 1 {
					t.Errorf("deployment not defaulted as kube does: replicas %v, strategy %q, pull policy %q, generation %d",
						dep.Spec.Replicas, dep.Spec.Strategy.Type, dep.Spec.Template.Spec.Containers[0].ImagePullPolicy, dep.Generation)
				}
				_, err = cs.AppsV1().ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{
					ObjectMeta: metav1.ObjectMeta{Name: "mismatch"},
					Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}, Template: template},
				}, metav1.CreateOptions{})
				if !apierrors.IsInvalid(err) {
					t.Errorf("replica set whose selector does not match its template: %v, want 422 Invalid", err)
				}
				job, err := cs.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{
					ObjectMeta: metav1.ObjectMeta{Name: "once"},
					Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
					}}},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 6 || job.Spec.Selector == nil {
					t.Errorf("job not defaulted as kube does: backoffLimit %v, selector %v", job.Spec.BackoffLimit, job.Spec.Selector)
				}
				if _, err := cs.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{
					ObjectMeta: metav1.ObjectMeta{Name: "reader"},
					Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}},
				}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}

				// Changes reach the informers.
				cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "cm-1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				cm.Data["k"] = "changed"
				if _, err := cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "cm-2", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				eventually(t, "config map informer", func() (bool, string) {
					keys := cms.GetStore().ListKeys()
					obj, ok, _ := cms.GetStore().GetByKey("default/cm-1")
					changed := ok && obj.(*corev1.ConfigMap).Data["k"] == "changed"
					return len(keys) == 2 && changed, fmt.Sprintf("keys %v, cm-1 changed %v", keys, changed)
				})
				eventually(t, "deployment and job informers", func() (bool, string) {
					return len(deps.GetStore().ListKeys()) == 1 && len(jobs.GetStore().ListKeys()) == 1,
						fmt.Sprintf("deployments %v, jobs %v", deps.GetStore().ListKeys(), jobs.GetStore().ListKeys())
				})
			})
		}
	}
}
