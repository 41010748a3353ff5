package registry

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestEncodeOnce holds EncodeOnce's two forms to what encoding the object
// twice gives: the storage form to EncodeStored's, the answer to
// MarshalJSON's with the revision set, byte for byte.
func TestEncodeOnce(t *testing.T) {
	cases := map[string]func() Object{
		"typed pod": func() Object {
			return &corev1.Pod{
				TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", Labels: map[string]string{"a": "b"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			}
		},
		"typed pod whose annotations imitate the member": func() Object {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{
				"resourceVersion": "\x00AAAA", "x": `"resourceVersion":"\u0000"`,
			}}}
		},
		"typed Object with nothing but the resourceVersion": func() Object { return &corev1.ConfigMap{} },
		"custom resource, keys sorted": func() Object {
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.com/v1", "kind": "Foo",
				"data":     map[string]any{"resourceVersion": "\x00"},
				"metadata": map[string]any{"name": "f", "annotations": map[string]any{"resourceVersion": "\x00" + rvPlaceholder[1:3]}, "uid": "u"},
				"spec":     map[string]any{"replicas": int64(3)},
			}}
		},
		"custom resource with empty metadata": func() Object {
			return &unstructured.Unstructured{Object: map[string]any{"kind": "Foo", "metadata": map[string]any{}}}
		},
		"custom resource whose resourceVersion member comes last": func() Object {
			return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "a"}}}
		},
	}
	for name, newObj := range cases {
		t.Run(name, func(t *testing.T) {
			for _, rev := range []int64{1, 42, 1 << 40} {
				enc, err := EncodeOnce(newObj())
				if err != nil {
					t.Fatal(err)
				}
				if enc.at < 0 {
					t.Fatal("the placeholder was not found")
				}
				want, err := EncodeStored(newObj())
				if err != nil {
					t.Fatal(err)
				}
				if got := enc.Stored(); !bytes.Equal(got, want) {
					t.Errorf("stored:\n got %s\nwant %s", got, want)
				}
				obj := newObj()
				obj.SetResourceVersion(fmt.Sprint(rev))
				wantAnswer, err := MarshalJSON(obj)
				if err != nil {
					t.Fatal(err)
				}
				if got := enc.Answer(rev); !bytes.Equal(got, wantAnswer) {
					t.Errorf("answer:\n got %s\nwant %s", got, wantAnswer)
				}
			}
		})
	}
}

// TestEncodeOnceRandomMetadata checks the same over random metadata: keys
// before and after resourceVersion in either order, values that look
// like the placeholder's member.
func TestEncodeOnceRandomMetadata(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "name", "resourceVersion", "uid", "zz", "\x00", `"resourceVersion":"\u0000"`, rvPlaceholder[:4], ","}
	pick := func() string { return words[rng.IntN(len(words))] }
	for i := range 500 {
		meta := map[string]any{}
		for range rng.IntN(4) {
			meta[pick()+pick()] = pick()
		}
		delete(meta, "resourceVersion")
		ann := map[string]any{}
		for range rng.IntN(3) {
			ann[pick()] = pick() + pick()
		}
		if len(ann) > 0 {
			meta["annotations"] = ann
		}
		obj := map[string]any{"metadata": meta}
		for range rng.IntN(3) {
			obj[pick()] = map[string]any{pick(): pick()}
		}
		obj["metadata"] = meta
		u := &unstructured.Unstructured{Object: obj}
		enc, err := EncodeOnce(u.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		want, _ := EncodeStored(u.DeepCopy())
		if got := enc.Stored(); !bytes.Equal(got, want) {
			t.Fatalf("case %d stored:\n got %s\nwant %s", i, got, want)
		}
		withRV := u.DeepCopy()
		withRV.SetResourceVersion("7")
		wantAnswer, _ := MarshalJSON(withRV)
		if got := enc.Answer(7); !bytes.Equal(got, wantAnswer) {
			t.Fatalf("case %d answer:\n got %s\nwant %s", i, got, wantAnswer)
		}
	}
}
