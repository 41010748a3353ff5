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
	// poorPacking: a version packed to more than 1/poorPacking of its
	// size has much the dictionary lacks, and extends it.
	poorPacking = 8
	// maxDictionaries bounds the dictionaries a cache makes, each at
	// most maxDictionary bytes and its table.
	maxDictionaries = 4
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

// extend makes a dictionary of d's bytes followed by b's, up to
// maxDictionary: runs d has are found where d has them, and b's others.
func (d *dictionary) extend(b []byte) *dictionary {
	both := make([]byte, 0, min(len(d.b)+len(b), maxDictionary))
	both = append(both, d.b...)
	return newDictionary(append(both, b[:min(len(b), cap(both)-len(both))]...))
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
	return d.unpackTo(make([]byte, 0, size), packed, size, size)
}

// unpackTo appends the first n of the size bytes pack made packed from to
// dst. It checks packed only as far as it reads: to its end when n is
// size.
func (d *dictionary) unpackTo(dst, packed []byte, size, n int) ([]byte, error) {
	out, end := dst, len(dst)+n
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
			return dst, errCorrupt
		}
		if n < size && len(out)+l >= end {
			return append(out, packed[:end-len(out)]...), nil
		}
		out, packed = append(out, packed[:l]...), packed[l:]
		c, ok := next()
		if !ok {
			return dst, errCorrupt
		}
		if c == 0 {
			if len(packed) != 0 || len(out) != end {
				return dst, errCorrupt
			}
			return out, nil
		}
		off, ok := next()
		if !ok || off+c > len(d.b) {
			return dst, errCorrupt
		}
		if n < size && len(out)+c >= end {
			return append(out, d.b[off:off+end-len(out)]...), nil
		}
		out = append(out, d.b[off:off+c]...)
	}
}

// packedValue is a packed version's bytes.
type packedValue struct {
	dict *dictionary
	ops  []byte
}

// plainVersions is how many of the newest versions a cache keeps plain.
// Lists and watchers read a packed version by unpacking it anew, so the
// versions most read are kept plain: those just written, which every
// watcher that keeps up (within DefaultWatcherBuffer events) writes out,
// and which the next write of the same object reads back. Every older
// version, current or replaced, is packed.
// hack/memory.sh, 10,000 pods created and their status patched once: 8.4
// KB of live heap per pod with the current versions plain (6.9 KB of it
// their bytes), 3.0 KB with them packed too, the packings exactly sized
// and the dictionary extended by the pods with their status.
const plainVersions = 4 * DefaultWatcherBuffer

// hotVersions is a ring of the newest versions a cache took in; its zero
// value is empty and ready.
type hotVersions[T Object] struct {
	ring []*Item[T]
	next int
}

// push adds it as the newest version and returns the oldest one it makes
// leave the ring, if any, to be packed.
func (h *hotVersions[T]) push(it *Item[T]) (out *Item[T]) {
	if len(h.ring) < plainVersions {
		h.ring = append(h.ring, it)
		return nil
	}
	out, h.ring[h.next] = h.ring[h.next], it
	h.next = (h.next + 1) % len(h.ring)
	return out
}
