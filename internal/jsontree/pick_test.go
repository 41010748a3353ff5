package jsontree

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// pickPaths are what the API server's watch cache reads of a pod, with
// a path given twice, a path under another, the whole object, and paths
// through values that are not objects.
var pickPaths = [][]string{
	{"metadata", "labels"},
	{"metadata", "name"},
	{"metadata", "namespace"},
	{"metadata", "uid"},
	{"spec", "nodeName"},
	{"status", "phase"},
	{"metadata", "name"},
	{"metadata", "labels", "app"},
	{"spec", "containers", "name"},
	{"a"},
	{"a", "b"},
	{},
}

// pickReference is what Pick must answer: DecodeObject's tree looked up
// at each path.
func pickReference(data []byte, paths [][]string) ([]any, error) {
	obj, err := DecodeObject(data)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(paths))
	for i, path := range paths {
		if len(path) == 0 {
			out[i] = obj
			continue
		}
		if v, ok, err := unstructured.NestedFieldNoCopy(obj, path...); ok && err == nil {
			out[i] = v
		}
	}
	return out, nil
}

func TestPick(t *testing.T) {
	p := NewPicker(pickPaths...)
	for _, tc := range []struct{ name, in string }{
		{"pod", pod},
		{"empty", `{}`},
		{"repeated object, last wins", `{"metadata":{"name":"a","uid":"u"},"metadata":{"name":"b"}}`},
		{"repeated leaf, last wins", `{"metadata":{"name":"a","name":"b"}}`},
		{"repeated leaf over an object", `{"a":{"b":1},"a":2}`},
		{"not an object on the way", `{"metadata":"x","spec":[1],"status":null}`},
		{"scalars", `{"a":{"b":[1,2.5,true,null,"\u00e9"]},"status":{"phase":-1e3}}`},
		{"escaped key", `{"meta\u0064ata":{"name":"x"}}`},
		{"labels not strings", `{"metadata":{"labels":{"app":1}}}`},
		{"not an object", `[1]`},
		{"bad value skipped", `{"x":{"y":[1,tru]}}`},
		{"bad escape skipped", `{"x":"\q"}`},
		{"float out of range skipped", `{"x":1e999}`},
		{"trailing", `{} x`},
		{"too deep skipped", `{"x":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Pick([]byte(tc.in), nil)
			want, wantErr := pickReference([]byte(tc.in), pickPaths)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("Pick: %v, DecodeObject: %v", err, wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, want) {
				t.Errorf("Pick\n got %#v\nwant %#v", got, want)
			}
		})
	}
}

// FuzzPick holds Pick to DecodeObject: the same documents fail, and each
// path's value is what DecodeObject's tree holds there.
func FuzzPick(f *testing.F) {
	for _, s := range []string{pod, `{}`, `{"metadata":{"name":"a"},"metadata":{"uid":"b"}}`, `{"a":{"b":[1,{"c":2}]},"a":null}`, "{\"spec\":\"\xff\\ud800\"}"} {
		f.Add([]byte(s))
	}
	p := NewPicker(pickPaths...)
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := p.Pick(data, nil)
		want, wantErr := pickReference(data, pickPaths)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("Pick(%q): %v, DecodeObject: %v", data, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("Pick(%q)\n got %#v\nwant %#v", data, got, want)
		}
	})
}

// BenchmarkPick reads a stored pod's labels and selectable fields, as the
// watch cache does, with Pick and with DecodeObject: the figures Picker's
// comment quotes.
func BenchmarkPick(b *testing.B) {
	data := []byte(pod)
	paths := [][]string{{"metadata", "labels"}, {"metadata", "name"}, {"metadata", "namespace"}, {"metadata", "uid"},
		{"spec", "nodeName"}, {"spec", "restartPolicy"}, {"spec", "schedulerName"}, {"spec", "serviceAccountName"},
		{"spec", "hostNetwork"}, {"status", "phase"}, {"status", "podIP"}, {"status", "nominatedNodeName"}}
	b.Run("pick", func(b *testing.B) {
		p := NewPicker(paths...)
		var dst []any
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var err error
			if dst, err = p.Pick(data, dst); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := pickReference(data, paths); err != nil {
				b.Fatal(err)
			}
		}
	})
}
