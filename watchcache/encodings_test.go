package watchcache

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
)

// TestEncodingsGet checks the memo: one call per key however many
// goroutines ask at once, distinct keys kept apart, errors memoized too.
func TestEncodingsGet(t *testing.T) {
	var m Encodings
	var calls [3]atomic.Int32
	keys := []string{"json", "protobuf", "fails"}
	var wg sync.WaitGroup
	for range 16 {
		for k, key := range keys {
			wg.Go(func() {
				b, err := m.Get(key, func() ([]byte, error) {
					calls[k].Add(1)
					if key == "fails" {
						return nil, context.Canceled
					}
					return []byte(key), nil
				})
				if key == "fails" {
					if err == nil {
						t.Errorf("%s: no error", key)
					}
					return
				}
				if err != nil || string(b) != key {
					t.Errorf("%s: %q, %v", key, b, err)
				}
			})
		}
	}
	wg.Wait()
	for k, key := range keys {
		if n := calls[k].Load(); n != 1 {
			t.Errorf("%s encoded %d times", key, n)
		}
	}
}

// TestObjectEncodingsShared checks that a cached object version carries one
// memo, handed out by lists, by the live events that carry it and by the
// initial events of a watch, while a DELETED event (a copy at the delete's
// revision) and a newer version have their own.
func TestObjectEncodingsShared(t *testing.T) {
	st := newStore(t)
	put(t, st, "ns", "a", nil, corev1.PodRunning)
	c := newPodCache(t, st, nil)
	ctx := t.Context()

	live, err := c.Watch(ctx, WatchOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop()
	initial := <-live.Events()
	if initial.Type != watch.Added {
		t.Fatalf("first event %s", initial.Type)
	}
	listed, err := c.List(ctx, ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed.Items) != 1 {
		t.Fatalf("list: %d items", len(listed.Items))
	}
	if initial.ObjectEncodings() != listed.Items[0].Encodings() || initial.Item() != listed.Items[0] {
		t.Error("initial event and list hold different memos for one object version")
	}

	rev := put(t, st, "ns", "a", map[string]string{"x": "y"}, corev1.PodRunning)
	modified := <-live.Events()
	if modified.Type != watch.Modified || modified.Revision != rev {
		t.Fatalf("event %s at %d, want MODIFIED at %d", modified.Type, modified.Revision, rev)
	}
	if modified.ObjectEncodings() == listed.Items[0].Encodings() {
		t.Error("a new version shares the old version's memo")
	}
	seen(c, rev)
	selected, err := c.List(ctx, ListOptions{ResourceVersion: "0", Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if len(selected.Items) != 1 || selected.Items[0].Encodings() != modified.ObjectEncodings() {
		t.Error("list with a selector and the MODIFIED event hold different memos")
	}

	del(t, st, "ns", "a")
	deleted := <-live.Events()
	if deleted.Type != watch.Deleted {
		t.Fatalf("event %s, want DELETED", deleted.Type)
	}
	if deleted.ObjectEncodings() == modified.ObjectEncodings() {
		t.Error("DELETED event (another resourceVersion) shares the live object's memo")
	}
	if deleted.BaseEncodings() != modified.ObjectEncodings() {
		t.Error("DELETED event's base is not the memo of the version it copies")
	}
	if modified.BaseEncodings() != nil || initial.BaseEncodings() != nil {
		t.Error("an ADDED or MODIFIED event has a base")
	}
	lit := NewEvent(watch.Bookmark, &corev1.Pod{}, 0)
	first := lit.ObjectEncodings()
	if _, err := first.Get("k", func() ([]byte, error) { return []byte("v"), nil }); err != nil {
		t.Fatal(err)
	}
	again, err := lit.ObjectEncodings().Get("k", func() ([]byte, error) { return []byte("other"), nil })
	if err != nil || string(again) != "v" {
		t.Errorf("an event literal's memo is not kept: %q, %v", again, err)
	}
}

// TestEncodingsPreset checks that a preset function takes the place of the
// one Get is given, once, and that a key already asked for keeps its bytes.
func TestEncodingsPreset(t *testing.T) {
	encodeAs := func(s string) func() ([]byte, error) {
		return func() ([]byte, error) { return []byte(s), nil }
	}
	for _, tc := range []struct {
		name        string
		getFirst    bool // Get before Preset
		key, preset string
		want        string
	}{
		{name: "preset used", key: "protobuf", want: "preset"},
		{name: "asked for already", getFirst: true, key: "protobuf", want: "computed"},
		{name: "other key", key: "json", want: "computed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Encodings
			if tc.getFirst {
				if _, err := m.Get("protobuf", encodeAs("computed")); err != nil {
					t.Fatal(err)
				}
			}
			m.Preset("protobuf", encodeAs("preset"))
			for range 2 {
				got, err := m.Get(tc.key, encodeAs("computed"))
				if err != nil || string(got) != tc.want {
					t.Fatalf("Get(%s) = %q, %v; want %q", tc.key, got, err, tc.want)
				}
			}
			for _, e := range m.memo {
				if e.key == tc.key && e.preset != nil {
					t.Error("the preset function is kept after it ran")
				}
			}
		})
	}
}

// TestEncodingsDone checks that Done gives only what Get has made, and
// makes nothing itself.
func TestEncodingsDone(t *testing.T) {
	var m Encodings
	if _, ok := m.Done("json"); ok {
		t.Error("Done before any Get")
	}
	m.Preset("json", func() ([]byte, error) { return []byte("preset"), nil })
	if _, ok := m.Done("json"); ok {
		t.Error("Done of a preset key no Get asked for")
	}
	if _, err := m.Get("json", func() ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if b, ok := m.Done("json"); !ok || string(b) != "preset" {
		t.Errorf("Done after Get: %q, %v", b, ok)
	}
	_, _ = m.Get("fails", func() ([]byte, error) { return nil, context.Canceled })
	if _, ok := m.Done("fails"); ok {
		t.Error("Done of a key whose encoding failed")
	}
}

// TestConfigPreset checks that Config.Preset sees every object the cache
// decodes, listed or written, before a list or watch can, with the value
// it was decoded from, and that what it presets is what they serve.
func TestConfigPreset(t *testing.T) {
	st := newStore(t)
	put(t, st, "ns", "listed", nil, corev1.PodPending)
	var presets atomic.Int32
	c := newPodCache(t, st, func(cfg *Config[*corev1.Pod]) {
		cfg.Preset = func(kv storage.KeyValue, obj *corev1.Pod, enc *Encodings) {
			if want := strconv.FormatInt(kv.Revision, 10); obj.ResourceVersion != want || kv.Key != podKey(obj.Namespace, obj.Name) {
				t.Errorf("Preset of %s at %d with %s at %s", kv.Key, kv.Revision, obj.Name, obj.ResourceVersion)
			}
			presets.Add(1)
			enc.Preset("name", func() ([]byte, error) { return []byte(obj.Name + "@" + obj.ResourceVersion), nil })
		}
	})
	w, err := c.Watch(t.Context(), WatchOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rev := put(t, st, "ns", "written", nil, corev1.PodRunning)
	for range 2 {
		ev := <-w.Events()
		got, err := ev.ObjectEncodings().Get("name", func() ([]byte, error) { return []byte("not preset"), nil })
		if want := ev.Object().Name + "@" + ev.Object().ResourceVersion; err != nil || string(got) != want {
			t.Errorf("%s event of %s: %q, %v; want %q", ev.Type, ev.Object().Name, got, err, want)
		}
	}
	seen(c, rev)
	if n := presets.Load(); n != 2 {
		t.Errorf("Preset called %d times for one listed and one written object", n)
	}
}
