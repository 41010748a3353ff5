package client

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

func sameString(a, b string) bool {
	return len(a) > 0 && unsafe.StringData(a) == unsafe.StringData(b)
}

func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	return a != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// Objects decoded for an informer's cache, from protobuf or JSON, equal
// those decoded plainly (less their managedFields), and share the strings
// and small maps they repeat; objects decoded for a caller share nothing.
func TestSharedDecoding(t *testing.T) {
	for _, proto := range []bool{true, false} {
		t.Run(fmt.Sprint("protobuf=", proto), func(t *testing.T) {
			plain, err := newCodec[*corev1.Pod](corev1.SchemeGroupVersion)
			if err != nil {
				t.Fatal(err)
			}
			plain.dropManaged = true
			sharing := *plain
			sharing.share = true
			decode := func(c *codec[*corev1.Pod], p *corev1.Pod) *corev1.Pod {
				t.Helper()
				var obj *corev1.Pod
				var err error
				if proto {
					raw, merr := p.Marshal()
					if merr != nil {
						t.Fatal(merr)
					}
					obj, err = c.decodeProto(wrapEnvelope(raw, "v1", "Pod"))
				} else {
					b, merr := json.Marshal(p)
					if merr != nil {
						t.Fatal(merr)
					}
					obj, err = c.decodeJSON(c.decoder(), b)
				}
				if err != nil {
					t.Fatal(err)
				}
				return obj
			}
			var first [2]*corev1.Pod
			for i := range 40 {
				in := makePod(i, 100+i)
				// Variety: init containers, containers without resources,
				// a second container with its own.
				if i%3 == 0 {
					in.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 10+i%2))}}}}
				}
				if i%4 == 0 {
					in.Spec.Containers = append(in.Spec.Containers, corev1.Container{Name: "side", Image: "side:1"})
				}
				got, want := decode(&sharing, in), decode(plain, in)
				if !apiequality.Semantic.DeepEqual(got, want) {
					t.Fatalf("pod %d: shared decoding differs from plain decoding:\n%+v\n%+v", i, got, want)
				}
				if got.ManagedFields != nil {
					t.Fatalf("pod %d kept managedFields", i)
				}
				if i < 2 {
					first[i] = got
				}
				if i == 4 {
					a, b := first[0], got
					if !sameMap(a.Labels, b.Labels) || !sameMap(a.Annotations, b.Annotations) ||
						!sameMap(a.Spec.Containers[0].Resources.Requests, b.Spec.Containers[0].Resources.Requests) {
						t.Error("equal labels, annotations or resources not shared")
					}
					if !sameString(a.Namespace, b.Namespace) || !sameString(a.Spec.Containers[0].Image, b.Spec.Containers[0].Image) ||
						!sameString(a.OwnerReferences[0].Name, b.OwnerReferences[0].Name) || !sameString(a.Spec.SchedulerName, b.Spec.SchedulerName) {
						t.Error("equal strings not shared")
					}
					if sameString(a.Name, b.Name) {
						t.Error("different names share a string")
					}
					p := decode(plain, in)
					if sameMap(p.Labels, b.Labels) || sameString(p.Namespace, b.Namespace) {
						t.Error("an object decoded for a caller shares with cached ones")
					}
				}
			}
		})
	}
}

