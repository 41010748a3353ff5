package jsontree

import (
	"hash/maphash"
	"sync/atomic"
)

// maxInterned is the length of the longest key interned.
const maxInterned = 64

// internSlots is the size of the intern table: a pod has about 60
// distinct keys, and a server's resources a few thousand together.
const internSlots = 1 << 12

// internTable is a fixed-size, lossy table of strings indexed by their
// hash: a lookup finds the string or, on a miss or a collision, allocates
// it and takes the slot. Its memory is bounded (internSlots strings of at
// most maxInterned bytes) and it is safe for concurrent use without locks:
// a reader sees either the old or the new string of a slot, both valid.
var internTable struct {
	seed  maphash.Seed
	slots [internSlots]atomic.Pointer[string]
}

func init() { internTable.seed = maphash.MakeSeed() }

// intern returns b as a string, shared with earlier calls for the same
// bytes while the table holds it.
func intern(b []byte) string {
	slot := &internTable.slots[maphash.Bytes(internTable.seed, b)&(internSlots-1)]
	if p := slot.Load(); p != nil && *p == string(b) {
		return *p
	}
	s := string(b)
	slot.Store(&s)
	return s
}
