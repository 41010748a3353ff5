package watchcache

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	kubesharding "k8s.io/apiserver/pkg/sharding"
)

// hexBound is a range bound as kube's parser accepts it.
func hexBound(v uint64) string { return fmt.Sprintf("0x%016x", v) }

// randShard is a random selector as kube's parser produces them: one to
// three ranges over one field, bounds anywhere (near the object's hash
// half the time, so that both sides of each bound are tried), the end
// 2^64 at times.
func randShard(rng *rand.Rand, near uint64) sharding.Selector {
	key := shardKeyUID
	if rng.IntN(2) == 0 {
		key = shardKeyNamespace
	}
	bound := func() uint64 {
		if rng.IntN(2) == 0 {
			return near + uint64(rng.IntN(5)) - 2
		}
		return rng.Uint64()
	}
	reqs := make([]sharding.ShardRangeRequirement, 1+rng.IntN(3))
	for i := range reqs {
		lo, hi := bound(), bound()
		if lo > hi {
			lo, hi = hi, lo
		}
		end := hexBound(hi)
		if rng.IntN(4) == 0 {
			end = top
		}
		reqs[i] = sharding.ShardRangeRequirement{Key: key, Start: hexBound(lo), End: end}
	}
	return sharding.NewSelector(reqs...)
}

// TestShardMatchesKube: on random objects and random selectors, an item
// is in a shard exactly when kube's Selector.Matches says its object is.
func TestShardMatchesKube(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			UID:       types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", rng.Uint32(), rng.Uint64()&(1<<48-1))),
			Namespace: fmt.Sprint("ns-", rng.IntN(50)),
		}}
		if i%10 == 0 {
			pod.Namespace = "" // cluster-scoped
		}
		h := Attributes{UID: string(pod.UID), Namespace: pod.Namespace}.hashes()
		near := h.uid
		if rng.IntN(2) == 0 {
			near = h.namespace
		}
		sel := randShard(rng, near)
		sh, err := newShard(sel)
		if err != nil {
			t.Fatalf("newShard(%s): %v", sel, err)
		}
		want, err := sel.Matches(pod)
		if err != nil {
			t.Fatal(err)
		}
		if got := sh.matches(h); got != want {
			t.Fatalf("%s on uid %s namespace %q: got %v, kube says %v", sel, pod.UID, pod.Namespace, got, want)
		}
	}
}

// TestShardFromKubeParser: selectors parsed by kube-apiserver's own parser
// are accepted, and the shards of an even split cover every object once.
func TestShardFromKubeParser(t *testing.T) {
	quarters := []string{
		"shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')",
		"shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')",
		"shardRange(object.metadata.uid, '0x8000000000000000', '0xc000000000000000')",
		"shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')",
	}
	var shards []*shard
	for _, q := range quarters {
		sel, err := kubesharding.Parse(q)
		if err != nil {
			t.Fatal(err)
		}
		sh, err := newShard(sel)
		if err != nil {
			t.Fatalf("newShard(%s): %v", q, err)
		}
		shards = append(shards, sh)
	}
	counts := make([]int, len(shards))
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 4000 {
		// Random, as the uids a server makes are (FNV-1a's top bits
		// spread sequential strings such as uid-1, uid-2 … unevenly).
		h := shardHashes{uid: hashField(fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()))}
		n := 0
		for j, sh := range shards {
			if sh.matches(h) {
				n++
				counts[j]++
			}
		}
		if n != 1 {
			t.Fatalf("object %d is in %d shards", i, n)
		}
	}
	for j, n := range counts {
		if n < 800 || n > 1200 {
			t.Errorf("shard %d holds %d of 4000", j, n)
		}
	}
}

func TestNewShardRejects(t *testing.T) {
	for _, reqs := range [][]sharding.ShardRangeRequirement{
		{{Key: "object.metadata.name", Start: hexBound(0), End: top}},
		{{Key: shardKeyUID, Start: hexBound(0), End: hexBound(1)}, {Key: shardKeyNamespace, Start: hexBound(0), End: top}},
		{{Key: shardKeyUID, Start: "0x0", End: top}},
		{{Key: shardKeyUID, Start: "0x000000000000000A", End: top}},
	} {
		if _, err := newShard(sharding.NewSelector(reqs...)); err == nil {
			t.Errorf("newShard(%v) accepted", reqs)
		}
	}
	if sh, err := newShard(sharding.Everything()); sh != nil || err != nil {
		t.Errorf("newShard(Everything) = %v, %v; want nil, nil", sh, err)
	}
}
