package apiserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/apiserver/internal/wire"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watchcache"
)

// serializeObjects are objects as the watch cache holds them: decoded from
// storage after normalization on write.
func serializeObjects(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	pods := lookupResource(t, "", "pods")
	rcs := lookupResource(t, "", "replicationcontrollers")
	decode := func(r *resource, body string, rev int64) *unstructured.Unstructured {
		t.Helper()
		u, err := decode.Body(r, []byte(body))
		if err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		stored, err := registry.EncodeStored(u)
		if err != nil {
			t.Fatal(err)
		}
		u, err = registry.DecodeStored(stored, rev)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	bookmark := &unstructured.Unstructured{Object: map[string]any{}}
	bookmark.SetAPIVersion("v1")
	bookmark.SetKind("Pod")
	bookmark.SetResourceVersion("42")
	initialEnd := bookmark.DeepCopy()
	initialEnd.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	return map[string]*unstructured.Unstructured{
		"pod":         decode(pods, benchPod(7), 12),
		"unicode pod": decode(pods, `{"metadata":{"name":"p","annotations":{"note":"héllo \"quoted\" <tag> \u2028"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 1<<40),
		"rc":          decode(rcs, `{"metadata":{"name":"rc"},"spec":{"replicas":3,"selector":{"a":"b"},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`, 300),
		"bookmark":    bookmark,
		"initial end": initialEnd,
	}
}

func lookupResource(t *testing.T, group, plural string) *resource {
	t.Helper()
	reg, err := registry.New()
	if err != nil {
		t.Fatal(err)
	}
	r := reg.Lookup(schema.GroupVersion{Group: group, Version: "v1"}, plural)
	if r == nil {
		t.Fatalf("no resource %s", plural)
	}
	return r
}

// serializeItems are the objects of serializeObjects as their watch
// cache keeps them (registry.Resource.Kept): stored as a map writes them
// and as their Go type does, as the server's writes store them.
func serializeItems(t *testing.T) map[string]*wire.Item {
	t.Helper()
	out := map[string]*wire.Item{}
	for name, u := range serializeObjects(t) {
		if u.GetName() == "" {
			continue // a bookmark
		}
		r := lookupResource(t, "", "pods")
		if u.GetKind() == "ReplicationController" {
			r = lookupResource(t, "", "replicationcontrollers")
		}
		rev, err := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		typed, err := wire.Typed(u)
		if err != nil {
			t.Fatal(err)
		}
		for form, obj := range map[string]registry.Object{"map": u.DeepCopy(), "Go type": typed.(registry.Object)} {
			stored, err := registry.EncodeStored(obj)
			if err != nil {
				t.Fatal(err)
			}
			kv := storage.KeyValue{Key: registry.KeyFor(r, "default", u.GetName()), Value: stored, Revision: rev}
			kv.Value = r.Kept(kv)
			it, err := watchcache.NewItem(kv, r.DecodeKV)
			if err != nil {
				t.Fatal(err)
			}
			out[name+" stored as "+form] = it
		}
	}
	return out
}

// TestEventFrames checks that the frames assembled from memoized or kept
// object bytes are what the generic encoders produce (the typed protobuf
// serializer's envelope and metav1.WatchEvent byte for byte, json.Marshal
// of the event as JSON), for every event type; and that a version kept in
// its served JSON is, byte for byte, what kube-apiserver's codec writes
// of an object stored from its Go type.
func TestEventFrames(t *testing.T) {
	check := func(t *testing.T, typ watch.EventType, u *unstructured.Unstructured, msg, js []byte) {
		t.Helper()
		typed, err := wire.Typed(u)
		if err != nil {
			t.Fatal(err)
		}
		want, err := wire.ProtoEvent(typ, typed)
		if err != nil {
			t.Fatal(err)
		}
		if got := wire.ProtoEventFrame(typ, u.GetAPIVersion(), u.GetKind(), msg); !bytes.Equal(got, want) {
			t.Errorf("protobuf frame differs:\n got %x\nwant %x", got, want)
		}
		if n := binary.BigEndian.Uint32(want); int(n) != len(want)-4 {
			t.Errorf("frame length %d, body %d", n, len(want)-4)
		}
		wantJSON, err := wire.JSONEvent(typ, u.Object)
		if err != nil {
			t.Fatal(err)
		}
		if got := wire.JSONEventFrame(typ, js); !sameJSON(t, got, wantJSON) {
			t.Errorf("JSON frame differs:\n got %s\nwant %s", got, wantJSON)
		}
	}
	for name, u := range serializeObjects(t) {
		for _, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark} {
			t.Run(fmt.Sprintf("%s/%s", name, typ), func(t *testing.T) {
				rev, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
				ev := watchcache.NewEvent(typ, u, rev)
				msg, err := wire.EventProto(ev, u.GroupVersionKind())
				if err != nil {
					t.Fatal(err)
				}
				js, err := wire.EventJSON(ev, true)
				if err != nil {
					t.Fatal(err)
				}
				check(t, typ, u, msg, js)
			})
		}
	}
	for name, it := range serializeItems(t) {
		t.Run(name, func(t *testing.T) {
			u, err := it.Decode()
			if err != nil {
				t.Fatal(err)
			}
			msg, err := wire.ObjectProto(it)
			if err != nil {
				t.Fatal(err)
			}
			js, err := wire.ObjectJSON(it)
			if err != nil {
				t.Fatal(err)
			}
			for _, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
				check(t, typ, u, msg, js)
			}
			if _, kept := it.Encodings().Done(wire.MemoJSON); kept || !bytes.Equal(js, it.Value()) {
				t.Errorf("JSON not written from the kept bytes (memoized: %v)", kept)
			}
			if strings.HasSuffix(name, "Go type") {
				// kube-apiserver's codec writes the same JSON up to the
				// resourceVersion (its encoding defaults the rest).
				r := lookupResource(t, "", strings.ToLower(u.GetKind())+"s")
				kube, err := r.EncodeAsKube(u)
				if err != nil {
					t.Fatal(err)
				}
				const rv = `"resourceVersion":"`
				at := bytes.Index(js, []byte(rv)) + len(rv)
				end := at + bytes.IndexByte(js[at:], '"') + 1
				if at < len(rv) || !bytes.HasPrefix(kube, js[:end]) {
					t.Errorf("kept JSON is not kube-apiserver's up to its resourceVersion:\n got %s\nwant %s", js, kube)
				}
			}
		})
	}
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// TestWriteList checks that a streamed list is what encoding the whole
// list object gives: the same protobuf bytes, the same JSON value, with a
// Content-Length that matches the body.
func TestWriteList(t *testing.T) {
	items := serializeItems(t)
	pods := lookupResource(t, "", "pods")
	rcs := lookupResource(t, "", "replicationcontrollers")
	remaining := int64(17)
	zero := int64(0)
	tests := []struct {
		name string
		res  *resource
		list listResult
	}{
		{"empty", pods, listResult{rev: 5}},
		{"pods", pods, listResult{items: []*wire.Item{items["pod stored as Go type"], items["unicode pod stored as map"], items["pod stored as map"]}, rev: 1 << 40}},
		{"page", pods, listResult{items: []*wire.Item{items["pod stored as Go type"]}, rev: 9, continue_: "dG9rZW4", remaining: &remaining}},
		{"last page count zero", pods, listResult{items: []*wire.Item{items["unicode pod stored as Go type"]}, rev: 9, continue_: "x", remaining: &zero}},
		{"rcs", rcs, listResult{items: []*wire.Item{items["rc stored as map"], items["rc stored as Go type"]}, rev: 300}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := make([]*unstructured.Unstructured, len(tc.list.items))
			for i, it := range tc.list.items {
				var err error
				if objs[i], err = it.Decode(); err != nil {
					t.Fatal(err)
				}
			}
			whole := listObject(tc.res, tc.list, objs)
			wantProto, err := wire.ToProtobuf(tc.res, whole)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			if err := writeList(rec, tc.res, encProtobuf, tc.list); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rec.Body.Bytes(), wantProto) {
				t.Errorf("protobuf list differs:\n got %x\nwant %x", rec.Body.Bytes(), wantProto)
			}
			checkLength(t, rec)
			if ct := rec.Header().Get("Content-Type"); ct != respond.MediaProtobuf {
				t.Errorf("Content-Type %q", ct)
			}

			if !tc.res.Custom {
				// kube-apiserver lists built-in objects without their
				// apiVersion and kind.
				whole = whole.DeepCopy()
				for _, it := range whole.Object["items"].([]any) {
					delete(it.(map[string]any), "apiVersion")
					delete(it.(map[string]any), "kind")
				}
			}
			wantJSON, err := json.Marshal(whole.Object)
			if err != nil {
				t.Fatal(err)
			}
			rec = httptest.NewRecorder()
			if err := writeList(rec, tc.res, encJSON, tc.list); err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, rec.Body.Bytes(), wantJSON) {
				t.Errorf("JSON list differs:\n got %s\nwant %s", rec.Body.Bytes(), wantJSON)
			}
			checkLength(t, rec)
		})
	}
}

