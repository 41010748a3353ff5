package registry

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watchcache"
)

// decodedAttrs is what the watch cache reads of a stored value without
// Config.Scan: the attributes of the map DecodeStored makes.
func decodedAttrs(r *Resource, kv storage.KeyValue) (watchcache.Attributes, error) {
	u, err := DecodeKV(kv)
	if err != nil {
		return watchcache.Attributes{}, err
	}
	return watchcache.Attributes{Labels: u.GetLabels(), Fields: FieldSet(r, u.Object), UID: string(u.GetUID()), Namespace: u.GetNamespace()}, nil
}

// scanDocs are stored values of any resource: every field a resource
// selects on is written from the resource's own list, then these shapes.
var scanDocs = []string{
	`{}`,
	`{"metadata":{"name":"a","namespace":"ns","uid":"u","labels":{"app":"x","tier":""}}}`,
	`{"metadata":{"labels":{"app":1}}}`,
	`{"metadata":{"labels":null,"uid":7,"namespace":true}}`,
	`{"metadata":{"labels":{}},"metadata":{"name":"second"}}`,
	`{"metadata":"not an object","spec":[1,2]}`,
	`{"metadata":{"name":"a"},"spec":{"nodeName":"n","hostNetwork":true,"replicas":3,"x":1.5},"status":{"phase":null}}`,
	`{"metadata":{"name":"a\u00e9\ud83d\ude00"},"type":"Opaque","source":{"component":"kubelet"},"involvedObject":{"kind":"Pod","name":"p"}}`,
	`{"metadata":{"name":"a"}} trailing`,
	`{"metadata":{"name":"a",}}`,
	`[]`,
}

// TestAttrsScannerAsDecode: for every built-in resource, what the scanner
// reads of a stored value is what the decoded map's attributes are, and
// it fails on the same values.
func TestAttrsScannerAsDecode(t *testing.T) {
	for _, r := range Builtins() {
		docs := append([]string(nil), scanDocs...)
		// The resource's own fields, each with a value.
		var b strings.Builder
		b.WriteString(`{"metadata":{"name":"n","namespace":"ns","uid":"u1","labels":{"a":"b"}}`)
		for i, f := range r.Fields {
			path := FieldPath(r, f)
			fmt.Fprintf(&b, `,"%s":`, path[0])
			for _, k := range path[1:] {
				fmt.Fprintf(&b, `{"%s":`, k)
			}
			fmt.Fprintf(&b, `"v%d"`, i)
			b.WriteString(strings.Repeat("}", len(path)-1))
		}
		b.WriteString("}")
		docs = append(docs, b.String())
		s := newAttrsScanner(r)
		for _, doc := range docs {
			kv := storage.KeyValue{Key: "/k", Value: []byte(doc), Revision: 5}
			got, err := s.scan(kv)
			want, wantErr := decodedAttrs(r, kv)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%s: scan(%s): %v, decode: %v", r.Plural, doc, err, wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, want) {
				t.Errorf("%s: scan(%s)\n got %#v\nwant %#v", r.Plural, doc, got, want)
			}
		}
	}
}

// FuzzAttrsScanner holds the scanner of pods, the resource with the most
// selectable fields, to the decoded map's attributes.
func FuzzAttrsScanner(f *testing.F) {
	for _, doc := range scanDocs {
		f.Add([]byte(doc))
	}
	var pods *Resource
	for _, r := range Builtins() {
		if r.Plural == "pods" {
			pods = r
		}
	}
	s := newAttrsScanner(pods)
	f.Fuzz(func(t *testing.T, data []byte) {
		kv := storage.KeyValue{Key: "/k", Value: data, Revision: 5}
		got, err := s.scan(kv)
		want, wantErr := decodedAttrs(pods, kv)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("scan(%q): %v, decode: %v", data, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("scan(%q)\n got %#v\nwant %#v", data, got, want)
		}
	})
}
