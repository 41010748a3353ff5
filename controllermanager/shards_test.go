package controllermanager_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubesharding "k8s.io/apiserver/pkg/sharding"

	"github.com/listwatch/listwatch/controllermanager"
)

func TestShardSelector(t *testing.T) {
	tests := []struct {
		shard, shards int
		want          string
	}{
		{0, 1, "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')"},
		{0, 2, "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"},
		{1, 2, "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"},
		{1, 4, "shardRange(object.metadata.namespace, '0x4000000000000000', '0x8000000000000000')"},
		{1, 3, "shardRange(object.metadata.namespace, '0x5555555555555555', '0xaaaaaaaaaaaaaaaa')"},
	}
	for _, tt := range tests {
		if got := controllermanager.ShardSelector(tt.shard, tt.shards); got != tt.want {
			t.Errorf("ShardSelector(%d, %d) = %s, want %s", tt.shard, tt.shards, got, tt.want)
		}
	}
}

// TestShardSelectorPartition checks, with kube-apiserver's own parser and
// matcher, that the shards of every count from 1 to 12 parse and put
// every namespace in exactly one shard.
func TestShardSelectorPartition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	namespaces := []string{"", "default", "kube-system"}
	for range 500 {
		namespaces = append(namespaces, fmt.Sprintf("ns-%x", rng.Uint64()))
	}
	for shards := 1; shards <= 12; shards++ {
		for _, ns := range namespaces {
			obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}
			in := 0
			for s := range shards {
				sel, err := kubesharding.Parse(controllermanager.ShardSelector(s, shards))
				if err != nil {
					t.Fatalf("shard %d of %d: kube's parser: %v", s, shards, err)
				}
				if ok, err := sel.Matches(obj); err != nil {
					t.Fatal(err)
				} else if ok {
					in++
				}
			}
			if in != 1 {
				t.Fatalf("namespace %q is in %d of %d shards", ns, in, shards)
			}
		}
	}
}
