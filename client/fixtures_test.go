package client

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/listwatch/listwatch/cache"
)

// makePod returns a pod as a real API server stores one for a Deployment's
// replica: about 2 KB of JSON plus managedFields.
func makePod(i int, rv int) *corev1.Pod {
	name := fmt.Sprintf("web-7d4b9c8f6d-%05d", i)
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t := true
	grace := int64(30)
	fields := `{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"5f1e8e9c-0c8e-4b0e-9a53-1f9f3f6c1a11\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"f:resources":{".":{},"f:limits":{".":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}}}}}}`
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: "web-7d4b9c8f6d-", Namespace: "default",
			UID:               types.UID(fmt.Sprintf("8c2f6b1e-3d4a-4f5b-9c6d-%012d", i)),
			ResourceVersion:   fmt.Sprint(rv),
			CreationTimestamp: created,
			Labels:            map[string]string{"app": "web", "pod-template-hash": "7d4b9c8f6d"},
			Annotations:       map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-01-02T03:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c8f6d",
				UID: "5f1e8e9c-0c8e-4b0e-9a53-1f9f3f6c1a11", Controller: &t, BlockOwnerDeletion: &t}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: &created, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "web", Image: "registry.example.com/web:1.25.3",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}},
					PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
				VolumeMounts:             []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy:          corev1.PullIfNotPresent,
			}},
			Volumes: []corev1.Volume{{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr(int64(3607)), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}},
				DefaultMode: ptr(int32(420))}}}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "default",
			NodeName:                      fmt.Sprintf("node-%03d", i%100),
			SchedulerName:                 "default-scheduler",
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))}},
			Priority:           ptr(int32(0)),
			EnableServiceLinks: &t,
			PreemptionPolicy:   ptr(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
			},
			HostIP: fmt.Sprintf("10.0.%d.%d", i/250%250, i%250), PodIP: fmt.Sprintf("10.244.%d.%d", i/250%250, i%250),
			PodIPs:    []corev1.PodIP{{IP: fmt.Sprintf("10.244.%d.%d", i/250%250, i%250)}},
			StartTime: &created,
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "web", Ready: true, RestartCount: int32(i % 3), Image: "registry.example.com/web:1.25.3",
				ImageID:     "registry.example.com/web@sha256:4c1b0a5f7d1e2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4",
				ContainerID: fmt.Sprintf("containerd://%064d", i), Started: &t,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}},
			}},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
}

func ptr[T any](v T) *T { return &v }

// envelope wraps an object's protobuf message as the API server does.
func envelope(t testing.TB, obj interface{ Marshal() ([]byte, error) }, apiVersion, kind string) []byte {
	t.Helper()
	raw, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	b, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte{}, protoMagic...), b...)
}

// recordedEvent is one event of a recorded history.
type recordedEvent struct {
	typ    cache.EventType
	pod    *corev1.Pod
	status *metav1.Status
}

// jsonStream encodes events as an API server's JSON watch stream.
func jsonStream(t testing.TB, evs []recordedEvent) []byte {
	t.Helper()
	var out []byte
	for _, ev := range evs {
		var obj any = ev.pod
		if ev.status != nil {
			obj = ev.status
		}
		b, err := json.Marshal(struct {
			Type   cache.EventType `json:"type"`
			Object any             `json:"object"`
		}{ev.typ, obj})
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, b...), '\n')
	}
	return out
}

// protoFrame encodes one event as a frame of a protobuf watch stream.
func protoFrame(t testing.TB, ev recordedEvent) []byte {
	t.Helper()
	var raw []byte
	if ev.status != nil {
		raw = envelope(t, ev.status, "v1", "Status")
	} else {
		raw = envelope(t, ev.pod, "v1", "Pod")
	}
	we := metav1.WatchEvent{Type: string(ev.typ), Object: runtime.RawExtension{Raw: raw}}
	b, err := we.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// protoStream encodes events as an API server's protobuf watch stream.
func protoStreamOf(t testing.TB, evs []recordedEvent) []byte {
	var out []byte
	for _, ev := range evs {
		out = append(out, protoFrame(t, ev)...)
	}
	return out
}

// history is a realistic sequence of events over n pods: each added, some
// modified, a bookmark, some deleted.
func history(n int) []recordedEvent {
	var evs []recordedEvent
	rv := 100
	for i := range n {
		rv++
		evs = append(evs, recordedEvent{typ: cache.EventAdded, pod: makePod(i, rv)})
	}
	for i := 0; i < n; i += 2 {
		rv++
		p := makePod(i, rv)
		p.Status.Phase = corev1.PodSucceeded
		evs = append(evs, recordedEvent{typ: cache.EventModified, pod: p})
	}
	rv++
	evs = append(evs, recordedEvent{typ: cache.EventBookmark, pod: &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: fmt.Sprint(rv), Annotations: map[string]string{cache.InitialEventsEndAnnotation: "true"}}}})
	for i := 0; i < n; i += 3 {
		rv++
		evs = append(evs, recordedEvent{typ: cache.EventDeleted, pod: makePod(i, rv)})
	}
	return evs
}
