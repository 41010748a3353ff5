package informers

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/sharding"
)

// ShardKey is the object field whose hash places an object in a shard.
type ShardKey int

const (
	// ShardByUID places each object by its uid: objects spread evenly,
	// but the objects of one namespace (a controller's and its pods) are
	// in different shards.
	ShardByUID ShardKey = iota
	// ShardByNamespace places each object by its namespace: a namespace's
	// objects are in one shard, which needs many namespaces to spread
	// (cluster-scoped objects, namespace "", are all in one).
	ShardByNamespace
)

// Shard is the part of a resource's objects an informer holds, for work
// split over replicas (Kubernetes' sharded list and watch, KEP-5866): the
// 64-bit FNV-1a hash space of the Key field is cut into Count equal
// ranges, and the informer lists and watches the ranges in Index alone.
// The server sends only those (kube-apiserver v1.36+ with its
// ShardedListAndWatch feature gate on, or listwatch's), so each informer
// decodes and caches about len(Index)/Count of the objects; a server that
// ignores the request sends all, and the informer keeps its shard anyway
// (cache.ReflectorOptions.Shard). An object's uid and namespace never
// change, so it stays in one shard for all its life.
type Shard struct {
	Key   ShardKey
	Count int
	Index []int
}

// shardKeys are the field paths the API names the keys by.
var shardKeys = map[ShardKey]string{
	ShardByUID:       "object.metadata.uid",
	ShardByNamespace: "object.metadata.namespace",
}

// Selector returns the shard's selector: one range per index, in index
// order, as the server's parser reads them (bounds of 0x and 16 hex
// digits, the last end 0x10000000000000000, 2^64); its String is the
// shardSelector parameter. Ranges of adjacent indexes are not merged.
func (s Shard) Selector() (sharding.Selector, error) {
	key, ok := shardKeys[s.Key]
	if !ok {
		return nil, fmt.Errorf("informers: unknown ShardKey %d", s.Key)
	}
	if s.Count < 1 {
		return nil, fmt.Errorf("informers: shard Count %d: want at least 1", s.Count)
	}
	if len(s.Index) == 0 {
		return nil, errors.New("informers: a Shard holds no index")
	}
	idx := slices.Sorted(slices.Values(s.Index))
	reqs := make([]sharding.ShardRangeRequirement, 0, len(idx))
	for i, n := range idx {
		if n < 0 || n >= s.Count {
			return nil, fmt.Errorf("informers: shard index %d: want 0 to %d", n, s.Count-1)
		}
		if i > 0 && idx[i-1] == n {
			return nil, fmt.Errorf("informers: shard index %d given twice", n)
		}
		reqs = append(reqs, sharding.ShardRangeRequirement{Key: key, Start: shardBound(n, s.Count), End: shardBound(n+1, s.Count)})
	}
	return sharding.NewSelector(reqs...), nil
}

// shardBound is the start of range i of n, i·2^64/n rounded down, as the
// API writes it; i = n is 2^64.
func shardBound(i, n int) string {
	if i == n {
		return "0x10000000000000000"
	}
	// i·2^64 is (hi: i, lo: 0) in 128 bits; i < n, so the quotient fits.
	q, _ := bits.Div64(uint64(i), 0, uint64(n))
	return fmt.Sprintf("0x%016x", q)
}

// shardFor returns the selector of the informers of gvr (nil: the whole
// resource): ResourceShards' entry when there is one, else Shard.
func (o *Options) shardFor(gvr schema.GroupVersionResource) (sharding.Selector, error) {
	sh := o.Shard
	if s, ok := o.ResourceShards[gvr]; ok {
		sh = s
	}
	if sh == nil {
		return nil, nil
	}
	return sh.Selector()
}
