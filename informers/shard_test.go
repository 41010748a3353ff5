package informers_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/informers"
)

func TestShardSelector(t *testing.T) {
	for _, tt := range []struct {
		shard informers.Shard
		want  string
	}{
		// The 4-shard split of metav1.ListOptions.ShardSelector's documentation.
		{informers.Shard{Count: 4, Index: []int{0}}, "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')"},
		{informers.Shard{Count: 4, Index: []int{3}}, "shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"},
		{informers.Shard{Count: 1, Index: []int{0}}, "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"},
		{informers.Shard{Key: informers.ShardByNamespace, Count: 3, Index: []int{2, 0}},
			"shardRange(object.metadata.namespace, '0x0000000000000000', '0x5555555555555555') || shardRange(object.metadata.namespace, '0xaaaaaaaaaaaaaaaa', '0x10000000000000000')"},
	} {
		sel, err := tt.shard.Selector()
		if err != nil {
			t.Fatalf("%+v: %v", tt.shard, err)
		}
		if got := sel.String(); got != tt.want {
			t.Errorf("%+v:\n got %s\nwant %s", tt.shard, got, tt.want)
		}
	}
	for _, bad := range []informers.Shard{
		{Count: 0, Index: []int{0}},
		{Count: 4},
		{Count: 4, Index: []int{4}},
		{Count: 4, Index: []int{-1}},
		{Count: 4, Index: []int{1, 1}},
		{Key: 7, Count: 4, Index: []int{1}},
	} {
		if _, err := bad.Selector(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestShardsPartition: the Count shards of a split hold every object once.
func TestShardsPartition(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 3, 6, 7, 64} {
		sels := make([]func(*corev1.Pod) bool, n)
		for i := range n {
			sel, err := informers.Shard{Count: n, Index: []int{i}}.Selector()
			if err != nil {
				t.Fatal(err)
			}
			sels[i] = func(p *corev1.Pod) bool { ok, _ := sel.Matches(p); return ok }
		}
		for range 2000 {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprintf("%x-%x", rng.Uint64(), rng.Uint64()))}}
			in := 0
			for _, m := range sels {
				if m(p) {
					in++
				}
			}
			if in != 1 {
				t.Fatalf("%d shards: %s is in %d", n, p.UID, in)
			}
		}
	}
}

// TestFactory_Shard: with a Shard, each informer holds its shard alone,
// even from a source that sends everything (cachetest ignores
// shardSelector), and the informers of Count factories hold every object
// once; ResourceShards holds a resource whole.
func TestFactory_Shard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		var all []string
		factories := make([]*informers.SharedInformerFactory, n)
		var pods []*corev1.Pod
		for i := range 60 {
			p := newPod("a", fmt.Sprintf("p%02d", i), nil)
			p.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i*7919))
			pods = append(pods, p)
			all = append(all, p.Name)
		}
		f0, src, _ := setup(t, informers.Options{Shard: &informers.Shard{Count: n, Index: []int{0}}})
		for _, p := range pods[:30] {
			src.Create(p)
		}
		factories[0] = f0
		for i := 1; i < n; i++ {
			f, _, ts := setup(t, informers.Options{Shard: &informers.Shard{Count: n, Index: []int{i}}})
			ts.sources[podsGVR] = cache.Erase[*corev1.Pod](src) // one source for all
			factories[i] = f
		}
		infs := make([]*informers.Informer[*corev1.Pod], n)
		for i, f := range factories {
			infs[i] = informers.For[*corev1.Pod](f)
			f.Start(t.Context())
			f.WaitForCacheSync(t.Context())
		}
		for _, p := range pods[30:] { // through the watch
			src.Create(p)
		}
		synctest.Wait()
		var union []string
		for i, inf := range infs {
			sel, _ := informers.Shard{Count: n, Index: []int{i}}.Selector()
			held, _ := inf.Lister().List(labels.Everything())
			if len(held) == 0 || len(held) == len(pods) {
				t.Errorf("shard %d holds %d of %d", i, len(held), len(pods))
			}
			for _, p := range held {
				if ok, _ := sel.Matches(p); !ok {
					t.Errorf("shard %d holds %s, not in it", i, p.Name)
				}
				union = append(union, p.Name)
			}
		}
		slices.Sort(union)
		if !slices.Equal(union, all) {
			t.Errorf("the shards hold %v, want each of %v once", union, all)
		}

		// Held whole by ResourceShards' nil.
		f, src2, _ := setup(t, informers.Options{
			Shard:          &informers.Shard{Count: n, Index: []int{0}},
			ResourceShards: map[schema.GroupVersionResource]*informers.Shard{podsGVR: nil},
		})
		for _, p := range pods {
			src2.Create(p)
		}
		whole := informers.For[*corev1.Pod](f)
		f.Start(t.Context())
		f.WaitForCacheSync(t.Context())
		if held, _ := whole.Lister().List(labels.Everything()); len(held) != len(pods) {
			t.Errorf("unsharded resource holds %d of %d", len(held), len(pods))
		}
	})
}

// TestFactory_ShardInvalid: an invalid Shard fails the informer's lists.
func TestFactory_ShardInvalid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _, _ := setup(t, informers.Options{Shard: &informers.Shard{Count: 4, Index: []int{9}}})
		inf := informers.For[*corev1.Pod](f)
		f.Start(t.Context())
		synctest.Wait()
		if inf.HasSynced() {
			t.Fatal("an informer with an invalid shard synced")
		}
	})
}
