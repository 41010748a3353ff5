package registry

import (
	"bytes"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watchcache"
)

// TestWriteHints checks the hints' bookkeeping: a hint presets the memo
// only for the bytes it was left with, and is left only while a protobuf
// watch is open and for a Go object; one whose event has not come stays,
// and a withdrawn one is gone.
func TestWriteHints(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	value := []byte(`{"kind":"Pod"}`)
	other := []byte(`{"kind":"Pod","x":1}`)
	const key = "/pods/ns/p"
	for _, tc := range []struct {
		name      string
		watchers  int32
		obj       Object
		withdraw  bool
		stored    []byte
		wantUsed  bool
		wantMiss  bool
		wantLeft  int
		leaveMore bool // a second hint, for other, before the event
	}{
		{name: "same bytes", watchers: 1, obj: p, stored: value, wantUsed: true},
		{name: "other bytes", watchers: 1, obj: p, stored: other, wantMiss: true, wantLeft: 1},
		{name: "the second of two", watchers: 1, obj: p, stored: other, leaveMore: true, wantUsed: true, wantLeft: 1},
		{name: "no protobuf watch", watchers: 0, obj: p, stored: value},
		{name: "a map", watchers: 1, obj: &unstructured.Unstructured{Object: map[string]any{}}, stored: value},
		{name: "withdrawn", watchers: 1, obj: p, stored: value, withdraw: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h writeHints
			h.protoWatchers.Store(tc.watchers)
			withdraw := h.leave(key, value, tc.obj)
			if tc.leaveMore {
				h.leave(key, other, p)
			}
			if tc.withdraw {
				withdraw()
			}
			var enc watchcache.Encodings
			h.preset(storage.KeyValue{Key: key, Value: tc.stored, Revision: 7}, nil, &enc)
			got, err := enc.Get(MemoProto, func() ([]byte, error) { return []byte("converted"), nil })
			if err != nil {
				t.Fatal(err)
			}
			if used := string(got) != "converted"; used != tc.wantUsed {
				t.Errorf("hint used: %v, want %v", used, tc.wantUsed)
			}
			if tc.wantUsed {
				want := p.DeepCopy()
				want.ResourceVersion = "7"
				b, _ := want.Marshal()
				if !bytes.Equal(got, b) {
					t.Errorf("preset %q, want the pod at revision 7", got)
				}
				if p.ResourceVersion != "" {
					t.Error("the writer's object was changed")
				}
			}
			if h.used.Load() == 1 != tc.wantUsed || h.unmatched.Load() == 1 != tc.wantMiss {
				t.Errorf("used %d, unmatched %d", h.used.Load(), h.unmatched.Load())
			}
			if len(h.m[key]) != tc.wantLeft || h.n != tc.wantLeft {
				t.Errorf("%d hints left after the event (count %d), want %d", len(h.m[key]), h.n, tc.wantLeft)
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		var h writeHints
		h.protoWatchers.Store(1)
		for range 2 * maxKeyHints {
			h.leave("/pods/ns/one", value, p)
		}
		if n := len(h.m["/pods/ns/one"]); n != maxKeyHints {
			t.Errorf("%d hints of one key, want at most %d", n, maxKeyHints)
		}
		for i := range maxWriteHints {
			h.leave(fmt.Sprintf("/pods/ns/p%d", i), value, p)
		}
		if h.n != maxWriteHints {
			t.Errorf("%d hints kept, want at most %d", h.n, maxWriteHints)
		}
	})
}
