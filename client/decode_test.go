package client

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/cache"
)

func decodeAll[T cache.Object](t *testing.T, d *Decoder[T]) ([]cache.Event[T], error) {
	t.Helper()
	var out []cache.Event[T]
	for {
		ev, err := d.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func newDecoder(t *testing.T, proto bool, b []byte, max int) *Decoder[*corev1.Pod] {
	t.Helper()
	var d *Decoder[*corev1.Pod]
	var err error
	if proto {
		d, err = NewProtobufDecoder[*corev1.Pod](bytes.NewReader(b), corev1.SchemeGroupVersion, max)
	} else {
		d, err = NewJSONDecoder[*corev1.Pod](bytes.NewReader(b), corev1.SchemeGroupVersion, max)
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The same recorded history, encoded both ways, decodes to the same events,
// equal to the objects recorded.
func TestDecodersAgreeWithHistory(t *testing.T) {
	hist := history(40)
	hist = append(hist, recordedEvent{typ: cache.EventError, status: &metav1.Status{Status: metav1.StatusFailure,
		Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (200)"}})
	js := jsonStream(t, hist)
	var pretty bytes.Buffer
	for _, line := range bytes.SplitAfter(js, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if err := json.Indent(&pretty, line, "", "  "); err != nil {
			t.Fatal(err)
		}
	}
	for _, enc := range []struct {
		name    string
		proto   bool
		data    []byte
		oneByte bool
		// pretty-printing changes the raw JSON kept in managedFields
		pretty bool
	}{
		{name: "json", data: js},
		{name: "json, one byte per read", data: js, oneByte: true},
		{name: "json, pretty-printed", data: pretty.Bytes(), pretty: true},
		{name: "json, no newlines", data: bytes.ReplaceAll(js, []byte("}\n{"), []byte("} {"))},
		{name: "protobuf", proto: true, data: protoStreamOf(t, hist)},
		{name: "protobuf, one byte per read", proto: true, data: protoStreamOf(t, hist), oneByte: true},
	} {
		t.Run(enc.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(enc.data)
			if enc.oneByte {
				r = iotest.OneByteReader(r)
			}
			var d *Decoder[*corev1.Pod]
			var err error
			if enc.proto {
				d, err = NewProtobufDecoder[*corev1.Pod](r, corev1.SchemeGroupVersion, 0)
			} else {
				d, err = NewJSONDecoder[*corev1.Pod](r, corev1.SchemeGroupVersion, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			evs, err := decodeAll(t, d)
			if err != io.EOF {
				t.Fatalf("end of stream: got %v, want io.EOF", err)
			}
			if len(evs) != len(hist) {
				t.Fatalf("got %d events, want %d", len(evs), len(hist))
			}
			for i, ev := range evs {
				want := hist[i]
				if ev.Type != want.typ {
					t.Fatalf("event %d: type %s, want %s", i, ev.Type, want.typ)
				}
				if want.status != nil {
					if ev.Status == nil || !apiequality.Semantic.DeepEqual(*ev.Status, *want.status) || ev.Object != nil {
						t.Fatalf("event %d: status %+v object %v, want %+v", i, ev.Status, ev.Object, want.status)
					}
					continue
				}
				got, wantPod := ev.Object, want.pod
				if enc.pretty {
					got, wantPod = got.DeepCopy(), wantPod.DeepCopy()
					got.ManagedFields, wantPod.ManagedFields = nil, nil
				}
				if !apiequality.Semantic.DeepEqual(got, wantPod) {
					t.Fatalf("event %d: object differs:\n got %+v\nwant %+v", i, ev.Object, want.pod)
				}
			}
		})
	}
}

// corrupt describes a broken stream and the error expected of it.
type corrupt struct {
	name string
	data []byte
	max  int
	want error // when not nil, errors.Is(err, want) must hold
	text string
}

func TestJSONDecoderRejectsBrokenStreams(t *testing.T) {
	good := jsonStream(t, history(1)[:1])
	pod := string(bytes.TrimSpace(good))
	svc := strings.Replace(pod, `"kind":"Pod"`, `"kind":"Service"`, 1)
	for _, tc := range []corrupt{
		{name: "truncated", data: good[:len(good)/2], want: io.ErrUnexpectedEOF},
		{name: "truncated after a token", data: []byte(`{"type":"ADDED"`), want: io.ErrUnexpectedEOF},
		{name: "garbage", data: []byte("\x00\x01garbage"), text: "not a JSON object"},
		{name: "garbage after an event", data: append(append([]byte{}, good...), "}}"...), text: "not a JSON object"},
		{name: "garbage inside an event", data: []byte(`{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":x}}}`), text: "invalid character"},
		{name: "garbage in an unknown member", data: []byte(`{"type":"ADDED","other":[1,,2],"object":{"kind":"Pod"}}`), text: "invalid character"},
		{name: "bad separator", data: []byte(`{"type":"ADDED";"object":{"kind":"Pod"}}`), text: "expected"},
		{name: "not an object", data: []byte(`"ADDED"`), text: "not a JSON object"},
		{name: "unknown type", data: []byte(strings.Replace(pod, `"ADDED"`, `"RENAMED"`, 1)), text: `unknown event type "RENAMED"`},
		{name: "no type", data: []byte(`{"object":{"kind":"Pod"}}`), text: "without a type"},
		{name: "no object", data: []byte(`{"type":"ADDED"}`), text: "without an object"},
		{name: "wrong kind", data: []byte(svc), want: errWrongKind},
		{name: "wrong kind, object first", data: []byte(`{"object":{"kind":"Service","apiVersion":"v1"},"type":"ADDED"}`), want: errWrongKind},
		{name: "object not an object", data: []byte(`{"type":"ADDED","object":[1]}`), text: "cannot decode array"},
		{name: "oversized", data: good, max: 100, want: ErrEventTooLarge},
		{name: "never ending string", data: []byte(`{"type":"` + strings.Repeat("A", 1000)), max: 100, want: ErrEventTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := decodeAll(t, newDecoder(t, false, tc.data, tc.max))
			checkBroken(t, tc, evs, err)
		})
	}
}

func checkBroken(t *testing.T, tc corrupt, evs []cache.Event[*corev1.Pod], err error) {
	t.Helper()
	if err == nil || err == io.EOF {
		t.Fatalf("got %v after %d events, want an error", err, len(evs))
	}
	if tc.want != nil && !errors.Is(err, tc.want) {
		t.Fatalf("got %v, want %v", err, tc.want)
	}
	if tc.text != "" && !strings.Contains(err.Error(), tc.text) {
		t.Fatalf("got %v, want it to say %q", err, tc.text)
	}
}

func frame(b []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) }

func watchEvent(t *testing.T, typ string, raw []byte) []byte {
	t.Helper()
	b, err := (&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProtobufDecoderRejectsBrokenStreams(t *testing.T) {
	pod := makePod(1, 5)
	good := protoFrame(t, recordedEvent{typ: cache.EventAdded, pod: pod})
	podEnv := envelope(t, pod, "v1", "Pod")
	svcEnv := envelope(t, &corev1.Service{}, "v1", "Service")
	huge := binary.BigEndian.AppendUint32(nil, 1<<31)
	for _, tc := range []corrupt{
		{name: "truncated header", data: good[:2], want: io.ErrUnexpectedEOF},
		{name: "truncated frame", data: good[:len(good)-10], want: io.ErrUnexpectedEOF},
		{name: "oversized frame", data: huge, want: ErrEventTooLarge},
		{name: "oversized under a cap", data: good, max: 64, want: ErrEventTooLarge},
		{name: "garbage frame", data: frame([]byte("\xff\xff\xff\xff garbage")), text: "protobuf"},
		{name: "unknown type", data: frame(watchEvent(t, "RENAMED", podEnv)), text: `unknown event type "RENAMED"`},
		{name: "no object", data: frame(watchEvent(t, "ADDED", nil)), text: "without an object"},
		{name: "no envelope", data: frame(watchEvent(t, "ADDED", podEnv[4:])), text: "envelope"},
		{name: "wrong kind", data: frame(watchEvent(t, "ADDED", svcEnv)), want: errWrongKind},
		{name: "error without a Status", data: frame(watchEvent(t, "ERROR", podEnv)), want: errWrongKind},
		{name: "object garbage", data: frame(watchEvent(t, "ADDED", append(append([]byte{}, podEnv[:len(podEnv)-40]...), bytes.Repeat([]byte{0xff}, 40)...))), text: "protobuf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := decodeAll(t, newDecoder(t, true, tc.data, tc.max))
			checkBroken(t, tc, evs, err)
		})
	}
}

// An unstructured watch reads any kind, and refuses objects without one.
func TestUnstructuredJSONDecoder(t *testing.T) {
	data := []byte(`{"type":"ADDED","object":{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","resourceVersion":"7"},"spec":{"size":3,"ratio":0.5}}}
{"type":"ADDED","object":{"metadata":{"name":"b"}}}`)
	d, err := NewJSONDecoder[*unstructured.Unstructured](bytes.NewReader(data), metav1.SchemeGroupVersion.WithKind("").GroupVersion(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := d.Next()
	if err != nil {
		t.Fatal(err)
	}
	size, _, err := unstructured.NestedInt64(ev.Object.Object, "spec", "size")
	if err != nil || size != 3 || ev.Object.GetKind() != "Widget" || ev.Object.GetResourceVersion() != "7" {
		t.Fatalf("got %v (size %d, err %v)", ev.Object, size, err)
	}
	if ratio, _, _ := unstructured.NestedFloat64(ev.Object.Object, "spec", "ratio"); ratio != 0.5 {
		t.Fatalf("ratio %v", ratio)
	}
	if _, err := d.Next(); err == nil || !strings.Contains(err.Error(), "without a kind") {
		t.Fatalf("object without a kind: got %v", err)
	}
	if _, err := NewProtobufDecoder[*unstructured.Unstructured](bytes.NewReader(nil), metav1.SchemeGroupVersion, 0); err == nil {
		t.Fatal("protobuf decoder of unstructured objects: want an error")
	}
}
