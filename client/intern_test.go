package client

import (
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