func checkLength(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if n, err := strconv.Atoi(rec.Header().Get("Content-Length")); err != nil || n != rec.Body.Len() {
		t.Errorf("Content-Length %q, body %d bytes", rec.Header().Get("Content-Length"), rec.Body.Len())
	}
}

// TestSharedSerializations checks over HTTP that a cached object is
// serialized once per format: a second protobuf list hands out the very
// bytes the first produced (the memo lives with the cached object), and
// a JSON list and a watch write the object's kept JSON (a list's items
// without apiVersion and kind, as kube lists built-in objects), with
// nothing memoized.
func TestSharedSerializations(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	const pods = "/api/v1/namespaces/default/pods"
	var last map[string]any
	for i := range 3 {
		last = c.mustDo("POST", pods, "", benchPod(i), http.StatusCreated)
	}
	res := c.srv.reg.Lookup(schema.GroupVersion{Version: "v1"}, "pods")
	cache := c.srv.caches[res]
	// resourceVersion=0 is served from the watch cache, which may lag
	// behind the writes just acknowledged: wait until it holds the last.
	lastRV, _ := strconv.ParseInt(str(last, "metadata.resourceVersion"), 10, 64)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		lr, err := cache.List(t.Context(), watchcache.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		if lr.ResourceVersion >= lastRV {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch cache never reached revision %d", lastRV)
		}
	}
	list := func(accept string) []byte {
		r := c.do("GET", pods+"?resourceVersion=0", "", "", "Accept", accept)
		if r.code != http.StatusOK {
			t.Fatalf("list: %d %s", r.code, r.body)
		}
		return r.body
	}
	first := list(respond.MediaProtobuf)
	obj, _, err := registry.Protobuf.Decode(first, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pl, ok := obj.(*corev1.PodList); !ok || len(pl.Items) != 3 || pl.Items[2].Name != "pod-000002" {
		t.Fatalf("protobuf list: %#v", obj)
	}
	if again := list(respond.MediaProtobuf); !bytes.Equal(again, first) {
		t.Error("second protobuf list differs from the first")
	}
	var jl struct{ Items []json.RawMessage }
	if err := json.Unmarshal(list(respond.MediaJSON), &jl); err != nil || len(jl.Items) != 3 {
		t.Fatalf("JSON list: %d items, %v", len(jl.Items), err)
	}

	lr, err := cache.List(t.Context(), watchcache.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	objects := make([][]byte, len(lr.Items))
	for i, it := range lr.Items {
		p, err := wire.ItemJSON(it)
		if err != nil {
			t.Fatal(err)
		}
		if js := slices.Concat(p.Head, p.Body); !bytes.Equal(js, jl.Items[i]) {
			t.Errorf("item %d: listed JSON %s, kept %s", i, jl.Items[i], js)
		}
		// JSON is written from the kept bytes, with nothing memoized.
		if _, ok := it.Encodings().Done(wire.MemoItemJSON); ok {
			t.Errorf("item %d: list JSON memoized", i)
		}
		if objects[i], err = wire.ObjectJSON(it); err != nil {
			t.Fatal(err)
		}
		calls := 0
		if _, err := it.Encodings().Get(wire.MemoProto, func() ([]byte, error) { calls++; return nil, nil }); err != nil || calls != 0 {
			t.Errorf("item %d: protobuf encoded again (%d calls, %v)", i, calls, err)
		}
	}

	// A watch from 0 starts with the state as ADDED events carrying the
	// memoized object bytes.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.base+pods+"?watch=true&resourceVersion=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for i := range 3 {
		var ev struct {
			Type   string
			Object json.RawMessage
		}
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "ADDED" || !bytes.Equal(ev.Object, objects[i]) {
			t.Errorf("event %d: %s %s, want ADDED %s", i, ev.Type, ev.Object, objects[i])
		}
	}
	_ = resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
}

// flushCounter is a ResponseWriter that counts flushes.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *flushCounter) Flush() { f.flushes++; f.ResponseRecorder.Flush() }

// TestWriteBatch checks the watch writer's batching: every event pending
// when a batch starts goes out in order under one flush, a lone event is
// flushed at once, a closed channel is reported, and a burst larger than
// a batch is split without loss.
func TestWriteBatch(t *testing.T) {
	pod := serializeObjects(t)["pod"]
	pods := lookupResource(t, "", "pods")
	event := func(i int) *watchEvent {
		u := pod.DeepCopy()
		u.SetName(fmt.Sprintf("p%04d", i))
		return watchcache.NewEvent(watch.Modified, u, int64(i))
	}
	tests := []struct {
		name        string
		pending     int
		close       bool
		wantFlushes int
	}{
		{"lone event", 0, false, 1},
		{"burst", 99, false, 1},
		{"burst then close", 10, true, 1},
		{"larger than a batch", 2*batchEvents + 5, false, 3},
	}
	for _, enc := range []encoding{encJSON, encProtobuf} {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%d/%s", enc, tc.name), func(t *testing.T) {
				ch := make(chan *watchEvent, tc.pending+1)
				for i := 1; i <= tc.pending; i++ {
					ch <- event(i)
				}
				if tc.close {
					close(ch)
				}
				fc := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
				ww := newWatchWriter(fc, enc, pods)
				open, err := ww.writeBatch(event(0), ch)
				for err == nil && open && len(ch) > 0 {
					open, err = ww.writeBatch(<-ch, ch)
				}
				if err != nil {
					t.Fatal(err)
				}
				if open == tc.close {
					t.Errorf("open = %v, channel closed %v", open, tc.close)
				}
				if fc.flushes != tc.wantFlushes {
					t.Errorf("%d flushes, want %d", fc.flushes, tc.wantFlushes)
				}
				names := readFrames(t, enc, fc.Body.Bytes())
				if len(names) != tc.pending+1 {
					t.Fatalf("%d events, want %d", len(names), tc.pending+1)
				}
				for i, n := range names {
					if want := fmt.Sprintf("p%04d", i); n != want {
						t.Fatalf("event %d is %s, want %s", i, n, want)
					}
				}
			})
		}
	}
}

