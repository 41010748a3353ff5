package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/randfill"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/wire"
	"github.com/listwatch/listwatch/internal/jsontree"
)

// jsonTyped is the conversion typedOf replaced, and the definition it is
// checked against: the object's JSON decoded into its Go type, as
// kube-apiserver decodes a body.
func jsonTyped(u *unstructured.Unstructured, typed runtime.Object) error {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return sigsjson.UnmarshalCaseSensitivePreserveInts(raw, typed)
}

// typedFiller fills API types with values their JSON can carry: times to
// the second (micro for MicroTime), canonical quantities, JSON raw
// extensions.
func typedFiller(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.25).NumElements(0, 3).MaxDepth(10).Funcs(
		func(q *apiresource.Quantity, c randfill.Continue) {
			*q = apiresource.MustParse(fmt.Sprintf("%d%s", c.Intn(5000), []string{"", "m", "Ki", "Mi", "G"}[c.Intn(5)]))
		},
		func(t *metav1.Time, c randfill.Continue) {
			*t = metav1.Time{}
			if c.Intn(4) != 0 {
				*t = metav1.Unix(c.Int63n(4e9), 0)
			}
		},
		func(t *metav1.MicroTime, c randfill.Continue) {
			*t = metav1.MicroTime{}
			if c.Intn(4) != 0 {
				*t = metav1.NewMicroTime(time.Unix(c.Int63n(4e9), c.Int63n(1e6)*1e3))
			}
		},
		func(d *metav1.Duration, c randfill.Continue) { d.Duration = time.Duration(c.Int63n(1e12)) },
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
				r.Raw = []byte(fmt.Sprintf(`{"n":%d,"s":%q}`, c.Int63(), c.String(6)))
			}
		},
		func(f *metav1.FieldsV1, c randfill.Continue) {
			*f = *metav1.NewFieldsV1(fmt.Sprintf(`{"f:%s":{}}`, c.String(6)))
		},
	)
}

// TestTypedOfMatchesJSONDecoding: for random objects of every built-in
// type the server encodes as protobuf, decoded from their JSON as the
// server holds them (jsontree), typedOf's conversion gives the same
// protobuf message as decoding the JSON into the Go type does.
func TestTypedOfMatchesJSONDecoding(t *testing.T) {
	kinds := registry.Scheme.AllKnownTypes()
	gvks := make([]schema.GroupVersionKind, 0, len(kinds))
	for gvk, typ := range kinds {
		if _, ok := reflect.New(typ).Interface().(wire.ProtoMessage); ok && gvk.Version != runtime.APIVersionInternal {
			gvks = append(gvks, gvk)
		}
	}
	slices.SortFunc(gvks, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	seeds := 20
	if testing.Short() {
		seeds = 3
	}
	checked := 0
	for _, gvk := range gvks {
		for seed := range seeds {
			obj, err := registry.Scheme.New(gvk)
			if err != nil {
				t.Fatal(err)
			}
			typedFiller(int64(seed)).Fill(obj)
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			js, err := json.Marshal(obj)
			if err != nil {
				continue // a value JSON cannot carry: not an object the server holds
			}
			m, err := jsontree.DecodeObject(js)
			if err != nil {
				t.Fatalf("%v seed %d: %v", gvk, seed, err)
			}
			u := &unstructured.Unstructured{Object: m}
			if u.GroupVersionKind() != gvk {
				// An unversioned type (WatchEvent, options), registered
				// in every group, or one with no TypeMeta of its own:
				// not an object the server stores.
				break
			}
			want, _ := registry.Scheme.New(gvk)
			if err := jsonTyped(u, want); err != nil {
				continue // JSON that does not decode into its own type
			}
			got, err := wire.Typed(u)
			if err != nil {
				t.Errorf("%v seed %d: typedOf: %v", gvk, seed, err)
				continue
			}
			wb, err := want.(wire.ProtoMessage).Marshal()
			if err != nil {
				continue
			}
			gb, err := got.(wire.ProtoMessage).Marshal()
			if err != nil {
				t.Errorf("%v seed %d: marshal: %v", gvk, seed, err)
				continue
			}
			if !bytes.Equal(gb, wb) {
				t.Errorf("%v seed %d: protobuf differs\n got %x\nwant %x\nJSON %s", gvk, seed, gb, wb, js)
				continue
			}
			checked++
		}
	}
	if checked < len(gvks)*seeds/2 {
		t.Fatalf("checked %d objects of %d kinds; the filler makes too few the server could hold", checked, len(gvks))
	}
	t.Logf("checked %d objects of %d kinds", checked, len(gvks))
}

// runningPod is a running pod of a Deployment as the server holds it.
func runningPod(b *testing.B) *unstructured.Unstructured {
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-5d8f7c9b6-abcde", GenerateName: "web-5d8f7c9b6-", Namespace: "bench", UID: "0f3e4a4e-7f6b-4c1e-9a3a-1b2c3d4e5f60",
			ResourceVersion: "12345", CreationTimestamp: metav1.Unix(1_790_000_000, 0),
			Labels: map[string]string{"app": "web", "pod-template-hash": "5d8f7c9b6"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f7c9b6",
				UID: "1f3e4a4e-7f6b-4c1e-9a3a-1b2c3d4e5f60", Controller: new(true), BlockOwnerDeletion: new(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: new(metav1.Unix(1_790_000_000, 0)), FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{}}}}}`)}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27", ImagePullPolicy: corev1.PullIfNotPresent,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: corev1.DefaultSchedulerName,
			NodeName: "node-1", EnableServiceLinks: new(true), TerminationGracePeriodSeconds: new(int64(30)),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.0.1", PodIP: "10.244.0.1", StartTime: new(metav1.Unix(1_790_000_001, 0)),
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Image: "nginx:1.27", Ready: true, ImageID: "sim://nginx:1.27", ContainerID: "sim://0f3e/0"}},
		},
	}
	js, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	m, err := jsontree.DecodeObject(js)
	if err != nil {
		b.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// BenchmarkTypedOf compares typedOf with the JSON decoding it replaced.
func BenchmarkTypedOf(b *testing.B) {
	u := runningPod(b)
	b.Run("converter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wire.Typed(u); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := jsonTyped(u, &corev1.Pod{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
