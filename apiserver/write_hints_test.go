package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/apiserver/internal/wire"
	"github.com/listwatch/listwatch/watchcache"
)

// TestWriteHintsServeTheSameBytes writes objects of several kinds the ways
// clients do (create, update, status, patch, binding, scale, graceful and
// final delete) while a protobuf watch is open on each resource, and checks
// that every event whose protobuf message was marshalled from the writer's
// Go object (registry.Cache.LeaveHint) carries the bytes converting the cached map gives,
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
		res := srv.reg.Lookup(gvr.GroupVersion(), gvr.Resource)
		if res == nil {
			t.Fatalf("no resource %v", gvr)
		}
		c := srv.cacheFor(res)
		// As handleWatch counts a protobuf watch.
		defer c.WatchProtobuf()()
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
	// written is the highest resourceVersion each resource's writes were
	// answered with: its watch is read up to there, since the cache may
	// not yet have applied the last writes when they return.
	var writtenMu sync.Mutex
	written := map[string]int64{}
	noteWrite := func(path string, body []byte) {
		var answer struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if json.Unmarshal(body, &answer) != nil {
			return
		}
		rv, err := strconv.ParseInt(answer.Metadata.ResourceVersion, 10, 64)
		if err != nil {
			return
		}
		for _, wd := range all {
			if strings.Contains(path, "/"+wd.res.Plural+"/") || strings.HasSuffix(path, "/"+wd.res.Plural) {
				writtenMu.Lock()
				written[wd.res.Plural] = max(written[wd.res.Plural], rv)
				writtenMu.Unlock()
			}
		}
	}
	for _, s := range steps {
		contentType := "application/json"
		if s.method == http.MethodPatch {
			contentType = "application/merge-patch+json"
		}
		noteWrite(s.path, benchSend(t, srv, s.method, s.path, contentType, s.body, s.code))
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
				noteWrite(ns+"/configmaps/cm", rec.Body.Bytes())
			}
		})
	}
	wg.Wait()
	// Every resource's events up to the last write.
	events, deleted := 0, 0
	for _, wd := range all {
		rev := max(srv.cacheFor(wd.res).ResourceVersion(), written[wd.res.Plural])
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
				if _, ok := ev.BaseEncodings().Done(wire.MemoProto); !ok {
					t.Errorf("DELETED %s: the last version's message is not made", ev.Object().GetName())
				}
				deleted++
			default:
				events++
			}
			got, err := wire.EventProto(ev, wd.res.GVK)
			if err != nil {
				t.Fatal(err)
			}
			want, err := wire.ProtoOf(ev.Object())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s %s %s at %d: the message made from the hint or the last version differs from the converted one:\n%q\n%q", ev.Type, ev.Object().GetKind(), ev.Object().GetName(), ev.Revision, got, want)
			}
		}
	}
	var used int64
	for _, wd := range all {
		used += srv.cacheFor(wd.res).HintStats().Used
	}
	// Every write of steps but the ReplicaSet's scale (whose object is a
	// map) leaves a hint its event takes, and the service account is not
	// watched; of the racing writers', those left while the cache was
	// more than a key's bound of hints behind are not kept.
	if want := int64(len(steps) - 2); used < want {
		t.Errorf("%d of %d events hinted, want at least %d", used, events, want)
	}
	for _, wd := range all {
		if left := srv.cacheFor(wd.res).HintStats().Left; len(left) != 0 {
			t.Errorf("%s: hints left after every event: %v", wd.res.GVR(), left)
		}
	}
	if deleted != 1 {
		t.Errorf("%d DELETED events, want the pod's", deleted)
	}
	t.Logf("%d events, %d hinted", events, used)
}
