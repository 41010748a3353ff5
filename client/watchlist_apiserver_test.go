package client

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/apiserver"
	"github.com/listwatch/listwatch/cache"
)

// An informer made by the factory syncs by default from a streaming
// list served by listwatch's own API server (a watch with
// sendInitialEvents=true ending at the k8s.io/initial-events-end bookmark),
// with no LIST request at all, to exactly the server's pods; and then
// tracks creates, updates and deletes, still without a list.
func TestAPIServerInformerStreamingList(t *testing.T) {
	for _, b := range backends {
		for _, preferJSON := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/json=%v", b.Name, preferJSON), func(t *testing.T) {
				api := startRealAPI(t, b.New(t), apiserver.WatchCacheConfig{BookmarkInterval: 50 * time.Millisecond})
				direct := NewResource[*corev1.Pod](api.client(t, false, false), podsGVR, "default")
				const n = 23
				for i := range n {
					if _, err := direct.Create(t.Context(), newPod(fmt.Sprintf("pod-%02d", i)), metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				want := serverPods(t, direct)
				if len(want) != n {
					t.Fatalf("server has %d pods, want %d", len(want), n)
				}
				listsBefore := api.proxy.counts().lists // startRealAPI lists nothing, but be exact

				tr := &tracker{pods: map[string]string{}}
				inf := startPodInformerWith(t, api.client(t, true, preferJSON), cache.ReflectorOptions{PageSize: 5}, tr)

				// A streaming list from resourceVersion "" is consistent: once
				// synced, the store is the server's state, no later.
				if got := rvs(inf.GetStore().List()); !mapsEqual(got, want) {
					t.Fatalf("synced store %v, want the server's %v", got, want)
				}
				c := api.proxy.counts()
				if c.lists != listsBefore {
					t.Fatalf("%d LIST requests during the sync, want none (watches %v)", c.lists-listsBefore, c.watchQs)
				}
				if len(c.watchQs) == 0 {
					t.Fatal("no watch request during the sync")
				}
				q := c.watchQs[0]
				if q.Get("sendInitialEvents") != "true" || q.Get("allowWatchBookmarks") != "true" ||
					q.Get("resourceVersionMatch") != "NotOlderThan" || q.Get("resourceVersion") != "" {
					t.Fatalf("first watch %v, want sendInitialEvents=true, allowWatchBookmarks=true, resourceVersionMatch=NotOlderThan, resourceVersion \"\"", q)
				}
				if rv := inf.LastSyncResourceVersion(); rv == "" {
					t.Fatal("no resourceVersion after the sync")
				}
				// The handler is told the initial state once the informer syncs.
				eventually(t, "the handler to see the initial state", func() bool {
					got, _ := tr.snapshot()
					return mapsEqual(got, want)
				})

				// Creates, updates and deletes after the sync.
				for i := range 4 {
					if _, err := direct.Create(t.Context(), newPod(fmt.Sprintf("new-%d", i)), metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				for i := range 5 {
					p, err := direct.Get(t.Context(), fmt.Sprintf("pod-%02d", i), metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					p.Labels["gen"] = "2"
					if _, err := direct.Update(t.Context(), p, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				for _, name := range []string{"pod-05", "pod-06", "new-0"} {
					if err := direct.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				want = serverPods(t, direct)
				if len(want) != n+4-3 {
					t.Fatalf("server has %d pods, want %d", len(want), n+1)
				}
				eventually(t, "the informer to track the writes", func() bool {
					got, _ := tr.snapshot()
					return mapsEqual(rvs(inf.GetStore().List()), want) && mapsEqual(got, want)
				}, func() string {
					got, _ := tr.snapshot()
					return fmt.Sprintf("store %v\nhandler %v\nserver %v", rvs(inf.GetStore().List()), got, want)
				})
				for i := range 5 {
					p, ok, err := inf.GetStore().GetByKey(fmt.Sprintf("default/pod-%02d", i))
					if err != nil || !ok || p.Labels["gen"] != "2" {
						t.Fatalf("pod-%02d in the store: %v %v %v", i, ok, err, p)
					}
				}
				if _, errs := tr.snapshot(); len(errs) > 0 {
					t.Fatalf("handler saw impossible notifications: %v", errs)
				}
				c = api.proxy.counts()
				if c.lists != listsBefore {
					t.Fatalf("%d LIST requests after the writes, want none", c.lists-listsBefore)
				}
				for i, q := range c.watchQs[1:] {
					if rv := q.Get("resourceVersion"); rv == "" || rv == "0" {
						t.Fatalf("watch %d from resourceVersion %q: a re-watch must resume from one seen (%v)", i+1, rv, q)
					}
				}
			})
		}
	}
}
