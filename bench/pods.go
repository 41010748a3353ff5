package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Quantities are immutable once parsed, so every pod shares these.
var (
	qtyCPUReq   = resource.MustParse("250m")
	qtyCPULimit = resource.MustParse("1")
	qtyMemReq   = resource.MustParse("256Mi")
	qtyMemLimit = resource.MustParse("512Mi")
	qtySideCPU  = resource.MustParse("50m")
	qtySideMem  = resource.MustParse("64Mi")
)

// managedFields JSON, shaped like what kube-controller-manager (for a
// ReplicaSet's pod) and the kubelet (status) really write.
const (
	fieldsControllerManager = `{"f:metadata":{"f:annotations":{".":{},"f:prometheus.io/port":{},"f:prometheus.io/scrape":{}},"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:app.kubernetes.io/name":{},"f:pod-template-hash":{},"f:tier":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"%s\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:args":{},"f:env":{".":{},"k:{\"name\":\"LOG_LEVEL\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"POD_NAME\"}":{".":{},"f:name":{},"f:valueFrom":{".":{},"f:fieldRef":{}}}},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},"f:resources":{".":{},"f:limits":{".":{},"f:cpu":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:volumeMounts":{".":{},"k:{\"mountPath\":\"/etc/app\"}":{".":{},"f:mountPath":{},"f:name":{},"f:readOnly":{}}}},"k:{\"name\":\"log-shipper\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:terminationGracePeriodSeconds":{},"f:volumes":{".":{},"k:{\"name\":\"config\"}":{".":{},"f:configMap":{".":{},"f:name":{}},"f:name":{}}}}}`
	fieldsKubelet           = `{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:startTime":{}}}`
)

// buildPods returns n realistic, distinct pods, both as the PodList
// client-go's ListFunc serves and as pointers into that list's items, which
// listwatch's ListFunc serves: the two libraries see the very same objects.
func buildPods(n int, seed uint64) (*corev1.PodList, []*corev1.Pod) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	list := &corev1.PodList{
		TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: "1"},
		Items:    make([]corev1.Pod, n),
	}
	ptrs := make([]*corev1.Pod, n)
	base := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	for i := range list.Items {
		fillPod(&list.Items[i], i, rng, base)
		ptrs[i] = &list.Items[i]
	}
	return list, ptrs
}

func uid(rng *rand.Rand) types.UID {
	a, b := rng.Uint64(), rng.Uint64()
	return types.UID(fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", a>>32, a>>16&0xffff, a&0xffff, b>>48, b&0xffffffffffff))
}

func ptr[T any](v T) *T { return &v }

func fillPod(p *corev1.Pod, i int, rng *rand.Rand, base time.Time) {
	app := fmt.Sprintf("svc-%03d", i%211)
	ns := fmt.Sprintf("team-%02d", i%50)
	hash := strconv.FormatUint(rng.Uint64()%(1<<40), 36)
	rsName := app + "-" + hash
	name := fmt.Sprintf("%s-%05x", rsName, i)
	node := fmt.Sprintf("node-%03d-%c", i%300, 'a'+byte(i%3))
	podIP := fmt.Sprintf("10.%d.%d.%d", 64+i>>16&63, i>>8&255, i&255)
	hostIP := fmt.Sprintf("192.168.%d.%d", i%300/250, i%250+1)
	created := metav1.NewTime(base.Add(time.Duration(i) * time.Second))
	started := metav1.NewTime(created.Add(3 * time.Second))
	ready := metav1.NewTime(created.Add(9 * time.Second))
	rsUID := uid(rng)
	image := "reg.example/" + app + ":v1." + strconv.Itoa(i%17) + ".3"
	cid := func() string {
		return fmt.Sprintf("containerd://%016x%016x%016x%016x", rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64())
	}

	*p = corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			GenerateName:      rsName + "-",
			Namespace:         ns,
			UID:               uid(rng),
			ResourceVersion:   strconv.Itoa(1_000_000 + i),
			CreationTimestamp: created,
			Labels: map[string]string{
				"app":                    app,
				"app.kubernetes.io/name": app,
				"pod-template-hash":      hash,
				"tier":                   []string{"frontend", "backend", "worker"}[i%3],
			},
			Annotations: map[string]string{
				"prometheus.io/scrape": "true",
				"prometheus.io/port":   "9090",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         "apps/v1",
				Kind:               "ReplicaSet",
				Name:               rsName,
				UID:                rsUID,
				Controller:         ptr(true),
				BlockOwnerDeletion: ptr(true),
			}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{
					Manager:    "kube-controller-manager",
					Operation:  metav1.ManagedFieldsOperationUpdate,
					APIVersion: "v1",
					Time:       &created,
					FieldsType: "FieldsV1",
					FieldsV1:   metav1.NewFieldsV1(fmt.Sprintf(fieldsControllerManager, rsUID)),
				},
				{
					Manager:     "kubelet",
					Operation:   metav1.ManagedFieldsOperationUpdate,
					APIVersion:  "v1",
					Time:        &ready,
					FieldsType:  "FieldsV1",
					FieldsV1:    metav1.NewFieldsV1(fieldsKubelet),
					Subresource: "status",
				},
			},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"},
					DefaultMode:          ptr(int32(420)),
				}}},
			},
			Containers: []corev1.Container{
				{
					Name:  "app",
					Image: image,
					Ports: []corev1.ContainerPort{
						{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
					},
					Env: []corev1.EnvVar{
						{Name: "LOG_LEVEL", Value: "info"},
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
					},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: qtyCPUReq, corev1.ResourceMemory: qtyMemReq},
						Limits:   corev1.ResourceList{corev1.ResourceCPU: qtyCPULimit, corev1.ResourceMemory: qtyMemLimit},
					},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "config", MountPath: "/etc/app", ReadOnly: true},
					},
					ImagePullPolicy: corev1.PullIfNotPresent,
				},
				{
					Name:  "log-shipper",
					Image: "reg.example/infra/log-shipper:2.4.1",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: qtySideCPU, corev1.ResourceMemory: qtySideMem},
					},
					VolumeMounts:    []corev1.VolumeMount{},
					ImagePullPolicy: corev1.PullIfNotPresent,
				},
			},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr(int64(30)),
			DNSPolicy:                     corev1.DNSClusterFirst,
			NodeName:                      node,
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ready},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
			},
			HostIP:    hostIP,
			PodIP:     podIP,
			StartTime: &created,
			ContainerStatuses: []corev1.ContainerStatus{
				{
					Name:         "app",
					State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
					Ready:        true,
					Image:        image,
					ImageID:      "reg.example/" + app + "@sha256:" + fmt.Sprintf("%016x%016x%016x%016x", rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64()),
					ContainerID:  cid(),
					Started:      ptr(true),
					RestartCount: int32(i % 3),
				},
				{
					Name:        "log-shipper",
					State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
					Ready:       true,
					Image:       "reg.example/infra/log-shipper:2.4.1",
					ImageID:     "reg.example/infra/log-shipper@sha256:5f2b3c9a0d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a",
					ContainerID: cid(),
					Started:     ptr(true),
				},
			},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
}
