package jsontree

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// pod is a stored pod as the API server writes it: typical of what the
// watch cache decodes.
const pod = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"pod-000042","namespace":"default","uid":"6f1c1f7e-0000-4000-8000-000000000042","creationTimestamp":"2026-11-25T22:00:00Z","labels":{"app":"bench","gen":"000000000","shard":"2"},"ownerReferences":[{"apiVersion":"v1","kind":"ReplicationController","name":"rc-0","uid":"6f1c1f7e-0000-4000-8000-000000000000","controller":true}]},"spec":{"volumes":[{"name":"kube-api-access-x7k2p","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},{"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},{"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.namespace"}}]}}],"defaultMode":420}}],"containers":[{"name":"main","image":"registry.k8s.io/pause:3.10","ports":[{"containerPort":8080,"protocol":"TCP"}],"resources":{"limits":{"cpu":"200m","memory":"128Mi"},"requests":{"cpu":"100m","memory":"64Mi"}},"volumeMounts":[{"name":"kube-api-access-x7k2p","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","serviceAccount":"default","nodeName":"node-0","securityContext":{},"schedulerName":"default-scheduler","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},"status":{"phase":"Running","podIP":"10.0.0.42","qosClass":"Burstable"}}`

// reference is apimachinery's decoding, which DecodeObject must equal.
func reference(data []byte) (map[string]any, error) {
	var m map[string]any
	err := utiljson.Unmarshal(data, &m)
	return m, err
}

func TestDecodeObject(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]any
		err      bool
	}{
		{name: "empty object", in: ` {} `, want: map[string]any{}},
		{name: "scalars", in: `{"s":"x","t":true,"f":false,"n":null,"i":-12,"z":0,"neg0":-0,"f1":1.5,"e":1e3,"E":2E-2}`,
			want: map[string]any{"s": "x", "t": true, "f": false, "n": nil, "i": int64(-12), "z": int64(0), "neg0": int64(0), "f1": 1.5, "e": 1000.0, "E": 0.02}},
		{name: "int64 bounds", in: `{"max":9223372036854775807,"min":-9223372036854775808,"over":9223372036854775808,"long":123456789012345678}`,
			want: map[string]any{"max": int64(math.MaxInt64), "min": int64(math.MinInt64), "over": 9223372036854775808.0, "long": int64(123456789012345678)}},
		{name: "nested", in: `{"a":{"b":[1,"two",{"c":[]},[]]}}`,
			want: map[string]any{"a": map[string]any{"b": []any{int64(1), "two", map[string]any{"c": []any{}}, []any{}}}}},
		{name: "escapes", in: `{"e":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}`, want: map[string]any{"e": "\"\\/\b\f\n\r\té😀"}},
		{name: "lone surrogate", in: `{"e":"a\ud800b\udc00\ud800\u0041"}`, want: map[string]any{"e": "a\uFFFDb\uFFFD\uFFFDA"}},
		{name: "invalid UTF-8", in: "{\"e\":\"a\xffb\xc3\xa9\"}", want: map[string]any{"e": "a\uFFFDbé"}},
		{name: "duplicate key, last wins", in: `{"a":1,"a":2}`, want: map[string]any{"a": int64(2)}},
		{name: "whitespace", in: "\n{ \"a\" :\t[ 1 , 2 ] ,\r\"b\":{ } }\n", want: map[string]any{"a": []any{int64(1), int64(2)}, "b": map[string]any{}}},
		{name: "pod", in: pod},
		{name: "not an object", in: `[1]`, err: true},
		{name: "null", in: `null`, err: true},
		{name: "empty", in: ``, err: true},
		{name: "trailing data", in: `{} {}`, err: true},
		{name: "trailing comma", in: `{"a":1,}`, err: true},
		{name: "unquoted key", in: `{a:1}`, err: true},
		{name: "bad escape", in: `{"a":"\x"}`, err: true},
		{name: "short unicode escape", in: `{"a":"\u12"}`, err: true},
		{name: "control character", in: "{\"a\":\"\n\"}", err: true},
		{name: "leading zero", in: `{"a":01}`, err: true},
		{name: "bare minus", in: `{"a":-}`, err: true},
		{name: "point without digits", in: `{"a":1.}`, err: true},
		{name: "float out of range", in: `{"a":1e400}`, err: true},
		{name: "bad literal", in: `{"a":tru}`, err: true},
		{name: "unterminated", in: `{"a":"b`, err: true},
		{name: "too deep", in: `{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeObject([]byte(tc.in))
			if tc.err {
				if err == nil {
					t.Fatalf("DecodeObject(%q) = %v, want an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeObject: %v", err)
			}
			want := tc.want
			if want == nil {
				if want, err = reference([]byte(tc.in)); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("DecodeObject(%q)\n got %#v\nwant %#v", tc.in, got, want)
			}
		})
	}
}

func TestErrNotObject(t *testing.T) {
	if _, err := DecodeObject([]byte(`"s"`)); !errors.Is(err, ErrNotObject) {
		t.Errorf("err = %v, want ErrNotObject", err)
	}
	var se *SyntaxError
	if _, err := DecodeObject([]byte(`{"a":}`)); !errors.As(err, &se) || se.Offset != 5 {
		t.Errorf("err = %v, want a SyntaxError at offset 5", err)
	}
}

// FuzzDecodeObject holds DecodeObject to apimachinery's decoding: the same
// tree for every document both accept, an error for every document
// apimachinery refuses.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{pod, `{}`, `{"a":[1,2.5,-0,1e2,"x\u00e9\ud83d\ude00"],"b":{"c":null,"d":true}}`, "{\"a\":\"\xff\\ud800\"}", `{"a":9223372036854775808}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeObject(data)
		want, wantErr := reference(data)
		switch {
		case wantErr != nil:
			if err == nil {
				t.Fatalf("DecodeObject(%q) = %v, apimachinery: %v", data, got, wantErr)
			}
		case want == nil:
			// A top-level null decodes to a nil map there; an error here.
			if err == nil {
				t.Fatalf("DecodeObject(%q) = %v, want an error", data, got)
			}
		case err != nil:
			t.Fatalf("DecodeObject(%q): %v, apimachinery accepts it: %v", data, err, want)
		case !reflect.DeepEqual(got, want):
			t.Fatalf("DecodeObject(%q)\n got %#v\nwant %#v", data, got, want)
		}
	})
}

// BenchmarkDecodeObject decodes a stored pod with DecodeObject and with
// apimachinery's decoder, the figures the package comment quotes.
func BenchmarkDecodeObject(b *testing.B) {
	data := []byte(pod)
	for _, bc := range []struct {
		name   string
		decode func([]byte) (map[string]any, error)
	}{
		{"jsontree", DecodeObject},
		{"apimachinery", reference},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := bc.decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
