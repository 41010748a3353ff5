package protodecode

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"
)

// message is what the generated code gives every API type.
type message interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// filler returns a randfill.Filler seeded with seed whose values the
// generated Marshal can encode.
func filler(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.2).NumElements(0, 3).MaxDepth(12).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			switch c.Intn(4) {
			case 0:
				*q = resource.Quantity{}
			case 1:
				*q = *resource.NewMilliQuantity(c.Int63n(1e9), resource.DecimalSI)
			case 2:
				*q = *resource.NewQuantity(c.Int63n(1<<40), resource.BinarySI)
			default:
				*q = resource.MustParse(fmt.Sprintf("%d%s", c.Intn(5000), []string{"", "m", "Ki", "Mi", "G", "e3"}[c.Intn(6)]))
			}
		},
		func(t *metav1.Time, c randfill.Continue) {
			if c.Intn(5) == 0 {
				*t = metav1.Time{}
				return
			}
			*t = metav1.Unix(c.Int63n(4e9), c.Int63n(1e9))
		},
		func(t *metav1.MicroTime, c randfill.Continue) {
			if c.Intn(5) == 0 {
				*t = metav1.MicroTime{}
				return
			}
			*t = metav1.NewMicroTime(time.Unix(c.Int63n(4e9), c.Int63n(1e9)))
		},
		func(d *metav1.Duration, c randfill.Continue) {
			d.Duration = time.Duration(c.Int63n(1e12) - 5e11)
		},
		func(v *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*v = intstr.FromInt32(c.Int31() - c.Int31())
			} else {
				*v = intstr.FromString(c.String(8))
			}
		},
		func(r *runtime.RawExtension, c randfill.Continue) {
			*r = runtime.RawExtension{}
			if c.Bool() {
				r.Raw = []byte(fmt.Sprintf(`{"n":%d}`, c.Int()))
			}
		},
		func(f *metav1.FieldsV1, c randfill.Continue) {
			*f = *metav1.NewFieldsV1(c.String(40))
		},
		func(m *metav1.ObjectMeta, c randfill.Continue) {
			c.FillNoCustom(m)
			// Make the skipped field common enough to exercise.
			if c.Bool() && len(m.ManagedFields) == 0 {
				m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: c.String(5), Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:a":{}}`)}}
			}
		},
	)
}

// realisticPod returns a pod as a cluster stores it: 3.2 KB encoded, a
// sixth of it managed fields.
func realisticPod() *corev1.Pod {
	ts := metav1.Unix(1767225600, 0)
	yes, no := true, false
	grace := int64(30)
	prio := int32(0)
	policy := corev1.PreemptLowerPriority
	toleration := int64(300)
	mode := int32(420)
	expire := int64(3607)
	cpu := func(s string) resource.Quantity { return resource.MustParse(s) }
	container := func(name, image string, port int32) corev1.Container {
		return corev1.Container{
			Name:    name,
			Image:   image,
			Command: []string{"/bin/" + name},
			Args:    []string{"--port=" + fmt.Sprint(port), "--v=2"},
			Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
			Env: []corev1.EnvVar{
				{Name: "LOG_LEVEL", Value: "info"},
				{Name: "GOMAXPROCS", Value: "2"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
				{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
			},
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: cpu("500m"), corev1.ResourceMemory: cpu("256Mi")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: cpu("100m"), corev1.ResourceMemory: cpu("128Mi")},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "config", MountPath: "/etc/" + name, ReadOnly: true},
				{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
			},
			LivenessProbe: &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}},
				TimeoutSeconds:   1,
				PeriodSeconds:    10,
				SuccessThreshold: 1,
				FailureThreshold: 3,
			},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
				TimeoutSeconds:   1,
				PeriodSeconds:    5,
				SuccessThreshold: 1,
				FailureThreshold: 3,
			},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
			SecurityContext:          &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, RunAsNonRoot: &yes},
		}
	}
	status := func(name, image string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name:         name,
			State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ts}},
			Ready:        true,
			RestartCount: 0,
			Image:        image,
			ImageID:      image + "@sha256:4b1e2e4a9b0c53c3f4cbb1ce0f86b86de3b1e8a9f8e3c2a7d5e1f0a9b8c7d6e5",
			ContainerID:  "containerd://9f1c2b3a4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8",
			Started:      &yes,
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              "web-7d9f8b6c5d-x2x7q",
			GenerateName:      "web-7d9f8b6c5d-",
			Namespace:         "production",
			UID:               types.UID("5f0c7a2e-3b1d-4c8e-9a6f-2d4b8e1c7f3a"),
			ResourceVersion:   "123456789",
			CreationTimestamp: ts,
			Labels: map[string]string{
				"app":                         "web",
				"app.kubernetes.io/name":      "web",
				"app.kubernetes.io/component": "frontend",
				"pod-template-hash":           "7d9f8b6c5d",
				"tier":                        "frontend",
			},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z",
				"prometheus.io/scrape":              "true",
				"prometheus.io/port":                "9090",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8b6c5d", UID: "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9", Controller: &yes, BlockOwnerDeletion: &yes}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &ts, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0a1b2c3d\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{}}}}}`)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &ts, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:status":{},"f:type":{}}},"f:podIP":{},"f:startTime":{}}}`), Subresource: "status"},
			},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}, DefaultMode: &mode}}},
				{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expire}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}},
			},
			Containers:                    []corev1.Container{container("web", "registry.example.com/web:1.24.3", 8080), container("sidecar", "registry.example.com/proxy:2.1.0", 15001)},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "web",
			DeprecatedServiceAccount:      "web",
			NodeName:                      "node-pool-a-7f3k",
			SecurityContext:               &corev1.PodSecurityContext{RunAsNonRoot: &yes},
			SchedulerName:                 "default-scheduler",
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &toleration},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &toleration},
			},
			Priority:           &prio,
			EnableServiceLinks: &yes,
			PreemptionPolicy:   &policy,
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: ts},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ts},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: ts},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: ts},
			},
			HostIP:            "10.0.3.17",
			HostIPs:           []corev1.HostIP{{IP: "10.0.3.17"}},
			PodIP:             "10.244.7.23",
			PodIPs:            []corev1.PodIP{{IP: "10.244.7.23"}},
			StartTime:         &ts,
			ContainerStatuses: []corev1.ContainerStatus{status("web", "registry.example.com/web:1.24.3"), status("sidecar", "registry.example.com/proxy:2.1.0")},
			QOSClass:          corev1.PodQOSBurstable,
		},
	}
}

// mustMarshal encodes m with its generated Marshal.
func mustMarshal(m message) []byte {
	b, err := m.Marshal()
	if err != nil {
		panic(err)
	}
	return b
}
