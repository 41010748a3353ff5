package cache_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/cache/cachetest"
)

// TestReflectorShard: a sharded reflector asks for its shard on every
// list page and watch, streaming or not, and keeps out of its store the
// objects of other shards that a server ignoring shardSelector (here
// cachetest, which sends everything) sends.
func TestReflectorShard(t *testing.T) {
	half := sharding.NewSelector(sharding.ShardRangeRequirement{Key: "object.metadata.uid", Start: "0x0000000000000000", End: "0x8000000000000000"})
	for _, watchList := range []bool{false, true} {
		t.Run(fmt.Sprint("watchList=", watchList), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := cachetest.New[*corev1.Pod]()
				var mu sync.Mutex
				var asked []string
				record := func(o metav1.ListOptions) {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, o.ShardSelector)
				}
				lw := cache.ListWatch[*corev1.Pod]{
					ListFunc: func(ctx context.Context, o metav1.ListOptions) (*cache.List[*corev1.Pod], error) {
						record(o)
						return src.List(ctx, o)
					},
					WatchFunc: func(ctx context.Context, o metav1.ListOptions) (cache.Watcher[*corev1.Pod], error) {
						record(o)
						return src.Watch(ctx, o)
					},
				}
				pod := func(i int) *corev1.Pod {
					p := newPod("a", fmt.Sprintf("p%02d", i))
					p.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i*104729))
					return p
				}
				for i := range 20 {
					src.Create(pod(i))
				}
				store := cache.NewStore[*corev1.Pod](nil)
				r := cache.NewReflector[*corev1.Pod](lw, store, cache.ReflectorOptions{Shard: half, PageSize: 3, DisableWatchList: !watchList, Logger: quiet})
				go r.Run(t.Context())
				synctest.Wait()
				for i := 20; i < 40; i++ {
					src.Create(pod(i))
				}
				for i := 0; i < 40; i += 3 {
					p := pod(i)
					p.Labels = map[string]string{"changed": "yes"}
					src.Update(p)
				}
				for i := 1; i < 40; i += 5 {
					src.Delete("a", fmt.Sprintf("p%02d", i))
				}
				synctest.Wait()
				want, _ := src.List(t.Context(), metav1.ListOptions{})
				var wantNames []string
				for _, p := range want.Items {
					if ok, _ := half.Matches(p); ok {
						wantNames = append(wantNames, p.Name)
					}
				}
				var got []string
				for _, p := range store.List() {
					got = append(got, p.Name)
				}
				slices.Sort(got)
				if !slices.Equal(got, wantNames) || len(got) == 0 || len(got) == len(want.Items) {
					t.Errorf("store holds %v\nwant %v (of %d)", got, wantNames, len(want.Items))
				}
				mu.Lock()
				defer mu.Unlock()
				if len(asked) == 0 {
					t.Errorf("asked %d times", len(asked))
				}
				for _, s := range asked {
					if s != half.String() {
						t.Errorf("a request asked for shard %q, want %q", s, half.String())
					}
				}
			})
		})
	}
}
