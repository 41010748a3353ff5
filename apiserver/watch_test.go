package apiserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/apiserver/internal/respond"
)

func TestWatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const pods = "/api/v1/namespaces/default/pods"
		p0 := c.mustDo("POST", pods, "", podBody(`{"name":"p0","labels":{"app":"x"}}`, ""), 201)

		// "" starts with the current state as ADDED.
		all := c.watch(pods + "?watch=true")
		if ct := all.hdr.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		all.expect("ADDED", "p0")
		// From a resourceVersion: only what follows.
		from := c.watch(pods + "?watch=1&resourceVersion=" + str(p0, "metadata.resourceVersion"))
		sel := c.watch("/api/v1/pods?watch=true&resourceVersion=" + str(p0, "metadata.resourceVersion") + "&labelSelector=app%3Dy")
		fsel := c.watch("/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1")

		c.mustDo("POST", pods, "", podBody(`{"name":"p1"}`, ""), 201)
		c.mustDo("PATCH", pods+"/p0", "application/merge-patch+json", `{"metadata":{"labels":{"app":"y"}}}`, 200)
		c.mustDo("PATCH", pods+"/p0", "application/merge-patch+json", `{"metadata":{"labels":{"app":"z"}}}`, 200)
		// A pod's spec.nodeName is immutable but for the binding, as the
		// scheduler sets it.
		c.mustDo("POST", pods+"/p1/binding", "", `{"metadata":{"name":"p1"},"target":{"kind":"Node","name":"n1"}}`, 201)
		c.mustDo("DELETE", pods+"/p0", "", "", 200)

		for _, w := range []*watchStream{all, from} {
			w.expect("ADDED", "p1")
			ev := w.expect("MODIFIED", "p0")
			if str(ev.Object, "kind") != "Pod" || str(ev.Object, "apiVersion") != "v1" {
				t.Errorf("event object kind: %v %v", ev.Object["kind"], ev.Object["apiVersion"])
			}
			w.expect("MODIFIED", "p0")
			w.expect("MODIFIED", "p1")
			// A pod's delete is graceful: kube's store first writes its
			// deletionTimestamp, then, the pod being unscheduled (grace
			// period 0), removes it.
			if ev := w.expect("MODIFIED", "p0"); str(ev.Object, "metadata.deletionTimestamp") == "" || nested(ev.Object, "metadata.deletionGracePeriodSeconds") != float64(0) {
				t.Errorf("deleting p0: %v", ev.Object["metadata"])
			}
			w.expect("DELETED", "p0")
		}
		// Moving into and out of a selector is ADDED and DELETED.
		sel.expect("ADDED", "p0")
		sel.expect("DELETED", "p0")
		fsel.expect("ADDED", "p1")

		// Streaming list: initial ADDED, then the end bookmark.
		sie := c.watch(pods + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
		sie.expect("ADDED", "p1")
		bm := sie.expect("BOOKMARK", "")
		if str(bm.Object, "kind") != "Pod" {
			t.Errorf("bookmark kind %v", bm.Object["kind"])
		}
		if str(bm.Object, "metadata.resourceVersion") == "" {
			t.Errorf("bookmark without resourceVersion: %v", bm.Object)
		}
		// The end bookmark carries k8s.io/initial-events-end: "true" (next
		// only tells it from periodic bookmarks by the key's presence).
		if ann, _ := nested(bm.Object, "metadata.annotations").(map[string]any); ann["k8s.io/initial-events-end"] != "true" {
			t.Errorf(`bookmark annotations %v, want k8s.io/initial-events-end: "true"`, bm.Object["metadata"])
		}

		// Periodic bookmarks when asked for (the interval is 100ms here).
		bw := c.watch(pods + "?watch=true&allowWatchBookmarks=true&resourceVersion=" + str(p0, "metadata.resourceVersion"))
		for {
			var ev event
			if err := bw.dec.Decode(&ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == "BOOKMARK" {
				if str(ev.Object, "kind") != "Pod" || str(ev.Object, "metadata.resourceVersion") == "" {
					t.Errorf("bookmark: %v", ev.Object)
				}
				break
			}
		}

		// timeoutSeconds ends the stream.
		to := c.watch(pods + "?watch=true&timeoutSeconds=1&resourceVersion=" + str(p0, "metadata.resourceVersion"))
		for {
			if _, ok := to.next(); !ok {
				break
			}
		}

		// A resourceVersion that left the window: 200 and an ERROR event
		// with 410 Expired.
		small := newClientWith(t, c.st, WatchCacheConfig{WindowSize: 2})
		for range 4 {
			small.mustDo("POST", "/api/v1/namespaces/default/endpoints", "", `{"metadata":{"generateName":"e"}}`, 201)
		}
		gone := small.watch("/api/v1/namespaces/default/endpoints?watch=true&resourceVersion=" + str(p0, "metadata.resourceVersion"))
		ev := gone.expect("ERROR", "")
		if str(ev.Object, "kind") != "Status" || ev.Object["code"] != float64(410) || str(ev.Object, "reason") != "Expired" {
			t.Errorf("expired: %v", ev.Object)
		}
		if _, ok := gone.next(); ok {
			t.Error("stream continued after ERROR")
		}

		// Options apimachinery's ValidateListOptions refuses are 422, as
		// kube-apiserver answers them (golden core-list-options).
		bad := []struct {
			path string
			code int
		}{
			{pods + "?watch=true&sendInitialEvents=true", 422},
			{pods + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", 400},
			{pods + "?watch=true&resourceVersionMatch=NotOlderThan&resourceVersion=1", 422},
			{pods + "?watch=true&timeoutSeconds=x", 400},
			{pods + "?watch=true&fieldSelector=spec.nope%3D1", 400},
		}
		for _, b := range bad {
			if r := c.do("GET", b.path, "", ""); r.code != b.code {
				t.Errorf("%s: %d %s, want %d", b.path, r.code, r.body, b.code)
			}
		}
	})
}

