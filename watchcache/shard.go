package watchcache

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/sharding"
)

// The fields a shard selector may hash, as kube's parser names them.
const (
	shardKeyUID       = "object.metadata.uid"
	shardKeyNamespace = "object.metadata.namespace"
)

// shardHashes are the 64-bit FNV-1a hashes of an object's uid and
// namespace (kube's sharding.HashField), computed once when the cache takes
// a version in, so that a shard selector is evaluated per item without
// decoding it. Both fields are immutable, so every version of an object
// has the same hashes: an object never moves into or out of a shard, and a
// sharded watcher sees its whole life or none of it.
type shardHashes struct {
	uid, namespace uint64
}

// hashes returns the shard hashes of a version with attributes a.
func (a Attributes) hashes() shardHashes {
	return shardHashes{uid: hashField(a.UID), namespace: hashField(a.Namespace)}
}

// hashField is kube's sharding.HashField as a number.
func hashField(v string) uint64 {
	// HashField always returns 16 hex digits.
	h, _ := strconv.ParseUint(sharding.HashField(v), 16, 64)
	return h
}

// shard is a shard selector made ready to match items: the field it
// hashes and its ranges, each [lo, hi] inclusive (kube's ranges are
// [start, end), with end up to 2^64).
type shard struct {
	namespace bool // the namespace's hash, else the uid's
	ranges    [][2]uint64
}

// newShard prepares sel (nil or empty: nil, which selects everything). It
// accepts what kube's parser (k8s.io/apiserver/pkg/sharding) produces:
// ranges over one field, uid or namespace, whose bounds are 0x and 16 hex
// digits, or 0x10000000000000000 (2^64) for an end; on those, an item
// matches exactly when kube's Selector.Matches matches its object.
func newShard(sel sharding.Selector) (*shard, error) {
	if sel == nil || sel.Empty() {
		return nil, nil
	}
	reqs := sel.Requirements()
	s := &shard{ranges: make([][2]uint64, 0, len(reqs))}
	for i, r := range reqs {
		if r.Key != reqs[0].Key {
			return nil, fmt.Errorf("inconsistent shard keys: %q vs %q", reqs[0].Key, r.Key)
		}
		switch r.Key {
		case shardKeyUID:
		case shardKeyNamespace:
			s.namespace = true
		default:
			return nil, fmt.Errorf("unsupported shard field path: %q", r.Key)
		}
		lo, loTop, err := shardBound(r.Start)
		if err != nil {
			return nil, fmt.Errorf("shard range %d start: %w", i, err)
		}
		hi, hiTop, err := shardBound(r.End)
		if err != nil {
			return nil, fmt.Errorf("shard range %d end: %w", i, err)
		}
		switch {
		case loTop || (!hiTop && hi <= lo):
			continue // empty: no hash is at least 2^64, or at least lo and below hi
		case hiTop:
			s.ranges = append(s.ranges, [2]uint64{lo, math.MaxUint64})
		default:
			s.ranges = append(s.ranges, [2]uint64{lo, hi - 1})
		}
	}
	return s, nil
}

// top is 2^64, the exclusive end of the whole hash space.
const top = "0x10000000000000000"

// shardBound parses a range bound: 0x and 16 hex digits, or top (2^64,
// which no uint64 holds: isTop).
func shardBound(s string) (v uint64, isTop bool, err error) {
	if s == top {
		return 0, true, nil
	}
	if len(s) != 18 || s[:2] != "0x" || strings.Trim(s[2:], "0123456789abcdef") != "" {
		return 0, false, fmt.Errorf("%q is not 0x and 16 lowercase hex digits", s)
	}
	if v, err = strconv.ParseUint(s[2:], 16, 64); err != nil {
		return 0, false, fmt.Errorf("%q: %w", s, err)
	}
	return v, false, nil
}

// matches reports whether an item with hashes h is in the shard.
func (s *shard) matches(h shardHashes) bool {
	v := h.uid
	if s.namespace {
		v = h.namespace
	}
	for _, r := range s.ranges {
		if r[0] <= v && v <= r[1] {
			return true
		}
	}
	return false
}
