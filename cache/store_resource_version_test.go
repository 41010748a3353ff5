package cache_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
)

// TestWaitForStoreResourceVersion: a writer waiting for the resourceVersion
// its write returned finds the write in the cache once the wait returns,
// whether the informer started with a list or a streaming list, and a
// deleted object gone; a wait for a version the server has not reached
// ends with its context.
func TestWaitForStoreResourceVersion(t *testing.T) {
	for _, tc := range []struct {
		name      string
		watchList bool
	}{
		{"list", false},
		{"streaming list", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := cachetest.New[*corev1.Pod](cachetest.WithNewObject(func() *corev1.Pod { return &corev1.Pod{} }))
				first, err := src.Create(newPod("ns", "first"))
				if err != nil {
					t.Fatal(err)
				}
				inf := newShared(src, cache.SharedInformerOptions{Reflector: cache.ReflectorOptions{DisableWatchList: !tc.watchList}})
				if got := inf.LastStoreSyncResourceVersion(); got != "" {
					t.Fatalf("before Run: %q", got)
				}
				runShared(t, inf)
				if err := inf.WaitForStoreResourceVersion(t.Context(), first.ResourceVersion); err != nil {
					t.Fatal(err)
				}

				var prev string
				for i := range 20 {
					var written *corev1.Pod
					var err error
					switch i % 3 {
					case 0:
						p := newPod("ns", "p")
						p.Labels = map[string]string{"i": string(rune('a' + i))}
						if _, ok := src.Get("ns", "p"); ok {
							written, err = src.Update(p)
						} else {
							written, err = src.Create(p)
						}
					case 1:
						written, err = src.Delete("ns", "p")
					case 2:
						written, err = src.Create(newPod("other", string(rune('a'+i))))
					}
					if err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
					err = inf.WaitForStoreResourceVersion(ctx, written.ResourceVersion)
					cancel()
					if err != nil {
						t.Fatalf("write %d at %s: %v", i, written.ResourceVersion, err)
					}
					cached, ok, _ := inf.GetIndexer().GetByKey(written.Namespace + "/" + written.Name)
					switch {
					case i%3 == 1 && ok:
						t.Fatalf("write %d: deleted at %s, cache still holds it", i, written.ResourceVersion)
					case i%3 != 1 && (!ok || cached.ResourceVersion != written.ResourceVersion):
						t.Fatalf("write %d at %s: cache holds %v", i, written.ResourceVersion, cached)
					}
					rv := inf.LastStoreSyncResourceVersion()
					if c, err := cache.CompareResourceVersion(rv, written.ResourceVersion); err != nil || c < 0 {
						t.Fatalf("write %d at %s: store at %q", i, written.ResourceVersion, rv)
					}
					if c, err := cache.CompareResourceVersion(rv, prev); prev != "" && (err != nil || c < 0) {
						t.Fatalf("store version moved back from %s to %s", prev, rv)
					}
					prev = rv
				}

				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				if err := inf.WaitForStoreResourceVersion(ctx, "1000000"); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("wait for a version not reached: %v", err)
				}
			})
		})
	}
}