// readFrames decodes a watch body and returns the names of its objects.
func readFrames(t *testing.T, enc encoding, body []byte) []string {
	t.Helper()
	var names []string
	if enc == encJSON {
		dec := json.NewDecoder(bytes.NewReader(body))
		for dec.More() {
			var ev struct {
				Type   string
				Object struct{ Metadata struct{ Name string } }
			}
			if err := dec.Decode(&ev); err != nil {
				t.Fatal(err)
			}
			names = append(names, ev.Object.Metadata.Name)
		}
		return names
	}
	for len(body) > 0 {
		n := binary.BigEndian.Uint32(body)
		var ev metav1.WatchEvent
		if err := ev.Unmarshal(body[4 : 4+n]); err != nil {
			t.Fatal(err)
		}
		body = body[4+n:]
		obj, _, err := registry.Protobuf.Decode(ev.Object.Raw, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, obj.(*corev1.Pod).Name)
	}
	return names
}

// TestListPackedVersions: a list carries objects whose versions the
// watch cache holds packed (all but its newest thousand or so) as it
// carries the others, in JSON and in protobuf, and a watch's initial
// events too.
func TestListPackedVersions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const (
			coll = "/api/v1/namespaces/default/configmaps"
			n    = 1200
		)
		common := strings.Repeat("shared configuration ", 20)
		for i := range n {
			c.mustDo("POST", coll, "", fmt.Sprintf(`{"metadata":{"name":"cm-%04d","labels":{"i":"%d"}},"data":{"common":%q,"own":"%d"}}`, i, i, common, i), http.StatusCreated)
		}
		res := c.srv.reg.Lookup(schema.GroupVersion{Version: "v1"}, "configmaps")
		it, ok := c.srv.cacheFor(res).Item(registry.KeyFor(res, "default", "cm-0000"))
		if !ok || !it.Packed() {
			t.Fatalf("cm-0000's version is not packed (cached: %v)", ok)
		}
		var list struct{ Items []json.RawMessage }
		if err := json.Unmarshal(c.do("GET", coll, "", "").body, &list); err != nil || len(list.Items) != n {
			t.Fatalf("JSON list: %d items, %v", len(list.Items), err)
		}
		r := c.do("GET", coll, "", "", "Accept", "application/vnd.kubernetes.protobuf")
		obj, _, err := registry.Protobuf.Decode(r.body, nil, nil)
		pl, ok := obj.(*corev1.ConfigMapList)
		if err != nil || !ok || len(pl.Items) != n {
			t.Fatalf("protobuf list: %T, %v", obj, err)
		}
		w := c.watch(coll + "?watch=1&resourceVersion=0")
		for i, item := range list.Items {
			name := fmt.Sprintf("cm-%04d", i)
			want := c.mustDo("GET", coll+"/"+name, "", "", http.StatusOK)
			delete(want, "kind")
			delete(want, "apiVersion")
			var got map[string]any
			if err := json.Unmarshal(item, &got); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("JSON list item %d: %s (%v), want %v", i, item, err, want)
			}
			if cm := pl.Items[i]; cm.Name != name || cm.ResourceVersion != want["metadata"].(map[string]any)["resourceVersion"] || cm.Data["common"] != common {
				t.Fatalf("protobuf list item %d: %s at %s", i, cm.Name, cm.ResourceVersion)
			}
		}
		seen := map[string]bool{}
		for len(seen) < n {
			ev, ok := w.next()
			if !ok {
				t.Fatalf("the watch ended after %d initial events", len(seen))
			}
			if ev.Type != "ADDED" || nested(ev.Object, "data.common") != common {
				t.Fatalf("initial event %v", ev)
			}
			seen[str(ev.Object, "metadata.name")] = true
		}
	})
}
