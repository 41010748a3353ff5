package registry

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
)

// TestKeepServed checks the served form a watch cache keeps of built-in
// objects: resourceVersion where a Go type's JSON has it, the same JSON
// value as the stored object with its resourceVersion set, served again
// at another revision, and stored bytes of another layout kept as they
// are.
func TestKeepServed(t *testing.T) {
	tests := []struct {
		name, stored string
		// kept is what Keep gives at revision 42; "" means the stored bytes.
		kept string
	}{
		{"Go type", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","uid":"u","creationTimestamp":null},"spec":{}}`,
			`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","uid":"u","resourceVersion":"42","creationTimestamp":null},"spec":{}}`},
		{"generateName and selfLink", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","generateName":"a-","namespace":"ns","selfLink":"/x","uid":"u"}}`,
			`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","generateName":"a-","namespace":"ns","selfLink":"/x","uid":"u","resourceVersion":"42"}}`},
		{"name only", `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"a"}}`,
			`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"42"}}`},
		{"map", `{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"a":"b"},"name":"a","uid":"u"},"spec":{}}`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"42","annotations":{"a":"b"},"name":"a","uid":"u"},"spec":{}}`},
		{"empty metadata", `{"kind":"Pod","apiVersion":"v1","metadata":{}}`,
			`{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"42"}}`},
		{"group version", `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"d"}}`,
			`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"d","resourceVersion":"42"}}`},
		{"a resourceVersion elsewhere", `{"kind":"Event","apiVersion":"v1","metadata":{"name":"e","annotations":{"resourceVersion":"x","a":"\"resourceVersion\""}},"involvedObject":{"resourceVersion":"3"}}`,
			`{"kind":"Event","apiVersion":"v1","metadata":{"name":"e","resourceVersion":"42","annotations":{"resourceVersion":"x","a":"\"resourceVersion\""}},"involvedObject":{"resourceVersion":"3"}}`},
		{"a resourceVersion last", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","labels":{"x":"y"},"resourceVersion":"7"}}`, ""},
		{"metadata cut short", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","labels":{"x":"y"}`, ""},
		{"another member first", `{"action":"x","apiVersion":"v1","kind":"Event","metadata":{"name":"e"}}`, ""},
		{"no kind", `{"apiVersion":"v1","metadata":{"name":"a"}}`, ""},
		{"escaped name", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a\u0041"}}`, ""},
		{"spaces", `{"kind": "Pod","apiVersion":"v1","metadata":{"name":"a"}}`, ""},
		{"not an object", `[]`, ""},
		{"empty", ``, ""},
		{"cut short", `{"kind":"Pod","apiVersion":"v1","metadata":{`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kept := Keep([]byte(tc.stored), 42)
			want := tc.kept
			if want == "" {
				want = tc.stored
			}
			if string(kept) != want {
				t.Fatalf("Keep = %s\nwant %s", kept, want)
			}
			js, meta, ok := Served(kept, 42)
			if ok != (tc.kept != "") {
				t.Fatalf("Served ok = %v", ok)
			}
			if !ok {
				return
			}
			if string(js) != tc.kept || string(js[meta:meta+len(`"metadata"`)]) != `"metadata"` {
				t.Errorf("Served at 42 = %s (metadata at %d)", js, meta)
			}
			// The same value as the stored object with its resourceVersion.
			var got, stored map[string]any
			if err := json.Unmarshal(js, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.stored), &stored); err != nil {
				t.Fatal(err)
			}
			stored["metadata"].(map[string]any)["resourceVersion"] = "42"
			if !reflect.DeepEqual(got, stored) {
				t.Errorf("served %v, want %v", got, stored)
			}
			for _, rev := range []int64{1, 41, 420, 1 << 40} {
				at, _, ok := Served(kept, rev)
				var v map[string]any
				if err := json.Unmarshal(at, &v); !ok || err != nil || v["metadata"].(map[string]any)["resourceVersion"] != strconv.FormatInt(rev, 10) {
					t.Errorf("Served at %d = %s, %v, %v", rev, at, ok, err)
				}
				if again := Keep([]byte(tc.stored), rev); string(at) != string(again) {
					t.Errorf("Served at %d = %s, Keep at %d = %s", rev, at, rev, again)
				}
			}
		})
	}
	// A value stored with a resourceVersion where a Go type writes it
	// (not by this server) is kept as it is, and served at its revision.
	stored := []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"7"}}`)
	if kept := Keep(stored, 42); string(kept) != string(stored) {
		t.Errorf("Keep = %s", kept)
	}
	if js, _, ok := Served(stored, 42); !ok || string(js) != `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"42"}}` {
		t.Errorf("Served = %s, %v", js, ok)
	}
}
