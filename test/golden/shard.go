package golden

import (
	"fmt"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/sharding"
)

// shardBound is what a shard placeholder stands for: a bound of a
// shardSelector range (0x and 16 hex digits, or 0x10000000000000000) that
// holds one object's uid hash or the case namespace's hash, as kube
// hashes them (sharding.HashField), so that a step can select exactly one
// object or namespace whatever uid the server gave it:
//
//	{{uidhash:S}}     the hash of the uid of the object step S answered with
//	{{uidhashend:S}}  that hash plus one
//	{{nshash}}        the hash of the case's namespace
//	{{nshashend}}     that hash plus one
//
// shardRange(object.metadata.uid, '{{uidhash:S}}', '{{uidhashend:S}}')
// selects S's object alone. The masker learns each value, so that answers
// quoting it (shardInfo, error messages) show the placeholder m instead.
func (r *run) shardBound(m, kind, uid string) string {
	value := r.ns
	if kind == "uidhash" || kind == "uidhashend" {
		value = uid
	}
	h, _ := strconv.ParseUint(sharding.HashField(value), 16, 64)
	var bound string
	switch {
	case kind == "uidhash" || kind == "nshash":
		bound = fmt.Sprintf("0x%016x", h)
	case h == math.MaxUint64:
		bound = "0x10000000000000000"
	default:
		bound = fmt.Sprintf("0x%016x", h+1)
	}
	r.mask.literals[bound] = m
	return bound
}
