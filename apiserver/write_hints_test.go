package apiserver

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/watchcache"
)

// TestWriteHintsServeTheSameBytes writes objects of several kinds the ways
// clients do (create, update, status, patch, binding, scale, graceful and
// final delete) while a protobuf watch is open on each resource, and checks
// that every event whose protobuf message was marshalled from the writer's
// Go object (writeHints) carries the bytes converting the cached map gives,
// and that hints were used; and that the DELETED event, whose message is
// made from its last version's, carries the same bytes too.
func TestWriteHintsServeTheSameBytes(t *testing.T) {
	srv, _, _ := benchServer(t)
	type watched struct {
		res *resource
		w   *watchcache.Watcher[*unstructured.Unstructured]
	}
	var all []watched
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "pods"}, {Version: "v1", Resource: "configmaps"},
		{Group: "apps", Version: "v1", Resource: "replicasets"}, {Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
	} {
		res := srv.reg.lookup(gvr.GroupVersion(), gvr.Resource)
		if res == nil {
			t.Fatalf("no resource %v", gvr)
		}
		c := srv.cacheFor(res)
		// As handleWatch counts a protobuf watch.
		c.hints.protoWatchers.Add(1)
		w, err := c.Watch(t.Context(), watchcache.WatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		all = append(all, watched{res, w})
	}

	const ns = "/api/v1/namespaces/default"
	const apps = "/apis/apps/v1/namespaces/default"
	pod := `{"metadata":{"name":"p","labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"nginx","resources":{"requests":{"cpu":"0.1","memory":"64Mi"}}}]}}`
	rs := `{"metadata":{"name":"rs"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}`
	steps := []struct {
		method, path, body string
		code               int
	}{
		{http.MethodPost, ns + "/serviceaccounts", `{"metadata":{"name":"default"}}`, http.StatusCreated},
		{http.MethodPost, ns + "/pods", pod, http.StatusCreated},
		{http.MethodPatch, ns + "/pods/p", `{"metadata":{"labels":{"tier":"web"}}}`, http.StatusOK},
		{http.MethodPost, ns + "/pods/p/binding", `{"metadata":{"name":"p"},"target":{"kind":"Node","name":"node-1"}}`, http.StatusCreated},
		{http.MethodPatch, ns + "/pods/p/status", `{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-11-26T18:00:00Z"}]}}`, http.StatusOK},
		{http.MethodDelete, ns + "/pods/p", ``, http.StatusOK},
		{http.MethodDelete, ns + "/pods/p", `{"gracePeriodSeconds":0}`, http.StatusOK},
		{http.MethodPost, ns + "/configmaps", `{"metadata":{"name":"cm"},"data":{"a":"1"}}`, http.StatusCreated},
		{http.MethodPut, ns + "/configmaps/cm", `{"metadata":{"name":"cm"},"data":{"a":"2"}}`, http.StatusOK},
		{http.MethodPost, apps + "/replicasets", rs, http.StatusCreated},
		{http.MethodPatch, apps + "/replicasets/rs/scale", `{"spec":{"replicas":3}}`, http.StatusOK},
		{http.MethodPatch, apps + "/replicasets/rs/status", `{"status":{"replicas":3,"readyReplicas":1}}`, http.StatusOK},
		{http.MethodPost, apps + "/deployments", `{"metadata":{"name":"d"},"spec":{"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}`, http.StatusCreated},
		{http.MethodPatch, apps + "/deployments/d", `{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx:2"}]}}}}`, http.StatusOK},
		{http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/default/leases", `{"metadata":{"name":"l"},"spec":{"holderIdentity":"a","renewTime":"2026-11-26T18:00:00.123456Z"}}`, http.StatusCreated},
	}
	for _, s := range steps {
		contentType := "application/json"
		if s.method == http.MethodPatch {
			contentType = "application/merge-patch+json"
		}
		benchSend(t, srv, s.method, s.path, contentType, s.body, s.code)
	}
	// Writers racing on one object: attempts refused as conflicts, and
	// retried, must leave no hint behind.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 10 {
				req := httptest.NewRequest(http.MethodPatch, ns+"/configmaps/cm", strings.NewReader(fmt.Sprintf(`{"data":{"w%d":"%d"}}`, g, i)))
				req.Header.Set("Content-Type", "application/merge-patch+json")
				rec := httptest.NewRecorder()
				srv.Handler().ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					t.Errorf("patch: %d %s", rec.Code, rec.Body.Bytes())
				}
			}
		})
	}
	wg.Wait()
	// Every resource's events up to the last write.
	events, deleted := 0, 0
	for _, wd := range all {
		rev := srv.cacheFor(wd.res).ResourceVersion()
		for done := false; !done; {
			ev := <-wd.w.Events()
			if ev.Revision >= rev {
				done = true
			}
			switch ev.Type {
			case watch.Bookmark:
				continue
			case watch.Deleted:
				// Its message is made from its last version's, which
				// this loop made when it had that version's event.
				if _, ok := ev.BaseEncodings().Done(memoProto); !ok {
					t.Errorf("DELETED %s: the last version's message is not made", ev.Object.GetName())
				}
				deleted++
			default:
				events++
			}
			got, err := eventProto(ev)
			if err != nil {
				t.Fatal(err)
			}
			want, err := protoOf(ev.Object)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s %s %s at %d: the message made from the hint or the last version differs from the converted one:\n%q\n%q", ev.Type, ev.Object.GetKind(), ev.Object.GetName(), ev.Revision, got, want)
			}
		}
	}
	var used int64
	for _, wd := range all {
		used += srv.cacheFor(wd.res).hints.used.Load()
	}
	// Every write of steps but the ReplicaSet's scale (whose object is a
	// map) leaves a hint its event takes, and the service account is not
	// watched; of the racing writers', those left while the cache was
	// more than maxKeyHints writes behind are not kept.
	if want := int64(len(steps) - 2); used < want {
		t.Errorf("%d of %d events hinted, want at least %d", used, events, want)
	}
	for _, wd := range all {
		h := &srv.cacheFor(wd.res).hints
		h.mu.Lock()
		if h.n != 0 {
			t.Errorf("%s: %d hints left after every event: %v", wd.res.gvr(), h.n, slices.Collect(maps.Keys(h.m)))
		}
		h.mu.Unlock()
	}
	if deleted != 1 {
		t.Errorf("%d DELETED events, want the pod's", deleted)
	}
	t.Logf("%d events, %d hinted", events, used)
}

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
		obj       object
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
			got, err := enc.Get(memoProto, func() ([]byte, error) { return []byte("converted"), nil })
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