// A pod whose labels differ keeps its own map, with its keys and values
// shared.
func TestSharedDecodingDistinctMaps(t *testing.T) {
	c, err := newCodec[*corev1.Pod](corev1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	c.share = true
	var pods []*corev1.Pod
	for i := range 2 {
		p := makePod(i, 1)
		p.Labels["rev"] = fmt.Sprint(i)
		raw, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.decodeProto(wrapEnvelope(raw, "v1", "Pod"))
		if err != nil {
			t.Fatal(err)
		}
		if got.Labels["rev"] != fmt.Sprint(i) || len(got.Labels) != 3 {
			t.Fatalf("labels %v", got.Labels)
		}
		pods = append(pods, got)
	}
	if sameMap(pods[0].Labels, pods[1].Labels) {
		t.Fatal("different labels share a map")
	}
	var k0, k1 string
	for k := range pods[0].Labels {
		if k == "app" {
			k0 = k
		}
	}
	for k := range pods[1].Labels {
		if k == "app" {
			k1 = k
		}
	}
	if !sameString(k0, k1) || !sameString(pods[0].Labels["app"], pods[1].Labels["app"]) {
		t.Error("label keys and values not shared")
	}
}

// The pod decoder for caches (protodecode) sizes the repeated fields of a
// status, spec and container before decoding them, to their exact length
// as they come one after another, and still
// merges a message repeated in the encoding (spec or status sent in two
// parts) as the generated decoder does.
func TestSharedProtoPresized(t *testing.T) {
	in := makePod(1, 7)
	in.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}, {Name: "C", Value: "3"}}
	in.Status.ContainerStatuses = append(in.Status.ContainerStatuses, corev1.ContainerStatus{Name: "side", Image: "side:1"})
	in.Status.HostIPs = []corev1.HostIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
	raw, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// A second status and spec, each with one more element, appended:
	// protobuf merges them into the first.
	extraStatus := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: "Extra", Status: corev1.ConditionTrue}}}
	extraSpec := corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "extra", Operator: corev1.TolerationOpExists}}}
	sb, err := extraStatus.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	pb, err := extraSpec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	const fieldPodSpec, fieldPodStatus = 2, 3
	raw = protowireAppendBytes(raw, fieldPodStatus, sb)
	raw = protowireAppendBytes(raw, fieldPodSpec, pb)
	var want corev1.Pod
	if err := want.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	if len(want.Status.Conditions) != len(in.Status.Conditions)+1 || len(want.Spec.Tolerations) != len(in.Spec.Tolerations)+1 {
		t.Fatal("the fixture does not merge")
	}
	c, err := newCodec[*corev1.Pod](corev1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	c.dropManaged, c.share = true, true
	got, err := c.decodeProto(wrapEnvelope(raw, "v1", "Pod"))
	if err != nil {
		t.Fatal(err)
	}
	want.ManagedFields = nil
	want.APIVersion, want.Kind = "v1", "Pod"
	if !apiequality.Semantic.DeepEqual(got, &want) {
		t.Fatalf("shared decoding differs from plain decoding:\n%+v\n%+v", got, &want)
	}
	// One message each: sized exactly.
	got, err = c.decodeProto(wrapEnvelope(mustMarshal(t, in), "v1", "Pod"))
	if err != nil {
		t.Fatal(err)
	}
	s := &got.Status
	ctr := &got.Spec.Containers[0]
	for name, lc := range map[string][2]int{
		"conditions":        {len(s.Conditions), cap(s.Conditions)},
		"containerStatuses": {len(s.ContainerStatuses), cap(s.ContainerStatuses)},
		"hostIPs":           {len(s.HostIPs), cap(s.HostIPs)},
		"volumes":           {len(got.Spec.Volumes), cap(got.Spec.Volumes)},
		"tolerations":       {len(got.Spec.Tolerations), cap(got.Spec.Tolerations)},
		"env":               {len(ctr.Env), cap(ctr.Env)},
		"volumeMounts":      {len(ctr.VolumeMounts), cap(ctr.VolumeMounts)},
	} {
		if lc[0] == 0 || lc[0] != lc[1] {
			t.Errorf("%s: length %d, capacity %d", name, lc[0], lc[1])
		}
	}
}

func mustMarshal(t *testing.T, p *corev1.Pod) []byte {
	t.Helper()
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// protowireAppendBytes appends field num, length-delimited, holding b.
func protowireAppendBytes(dst []byte, num int, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(num)<<3|2)
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}
