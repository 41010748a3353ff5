package watchcache

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// A version the cache keeps only for its window (replaced, read again
// only by watches that replay the window and lists at older revisions) is
// packed against a dictionary: the bytes of the first version the cache
// packed. A resource's objects share most of their bytes (field names,
// defaults, managedFields, an owner's template), so a packed version is a
// few runs copied from the dictionary and the literals between them.
// hack/memory.sh, 10,000 pods created and their status patched once: the
// default window holds the 10,000 patches and so every pod's created
// version beside its current one; the kept bytes were 109.6 MB of the
// server's 160 MB live heap plain, 60.4 MB plus 7.0 MB packed (13.1 KB
// of live heap per pod before, 8.0-8.4 KB after, with the attributes'
// cut).
// BenchmarkPack: a pod of 1,277 bytes packs into 73 against another pod,
// in 13 µs on a loaded machine; compress/flate made 2.0 KB of a 6.0 KB
// pod without a dictionary at its fastest level (which ignores one) and
// costs more to reset than to compress values this small.

// dictionary is what versions are packed against: immutable once made.
type dictionary struct {
	b []byte
	// table maps the hash of minMatch bytes to where they start in b,
	// plus one (0: none).
	table []int32
}

const (
	// minMatch is the shortest run copied from the dictionary.
	minMatch = 8
	// tableBits sizes the dictionary's table.
	tableBits = 13
	// maxDictionary bounds the dictionary's bytes.
	maxDictionary = 32 << 10
	// minPacked is the smallest version worth packing.
	minPacked = 128
)

// newDictionary makes a dictionary of a copy of b (its first
// maxDictionary bytes).
func newDictionary(b []byte) *dictionary {
	d := &dictionary{b: bytes.Clone(b[:min(len(b), maxDictionary)]), table: make([]int32, 1<<tableBits)}
	// The first place of each hash: runs from it go on the longest.
	for p := 0; p+minMatch <= len(d.b); p++ {
		if h := hash8(d.b[p:]); d.table[h] == 0 {
			d.table[h] = int32(p) + 1
		}
	}
	return d
}

// hash8 hashes the first minMatch bytes of b into the table's range.
func hash8(b []byte) uint32 {
	return uint32((binary.LittleEndian.Uint64(b) * 0x9E3779B97F4A7C15) >> (64 - tableBits))
}

// pack returns src as a sequence of operations, each a run of literal
// bytes (its length as a uvarint, then the bytes) then a copy from the
// dictionary (its length as a uvarint, then, when it is not 0, its offset
// as a uvarint); a copy of length 0 ends the sequence.
func (d *dictionary) pack(src []byte) []byte {
	out := make([]byte, 0, len(src)/8)
	lit := 0 // where the pending literals start
	for i := 0; i+minMatch <= len(src); {
		p := int(d.table[hash8(src[i:])]) - 1
		if p < 0 || !bytes.Equal(d.b[p:p+minMatch], src[i:i+minMatch]) {
			i++
			continue
		}
		// The run may start before i, among the pending literals, and
		// goes on as far as the bytes agree.
		s, o := i, p
		for s > lit && o > 0 && src[s-1] == d.b[o-1] {
			s--
			o--
		}
		e, q := i+minMatch, p+minMatch
		for e < len(src) && q < len(d.b) && src[e] == d.b[q] {
			e++
			q++
		}
		out = appendOp(out, src[lit:s], o, e-s)
		i, lit = e, e
	}
	return appendOp(out, src[lit:], 0, 0)
}

func appendOp(out, literals []byte, off, n int) []byte {
	out = binary.AppendUvarint(out, uint64(len(literals)))
	out = append(out, literals...)
	out = binary.AppendUvarint(out, uint64(n))
	if n > 0 {
		out = binary.AppendUvarint(out, uint64(off))
	}
	return out
}

var errCorrupt = errors.New("watchcache: corrupt packed version")

// unpack returns the size bytes pack made packed from.
func (d *dictionary) unpack(packed []byte, size int) ([]byte, error) {
	out := make([]byte, 0, size)
	next := func() (int, bool) {
		v, k := binary.Uvarint(packed)
		if k <= 0 || v > uint64(len(d.b)+len(packed)) {
			return 0, false
		}
		packed = packed[k:]
		return int(v), true
	}
	for {
		l, ok := next()
		if !ok || l > len(packed) {
			return nil, errCorrupt
		}
		out, packed = append(out, packed[:l]...), packed[l:]
		n, ok := next()
		if !ok {
			return nil, errCorrupt
		}
		if n == 0 {
			if len(packed) != 0 || len(out) != size {
				return nil, errCorrupt
			}
			return out, nil
		}
		off, ok := next()
		if !ok || off+n > len(d.b) {
			return nil, errCorrupt
		}
		out = append(out, d.b[off:off+n]...)
	}
}

// packedValue is a packed version's bytes.
type packedValue struct {
	dict *dictionary
	ops  []byte
}