// TestProtobuf decodes get, list and watch responses with apimachinery's
// protobuf serializer, as client-go does.
func TestProtobuf(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		const pods = "/api/v1/namespaces/default/pods"
		created := c.mustDo("POST", pods, "", `{"metadata":{"name":"p","labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 201)
		r := c.do("GET", pods+"/p", "", "", "Accept", "application/vnd.kubernetes.protobuf, application/json")
		if r.hdr.Get("Content-Type") != respond.MediaProtobuf {
			t.Fatalf("Content-Type %q", r.hdr.Get("Content-Type"))
		}
		obj, _, err := registry.Protobuf.Decode(r.body, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if pod, ok := obj.(*corev1.Pod); !ok || pod.Name != "p" || pod.Spec.Containers[0].Image != "i" || pod.ResourceVersion != str(created, "metadata.resourceVersion") {
			t.Errorf("pod: %#v", obj)
		}
		r = c.do("GET", pods, "", "", "Accept", "application/vnd.kubernetes.protobuf")
		obj, _, err = registry.Protobuf.Decode(r.body, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if list, ok := obj.(*corev1.PodList); !ok || len(list.Items) != 1 || list.ResourceVersion == "" {
			t.Errorf("list: %#v", obj)
		}
		// Custom resources are JSON only.
		r = c.do("GET", "/apis/samplecontroller.k8s.io/v1alpha1/foos", "", "", "Accept", "application/vnd.kubernetes.protobuf")
		if r.code != 406 {
			t.Errorf("custom resource protobuf: %d", r.code)
		}

		req, err := http.NewRequestWithContext(t.Context(), "GET", c.base+pods+"?watch=true", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/vnd.kubernetes.protobuf;stream=watch")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/vnd.kubernetes.protobuf;stream=watch" {
			t.Errorf("watch Content-Type %q", ct)
		}
		readEvent := func() (string, runtime.Object) {
			var n [4]byte
			if _, err := io.ReadFull(resp.Body, n[:]); err != nil {
				t.Fatal(err)
			}
			frame := make([]byte, binary.BigEndian.Uint32(n[:]))
			if _, err := io.ReadFull(resp.Body, frame); err != nil {
				t.Fatal(err)
			}
			var ev metav1.WatchEvent
			if err := ev.Unmarshal(frame); err != nil {
				t.Fatal(err)
			}
			obj, _, err := registry.Protobuf.Decode(ev.Object.Raw, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			return ev.Type, obj
		}
		if typ, obj := readEvent(); typ != "ADDED" || obj.(*corev1.Pod).Name != "p" {
			t.Errorf("first event %s %T", typ, obj)
		}
		// An unscheduled pod's delete: the deletionTimestamp is written,
		// then the pod removed (grace period 0), as kube's store does.
		c.mustDo("DELETE", pods+"/p", "", "", 200)
		if typ, obj := readEvent(); typ != "MODIFIED" || obj.(*corev1.Pod).Name != "p" || obj.(*corev1.Pod).DeletionTimestamp == nil {
			t.Errorf("second event %s %#v", typ, obj)
		}
		if typ, obj := readEvent(); typ != "DELETED" || obj.(*corev1.Pod).Name != "p" {
			t.Errorf("third event %s %T", typ, obj)
		}
	})
}

// TestWatchClientGone checks that a watch whose client leaves ends, and the
// server closes cleanly (goleak in TestMain checks the goroutines).
func TestWatchClientGone(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		ctx, cancel := context.WithCancel(t.Context())
		req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/api/v1/pods?watch=true", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// The server keeps serving.
		c.mustDo("GET", "/api/v1/pods", "", "", 200)
	})
}

func TestLoadManifests(t *testing.T) {
	tests := []struct {
		name, data string
		want       int
		wantErr    string
	}{
		{"yaml documents", fooCRD + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", 2, ""},
		{"json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, 1, ""},
		{"list", `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},{"apiVersion":"v1","kind":"Secret","metadata":{"name":"b"}}]}`, 2, ""},
		{"empty documents", "---\n---\n", 0, ""},
		{"no kind", "apiVersion: v1\nmetadata: {name: a}\n", 0, "no apiVersion or kind"},
		{"not yaml", "\t:::", 0, "yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := ParseManifests([]byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(objs) != tt.want {
				t.Fatalf("got %v %v", objs, err)
			}
		})
	}
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/b.yaml", []byte(fooCRD), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir+"/sub", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/sub/a.json", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/notes.txt", []byte("not a manifest"), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := LoadManifests(dir)
	if err != nil || len(objs) != 2 || objs[0].GetKind() != "CustomResourceDefinition" {
		t.Fatalf("LoadManifests(dir): %v %v", objs, err)
	}
	if _, err := LoadManifests(dir + "/missing"); err == nil {
		t.Error("missing file loaded")
	}
	// A kustomization is no object: LoadManifests refuses it,
	// ScanManifests skips it.
	if err := os.WriteFile(dir+"/kustomization.yaml", []byte("resources:\n- b.yaml\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadManifests(dir); err == nil || !strings.Contains(err.Error(), "no apiVersion or kind") {
		t.Errorf("LoadManifests(dir with a kustomization): %v, want no apiVersion or kind", err)
	}
	objs, err = ScanManifests(dir)
	if err != nil || len(objs) != 2 || objs[0].GetKind() != "CustomResourceDefinition" {
		t.Fatalf("ScanManifests(dir with a kustomization): %v %v", objs, err)
	}
}

// FuzzCreateBody feeds arbitrary bodies to create, update and patch: the
// server must answer with a Status or an object, never panic or 500.
func FuzzCreateBody(f *testing.F) {
	for _, s := range []string{
		`{"metadata":{"name":"p"}}`, `{"metadata":5}`, `{"apiVersion":7}`, `[]`, `null`, `{"spec":{"containers":[{"name":1}]}}`,
		`{"metadata":{"name":"p","labels":{"a":{}}}}`, `{"metadata":{"finalizers":[1]}}`,
	} {
		f.Add(s)
	}
	st := backends[0].New
	f.Fuzz(func(t *testing.T, body string) {
		c := newClient(t, st(t))
		for _, req := range []struct{ method, path, ct string }{
			{"POST", "/api/v1/namespaces/default/pods", ""},
			{"PUT", "/api/v1/namespaces/default/pods/p", ""},
			{"PATCH", "/api/v1/namespaces/default/pods/p", "application/merge-patch+json"},
			{"PATCH", "/api/v1/namespaces/default/pods/p", "application/strategic-merge-patch+json"},
			{"POST", "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos", ""},
			{"DELETE", "/api/v1/namespaces/default/pods/p", ""},
		} {
			r := c.do(req.method, req.path, req.ct, body)
			if r.code >= 500 {
				t.Fatalf("%s %s %q: %d %s", req.method, req.path, body, r.code, r.body)
			}
			if r.code >= 400 && !bytes.Contains(r.body, []byte(`"kind":"Status"`)) {
				t.Fatalf("%s %s: error without Status: %s", req.method, req.path, r.body)
			}
		}
	})
}
