package decode

import (
	"encoding/json"
	"strings"
	"testing"
)

// nest is a JSON object nested depth levels deep around leaf.
func nest(depth int, leaf string) string {
	return strings.Repeat(`{"a":`, depth) + leaf + strings.Repeat(`}`, depth)
}

func TestDepth(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want int
	}{
		{`1`, 0},
		{`"{[{["`, 0},
		{`{}`, 1},
		{`[[],[[]]]`, 3},
		{`{"a":{"b":"}}}\"{{"},"c":[1,{"d":[]}]}`, 4},
		{`{"a":"\\"}`, 1},
		{nest(500, `1`), 500},
	} {
		if !json.Valid([]byte(tc.doc)) {
			t.Fatalf("test document %q is not JSON", tc.doc)
		}
		if got := Depth([]byte(tc.doc)); got != tc.want {
			t.Errorf("Depth(%.40q) = %d, want %d", tc.doc, got, tc.want)
		}
	}
}

// TestObjectDepth: ObjectDepth counts as Depth does, but for
// metadata.managedFields.
func TestObjectDepth(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want int
	}{
		{`{}`, 1},
		{`{"spec":1}`, 1},
		{`{"spec":{}}`, 2},
		{`{"metadata":{"name":"x"}}`, 2},
		{`{"metadata":{}}`, 2},
		{`{"metadata":5}`, 1},
		{`{"metadata":{"labels":{"a":"b"}},"spec":[[]]}`, 3},
		{`{"metadata":{"managedFields":[{"fieldsV1":` + nest(200, `{}`) + `}]},"spec":{"a":[]}}`, 3},
		{`{"spec":` + nest(150, `[]`) + `}`, 152},
	} {
		var obj map[string]any
		if err := json.Unmarshal([]byte(tc.doc), &obj); err != nil {
			t.Fatal(err)
		}
		if got := ObjectDepth(obj); got != tc.want {
			t.Errorf("ObjectDepth(%.60s) = %d, want %d", tc.doc, got, tc.want)
		}
	}
}

// FuzzDepth: Depth agrees with the depth of the decoded document, and
// ObjectDepth with Depth on objects without managedFields.
func FuzzDepth(f *testing.F) {
	for _, s := range []string{`{}`, `[1,[2,{"a":"]"}]]`, `{"\\"":[{}]}`, `"x"`, `{"metadata":{"a":[{}]},"b":{}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var v any
		if json.Unmarshal([]byte(doc), &v) != nil {
			return
		}
		d := Depth([]byte(doc))
		if want := levels(v); d != want {
			t.Fatalf("Depth(%q) = %d, decoded depth %d", doc, d, want)
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		if md, ok := obj["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
			b, _ := json.Marshal(obj)
			d = Depth(b)
		}
		if got := ObjectDepth(obj); got != d {
			t.Fatalf("ObjectDepth(%q) = %d, Depth %d", doc, got, d)
		}
	})
}

// TestCompactSize: the compact size counts every byte but the whitespace
// between tokens, which strings keep.
func TestCompactSize(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want int
	}{
		{`{}`, 2},
		{" { \"a\" : [ 1 , 2 ] }\n", len(`{"a":[1,2]}`)},
		{`{"a b": " \" c "}`, len(`{"a b":" \" c "}`)},
		{"[\"\\\\\", 1]", len("[\"\\\\\",1]")},
	} {
		if got := CompactSize([]byte(tc.doc)); got != tc.want {
			t.Errorf("CompactSize(%q) = %d, want %d", tc.doc, got, tc.want)
		}
	}
}
