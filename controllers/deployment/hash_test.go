package deployment

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubecontroller "k8s.io/kubernetes/pkg/controller"
)

// TestPodTemplateHashIsKubes checks the hash against kube's own
// controller.ComputeHash (k8s.io/kubernetes v1.37, imported by this test
// only), with and without collisionCount: the same template must name
// the same ReplicaSet under either controller.
func TestPodTemplateHashIsKubes(t *testing.T) {
	one, seven := int32(1), int32(7)
	templates := map[string]*corev1.PodTemplateSpec{
		"empty": {},
		"nginx": {
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "nginx", Image: "nginx", ImagePullPolicy: corev1.PullAlways,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}}, RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler"},
		},
		"resources and annotations": {
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"b": "2", "a": "1"}, Annotations: map[string]string{"z": "y"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: "busybox:1.36", Command: []string{"sleep", "3600"},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
			}}},
		},
	}
	for name, tmpl := range templates {
		for _, cc := range []*int32{nil, &one, &seven} {
			got := PodTemplateHash(tmpl, cc)
			want := kubecontroller.ComputeHash(tmpl, cc)
			if got != want {
				t.Errorf("%s, collisionCount %v: hash %s, kube's %s", name, cc, got, want)
			}
		}
	}
}
