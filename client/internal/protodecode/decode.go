// Package protodecode decodes the protobuf encoding of the Kubernetes API
// types into their Go structs, with the result of the types' generated
// Unmarshal methods and about a quarter of their allocations.
//
// For each Go type it builds, once, a plan from the struct tags that maps
// field numbers to offsets, and it writes the fields through those
// offsets. A decoded value's strings and byte slices all point into one
// block, a copy of the input (less the managed fields, when they are
// skipped), instead of being allocated one by one; the block also holds
// the scalars the value points to (*int32, *bool). Repeated fields and
// maps are allocated at once for the values written one after another, as
// the generated code writes them. The types whose Go shape the tags do not
// describe, or whose Unmarshal method is not generated (resource.Quantity,
// metav1.Time, metav1.MicroTime, runtime.RawExtension), are decoded by
// their own Unmarshal method.
//
// The result equals the generated code's for every input that code
// accepts, with these differences, all on malformed input: a map entry
// whose key or value runs past the end of the entry, a packed value that
// runs past the end of its run, or a map key or value of the wrong wire
// type is an error here (the generated code reads on, or misreads it), and
// so is nesting deeper than maxDepth in a recursive type. Unknown fields,
// groups included, are skipped as the generated code skips them. Merging
// into a byte slice replaces it rather than reusing its storage.
package protodecode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"reflect"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Decoder decodes protobuf messages into Go values. The zero value is
// ready to use; a Decoder is not safe for concurrent use, and keeps
// nothing that decoded values share between calls.
type Decoder struct {
	// SkipManagedFields leaves the managed fields (field 17 of every
	// metav1.ObjectMeta, templates' included) undecoded and out of the
	// decoded value's memory, for consumers that drop them anyway.
	SkipManagedFields bool

	// Memo, when set, shares the fields of its type between the values
	// decoded (see Memo).
	Memo *Memo

	// OwnStrings allocates each string and byte slice on its own, as the
	// generated code does, instead of in one block per value: for values
	// whose strings are replaced by shared copies after decoding, which
	// would leave the block held by the few strings not replaced.
	OwnStrings bool

	// The codec of the type decoded last, which saves a lookup in the
	// shared cache when a Decoder decodes one type over and over.
	lastType  reflect.Type
	lastCodec *codec
	// words is what is left of the block of words that scalars behind
	// pointers take with OwnStrings, for the values decoded next.
	words []uint64
}

// Unmarshal decodes the protobuf message b into v, a non-nil pointer.
func Unmarshal(b []byte, v any) error {
	var d Decoder
	return d.Unmarshal(b, v)
}

// Unmarshal decodes the protobuf message b into v, a non-nil pointer to a
// struct (or to a type with an Unmarshal method), merging into it as the
// generated Unmarshal does: scalars and strings are overwritten, messages
// merged, repeated fields and maps appended to. The strings and byte
// slices decoded by one call share one block of memory, which stays
// allocated while any of them is referenced.
func (d *Decoder) Unmarshal(b []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return fmt.Errorf("protodecode: Unmarshal into %T, not a pointer", v)
	}
	p := (*eface)(unsafe.Pointer(&v)).data
	if p == nil {
		return fmt.Errorf("protodecode: Unmarshal into a nil %T", v)
	}
	et := t.Elem()
	c := d.lastCodec
	if d.lastType != et {
		var err error
		if c, err = codecOf(et); err != nil {
			return err
		}
		d.lastType, d.lastCodec = et, c
	}
	if c.plan == nil {
		return c.unmarshalAt(p, b)
	}
	s := state{skipManaged: d.SkipManagedFields, input: b, memo: d.Memo, own: d.OwnStrings}
	if s.own {
		s.words = d.words
		defer func() { d.words = s.words }()
	} else if s.skipManaged && c.plan.meta != 0 {
		s.gapStart, s.gapEnd = managedFields(b, c.plan.meta)
	}
	return s.message(c.plan, p, b)
}

// eface is the layout of an empty interface value.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

// sliceHeader is the layout of a slice.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// state is the state of one Unmarshal call.
type state struct {
	// input is the message decoded, which every b decoded is part of.
	input []byte
	// arena is a copy of the input, less the bytes from gapStart to
	// gapEnd (the managed fields skipped), which the strings and byte
	// slices decoded point into, followed by room for the scalars decoded
	// behind pointers, from lo up to its end. It is allocated when first
	// needed.
	arena            []byte
	gapStart, gapEnd int
	lo               int
	depth            int
	// words holds the scalars behind pointers that do not fit the arena.
	words       []uint64
	skipManaged bool
	memo        *Memo
	// own allocates strings and byte slices one by one, and has no
	// arena (Decoder.OwnStrings).
	own bool
}

// str returns b, part of the input, as a string in the arena.
func (s *state) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s.own {
		return string(b)
	}
	return unsafe.String(s.at(b), len(b))
}

// bytes returns b, part of the input, as bytes in the arena, never nil,
// with no capacity to append into the bytes after them.
func (s *state) bytes(b []byte) []byte {
	if len(b) == 0 {
		return []byte{}
	}
	if s.own {
		return append([]byte(nil), b...)
	}
	return unsafe.Slice(s.at(b), len(b))
}

// at returns where the first byte of b, non-empty, is in the arena.
func (s *state) at(b []byte) *byte {
	if s.arena == nil {
		s.newArena()
	}
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(s.input)))
	if off+uintptr(len(b)) > uintptr(len(s.input)) || s.gapStart != s.gapEnd && off+uintptr(len(b)) > uintptr(s.gapStart) && off < uintptr(s.gapEnd) {
		// Not in the arena: cannot happen.
		return unsafe.SliceData(bytes.Clone(b))
	}
	if off >= uintptr(s.gapEnd) {
		off -= uintptr(s.gapEnd - s.gapStart)
	}
	return &s.arena[off]
}

// newArena allocates the arena and copies the input into it. The room for
// words is a sixteenth of the input, enough for all but inputs made mostly
// of pointed-to scalars.
func (s *state) newArena() {
	n := len(s.input) - (s.gapEnd - s.gapStart)
	s.lo = (n + 7) &^ 7
	s.arena = make([]byte, s.lo+min(max(n/16, 64), 1024)&^7)
	copy(s.arena, s.input[:s.gapStart])
	copy(s.arena[s.gapStart:], s.input[s.gapEnd:])
}

// wordsBlock is the number of words allocated together when the arena has
// no room for them.
const wordsBlock = 16

// word returns a zeroed word of its own for a scalar behind a pointer.
func (s *state) word() unsafe.Pointer {
	if s.arena == nil && !s.own {
		s.newArena()
	}
	// The arena is 8-aligned (its size class is a multiple of 8), and so
	// is lo.
	if s.lo+8 <= len(s.arena) {
		p := unsafe.Pointer(&s.arena[s.lo])
		s.lo += 8
		return p
	}
	if len(s.words) == 0 {
		s.words = make([]uint64, wordsBlock)
	}
	p := unsafe.Pointer(&s.words[0])
	s.words = s.words[1:]
	return p
}

// managedFields returns the bounds of the managed fields in the metadata
// (field meta) of the message b, which the arena leaves out when they are
// skipped: 0, 0 unless they are one run of fields, as the generated code
// writes them.
func managedFields(b []byte, meta int32) (start, end int) {
	for i := 0; i < len(b); {
		tag, j, err := varint(b, i)
		if err != nil {
			return 0, 0
		}
		if int32(tag>>3) != meta || tag&7 != wireBytes {
			if i, err = skipField(b, i); err != nil {
				return 0, 0
			}
			continue
		}
		ms, me, err := length(b, j)
		if err != nil {
			return 0, 0
		}
		m := b[:me]
		for k := ms; k < me; {
			tag, _, err := varint(m, k)
			if err != nil {
				return 0, 0
			}
			next, err := skipField(m, k)
			if err != nil {
				return 0, 0
			}
			if tag>>3 == 17 {
				if start != end && k != end {
					return 0, 0 // a second run
				}
				if start == end {
					start = k
				}
				end = next
			}
			k = next
		}
		i = me
	}
	return start, end
}

// wrongWire is the generated code's error for a field of the wrong wire
// type.
func wrongWire(f *field, wt uint8) error {
	return fmt.Errorf("proto: wrong wireType = %d for field %s", wt, f.name)
}

// sub decodes b, the message of slot sl, into p: through the memo when it
// is of the memo's type, through the slot's plan when it has one, else
// through the type's own Unmarshal.
func (s *state) sub(sl *slot, p unsafe.Pointer, b []byte) error {
	if s.memo != nil && sl.f.msg == s.memo.c {
		return s.memo.decode(s, p, b)
	}
	if sl.sub != nil {
		return s.message(sl.sub, p, b)
	}
	return sl.f.msg.unmarshal(p, b)
}

// message decodes the message b into the struct at base, by plan pl.
func (s *state) message(pl *plan, base unsafe.Pointer, b []byte) error {
	if s.depth++; s.depth > maxDepth {
		return ErrTooDeep
	}
	// seen has a bit for each repeated field met in this message.
	var seen uint64
	for i := 0; i < len(b); {
		start := i
		var tag uint64
		if c := b[i]; c < 0x80 {
			tag, i = uint64(c), i+1
		} else if i+1 < len(b) && b[i+1] < 0x80 {
			tag, i = uint64(c&0x7F)|uint64(b[i+1])<<7, i+2
		} else {
			var err error
			if tag, i, err = varint(b, i); err != nil {
				return err
			}
		}
		var sl *slot
		if tag < uint64(len(pl.byTag)) {
			if k := pl.byTag[tag]; k != 0 {
				sl = &pl.hot[k-1]
			}
		}
		if sl == nil {
			// Any other tag: checked and decoded in full.
			var err error
			if i, err = s.other(pl, base, b, start, i, tag, &seen); err != nil {
				return err
			}
			continue
		}
		wt := uint8(tag & 7)
		p := unsafe.Add(base, sl.offset)

		// The common cases here, the rest in slow.
		switch sl.op {
		case opString:
			var end int
			if i < len(b) && b[i] < 0x80 {
				i, end = i+1, i+1+int(b[i])
				if end > len(b) {
					return io.ErrUnexpectedEOF
				}
			} else {
				var err error
				if i, end, err = length(b, i); err != nil {
					return err
				}
			}
			*(*string)(p) = s.str(b[i:end])
			i = end
		case opScalar:
			if sl.enc == encVarint && i < len(b) && b[i] < 0x80 {
				store(p, sl.size, uint64(b[i]))
				i++
				continue
			}
			v, j, err := scalar(sl.enc, b, i)
			if err != nil {
				return err
			}
			store(p, sl.size, v)
			i = j
		case opMessage:
			vs, end, err := length(b, i)
			if err != nil {
				return err
			}
			if err := s.sub(sl, p, b[vs:end]); err != nil {
				return err
			}
			i = end
		case opMessageSlice:
			vs, end, err := length(b, i)
			if err != nil {
				return err
			}
			e := s.appendTo(pl, base, sl, b, start, &seen)
			if err := s.sub(sl, e, b[vs:end]); err != nil {
				return err
			}
			i = end
		case opMessagePtr:
			vs, end, err := length(b, i)
			if err != nil {
				return err
			}
			pp := (*unsafe.Pointer)(p)
			if *pp == nil {
				*pp = reflect.New(sl.f.elem).UnsafePointer()
			}
			if err := s.sub(sl, *pp, b[vs:end]); err != nil {
				return err
			}
			i = end
		case opScalarPtr:
			v, j, err := scalar(sl.enc, b, i)
			if err != nil {
				return err
			}
			w := s.word()
			store(w, sl.size, v)
			*(*unsafe.Pointer)(p) = w
			i = j
		default:
			var err error
			if i, err = s.slow(pl, base, sl, b, i, start, wt, &seen); err != nil {
				return err
			}
		}
	}
	s.depth--
	return nil
}

// other decodes the field whose tag, at b[start:i], is not in the tag
// table of pl: it checks the tag, skips an unknown or skipped field, and
// decodes a known one, into the struct at base, returning the index after
// the field.
func (s *state) other(pl *plan, base unsafe.Pointer, b []byte, start, i int, tag uint64, seen *uint64) (int, error) {
	num := int32(tag >> 3)
	wt := uint8(tag & 7)
	if wt == wireEnd || num <= 0 {
		return 0, badTag(pl, num, tag)
	}
	sl := pl.lookup(num)
	if sl.op == 0 || sl.skipMF && s.skipManaged {
		return skipField(b, start)
	}
	switch sl.op {
	case opScalarSlice:
		if wt != wireBytes && wt != sl.wire {
			return 0, wrongWire(sl.f, wt)
		}
	case opMessage:
		if wt != wireBytes {
			return 0, wrongWire(sl.f, wt)
		}
		vs, end, err := length(b, i)
		if err != nil {
			return 0, err
		}
		return end, s.decode(sl.f.msg, unsafe.Add(base, sl.offset), b[vs:end])
	case opMessageSlice:
		if wt != wireBytes {
			return 0, wrongWire(sl.f, wt)
		}
		vs, end, err := length(b, i)
		if err != nil {
			return 0, err
		}
		return end, s.decode(sl.f.msg, s.appendTo(pl, base, sl, b, start, seen), b[vs:end])
	default:
		if wt != sl.wire {
			return 0, wrongWire(sl.f, wt)
		}
	}
	return s.slow(pl, base, sl, b, i, start, wt, seen)
}

// badTag is the generated code's error for a tag that is not a field.
func badTag(pl *plan, num int32, tag uint64) error {
	if tag&7 == wireEnd {
		return fmt.Errorf("proto: %s: wiretype end group for non-group", pl.name)
	}
	return fmt.Errorf("proto: %s: illegal tag %d (wire type %d)", pl.name, num, tag)
}

// appendTo appends a zero element to the slice of the repeated field of
// slot sl in the struct at base, of plan pl, and returns it. seen has a bit
// for each repeated field met in the message b, this value's tag at
// b[start:]. When the slice is full it makes room for the values of the
// field that follow one another from here, as the generated code writes
// them: one allocation for all of them.
func (s *state) appendTo(pl *plan, base unsafe.Pointer, sl *slot, b []byte, start int, seen *uint64) unsafe.Pointer {
	f := sl.f
	h := (*sliceHeader)(unsafe.Add(base, sl.offset))
	stale := false
	if f.op == opMessageSlice {
		// A message is decoded into its element, which must be zero;
		// the capacity past the length of a slice decoded into may hold
		// stale values, where this package leaves only zeros.
		if sl.rep == noRep {
			stale = true
		} else if *seen&(1<<sl.rep) == 0 {
			*seen |= 1 << sl.rep
			clearSpare(f, h)
		}
	}
	if h.len == h.cap {
		grow(pl, base, f, run(b, start))
	}
	e := unsafe.Add(h.data, uintptr(h.len)*f.esize)
	h.len++
	if stale {
		reflect.NewAt(f.elem, e).Elem().SetZero()
	}
	return e
}

// clearSpare zeroes the elements of the slice h of field f past its
// length.
func clearSpare(f *field, h *sliceHeader) {
	for k := h.len; k < h.cap; k++ {
		reflect.NewAt(f.elem, unsafe.Add(h.data, uintptr(k)*f.esize)).Elem().SetZero()
	}
}

// run counts the fields at b[start:] with the tag of the first, up to the
// first other field or malformed value: at least 1.
func run(b []byte, start int) int {
	end, err := skipVarint(b, start)
	if err != nil {
		return 1
	}
	tag := b[start:end]
	wt := tag[0] & 7
	n := 0
	for i := start; i+len(tag) <= len(b) && string(b[i:i+len(tag)]) == string(tag); n++ {
		i += len(tag)
		switch wt {
		case wireBytes:
			_, e, err := length(b, i)
			if err != nil {
				return max(n, 1)
			}
			i = e
		case wireVarint:
			if i, err = skipVarint(b, i); err != nil {
				return max(n, 1)
			}
		case wireFixed64:
			i += 8
		case wireFixed32:
			i += 4
		default:
			return max(n, 1)
		}
	}
	return max(n, 1)
}

// slow decodes the value at b[i:], of wire type wt, of the field of slot
// sl, whose tag is at b[start:], into the struct at base, of plan pl, for
// the fields message does not decode itself. It returns the index after
// the value.
func (s *state) slow(pl *plan, base unsafe.Pointer, sl *slot, b []byte, i, start int, wt uint8, seen *uint64) (int, error) {
	f := sl.f
	p := unsafe.Add(base, sl.offset)
	switch f.op {
	case opStringSlice, opBytesSlice, opMessagePtrSlice:
		if wt != wireBytes {
			return 0, wrongWire(f, wt)
		}
		vs, end, err := length(b, i)
		if err != nil {
			return 0, err
		}
		v := b[vs:end]
		e := s.appendTo(pl, base, sl, b, start, seen)
		switch f.op {
		case opStringSlice:
			*(*string)(e) = s.str(v)
		case opBytesSlice:
			*(*[]byte)(e) = s.bytes(v)
		case opMessagePtrSlice:
			m := reflect.New(f.msg.typ).UnsafePointer()
			*(*unsafe.Pointer)(e) = m
			err = s.decode(f.msg, m, v)
		}
		return end, err
	case opScalarSlice:
		if wt != wireBytes && wt != f.wire {
			return 0, wrongWire(f, wt)
		}
		if wt != wireBytes {
			v, j, err := scalar(f.enc, b, i)
			if err != nil {
				return 0, err
			}
			store(s.appendTo(pl, base, sl, b, start, seen), f.size, v)
			return j, nil
		}
		vs, end, err := length(b, i)
		if err != nil {
			return 0, err
		}
		h := (*sliceHeader)(p)
		if n := packedCount(b[vs:end], f.enc.width()); h.cap-h.len < n {
			grow(pl, base, f, n)
		}
		packed := b[:end]
		for j := vs; j < end; {
			var v uint64
			if v, j, err = scalar(f.enc, packed, j); err != nil {
				return 0, err
			}
			store(next(pl, base, f), f.size, v)
		}
		return end, nil
	case opMap:
		if wt != wireBytes {
			return 0, wrongWire(f, wt)
		}
		n := 0
		if *(*unsafe.Pointer)(p) == nil {
			// Bounded: entries may repeat a key.
			n = min(run(b, start), maxMapHint)
		}
		return s.mapEntry(f, p, b, i, n)
	}
	return s.value(f, p, b, i, wt)
}

// maxMapHint bounds the size a map is made for: a map holds the last of
// the entries with a key, and the input may repeat keys.
const maxMapHint = 1024

// value decodes the single value of f at b[i:], of wire type wt, into p,
// and returns the index after it.
func (s *state) value(f *field, p unsafe.Pointer, b []byte, i int, wt uint8) (int, error) {
	if wt != f.wire {
		return 0, wrongWire(f, wt)
	}
	switch f.op {
	case opString:
		start, end, err := length(b, i)
		if err != nil {
			return 0, err
		}
		*(*string)(p) = s.str(b[start:end])
		return end, nil
	case opStringPtr:
		start, end, err := length(b, i)
		if err != nil {
			return 0, err
		}
		sp := new(string)
		*sp = s.str(b[start:end])
		*(*unsafe.Pointer)(p) = unsafe.Pointer(sp)
		return end, nil
	case opBytes:
		start, end, err := length(b, i)
		if err != nil {
			return 0, err
		}
		*(*[]byte)(p) = s.bytes(b[start:end])
		return end, nil
	case opScalar:
		v, j, err := scalar(f.enc, b, i)
		if err != nil {
			return 0, err
		}
		store(p, f.size, v)
		return j, nil
	case opScalarPtr:
		v, j, err := scalar(f.enc, b, i)
		if err != nil {
			return 0, err
		}
		w := s.word()
		store(w, f.size, v)
		*(*unsafe.Pointer)(p) = w
		return j, nil
	case opMessage:
		start, end, err := length(b, i)
		if err != nil {
			return 0, err
		}
		return end, s.decode(f.msg, p, b[start:end])
	case opMessagePtr:
		start, end, err := length(b, i)
		if err != nil {
			return 0, err
		}
		pp := (*unsafe.Pointer)(p)
		if *pp == nil {
			*pp = reflect.New(f.elem).UnsafePointer()
		}
		return end, s.decode(f.msg, *pp, b[start:end])
	}
	return 0, fmt.Errorf("protodecode: field %s: unexpected op %d", f.name, f.op)
}

// decode decodes the message b into the value at p with codec c.
func (s *state) decode(c *codec, p unsafe.Pointer, b []byte) error {
	if c.plan != nil {
		return s.message(c.plan, p, b)
	}
	return c.unmarshal(p, b)
}

// scalar reads the scalar of encoding e at b[i:] and returns its bits.
func scalar(e enc, b []byte, i int) (uint64, int, error) {
	var v uint64
	switch e {
	case encFixed64:
		if i+8 > len(b) {
			return 0, 0, io.ErrUnexpectedEOF
		}
		return binary.LittleEndian.Uint64(b[i:]), i + 8, nil
	case encFixed32:
		if i+4 > len(b) {
			return 0, 0, io.ErrUnexpectedEOF
		}
		return uint64(binary.LittleEndian.Uint32(b[i:])), i + 4, nil
	}
	if i < len(b) && b[i] < 0x80 {
		v, i = uint64(b[i]), i+1
	} else {
		var err error
		if v, i, err = varint(b, i); err != nil {
			return 0, 0, err
		}
	}
	switch e {
	case encBool:
		if v != 0 {
			v = 1
		}
	case encZigzag32:
		u := uint32(v)
		v = uint64(int64(int32(u>>1) ^ -int32(u&1)))
	case encZigzag64:
		v = uint64(int64(v>>1) ^ -int64(v&1))
	}
	return v, i, nil
}

// store writes the low size bytes of v at p.
func store(p unsafe.Pointer, size uint8, v uint64) {
	switch size {
	case 1:
		*(*uint8)(p) = uint8(v)
	case 2:
		*(*uint16)(p) = uint16(v)
	case 4:
		*(*uint32)(p) = uint32(v)
	default:
		*(*uint64)(p) = v
	}
}

// grow makes room for n more values in the slice of field f of the struct
// at base, of plan pl. The room past the old capacity is zero.
func grow(pl *plan, base unsafe.Pointer, f *field, n int) {
	// Through the struct: reflecting on the slice itself would look up
	// its pointer type in a shared map.
	reflect.NewAt(pl.typ, base).Elem().Field(f.index).Grow(n)
}

// next appends an element to the slice of field f of the struct at base,
// of plan pl, and returns it, for a scalar to be stored in.
func next(pl *plan, base unsafe.Pointer, f *field) unsafe.Pointer {
	h := (*sliceHeader)(unsafe.Add(base, f.offset))
	if h.len == h.cap {
		grow(pl, base, f, 1)
	}
	e := unsafe.Add(h.data, uintptr(h.len)*f.esize)
	h.len++
	return e
}

// mapEntry decodes the map entry at b[i:] into the map of f at p, making
// the map, sized for n entries, when it is nil.
func (s *state) mapEntry(f *field, p unsafe.Pointer, b []byte, i, n int) (int, error) {
	es, ee, err := length(b, i)
	if err != nil {
		return 0, err
	}
	if *(*unsafe.Pointer)(p) == nil {
		// The common maps are made as the map with string keys of their
		// value type, which is the same in memory.
		switch f.mp.kind {
		case mapStringString:
			*(*map[string]string)(p) = make(map[string]string, n)
		case mapStringBytes:
			*(*map[string][]byte)(p) = make(map[string][]byte, n)
		case mapStringQuantity:
			*(*map[string]resource.Quantity)(p) = make(map[string]resource.Quantity, n)
		default:
			*(*unsafe.Pointer)(p) = reflect.MakeMapWithSize(f.typ, n).UnsafePointer()
		}
	}
	e := b[es:ee]
	mp := f.mp
	switch mp.kind {
	case mapStringString:
		err = stringKeyEntry(s, mp, p, e, "", func(b []byte) (string, error) { return s.str(b), nil })
	case mapStringBytes:
		err = stringKeyEntry(s, mp, p, e, []byte{}, func(b []byte) ([]byte, error) { return s.bytes(b), nil })
	case mapStringQuantity:
		err = stringKeyEntry(s, mp, p, e, resource.Quantity{}, func(b []byte) (q resource.Quantity, err error) {
			err = q.Unmarshal(b)
			return q, err
		})
	default:
		k := reflect.New(mp.key.typ)
		v := reflect.New(mp.val.typ)
		if mp.val.op == opBytes {
			v.Elem().SetBytes([]byte{})
		}
		if err := s.entry(mp, e, k.UnsafePointer(), v.UnsafePointer()); err != nil {
			return 0, err
		}
		reflect.NewAt(f.typ, p).Elem().SetMapIndex(k.Elem(), v.Elem())
	}
	if err != nil {
		return 0, err
	}
	return ee, nil
}

// stringKeyEntry decodes the map entry e of a common map, with string keys
// and values of type V, into the map at p: val reads a value from its
// bytes, and an entry without one gets zero, as in the generated code.
func stringKeyEntry[V any](s *state, mp *mapPlan, p unsafe.Pointer, e []byte, zero V, val func([]byte) (V, error)) error {
	k, v := "", zero
	for j := 0; j < len(e); {
		num, vs, ve, err := entryField(mp, e, j)
		if err != nil {
			return err
		}
		switch num {
		case 1:
			k = s.str(e[vs:ve])
		case 2:
			if v, err = val(e[vs:ve]); err != nil {
				return err
			}
		}
		j = ve
	}
	(*(*map[string]V)(p))[k] = v
	return nil
}

// entryField reads the field at e[i:] of a map entry whose key and value
// are both length-delimited: it returns the field number and the bounds of
// the key's or value's bytes, or 0 and the end of an unknown field.
func entryField(mp *mapPlan, e []byte, i int) (num int32, start, end int, err error) {
	tag, j, err := varint(e, i)
	if err != nil {
		return 0, 0, 0, err
	}
	num, wt := int32(tag>>3), uint8(tag&7)
	switch num {
	case 1, 2:
		if wt != wireBytes {
			if num == 1 {
				return 0, 0, 0, wrongWire(&mp.key, wt)
			}
			return 0, 0, 0, wrongWire(&mp.val, wt)
		}
		start, end, err = length(e, j)
		return num, start, end, err
	}
	end, err = skipField(e, i)
	return 0, end, end, err
}

// entry decodes the fields of the map entry e into the key at k and the
// value at v; a message value is decoded afresh each time it occurs, as the
// generated code does.
func (s *state) entry(mp *mapPlan, e []byte, k, v unsafe.Pointer) error {
	seen := false
	for i := 0; i < len(e); {
		tag, j, err := varint(e, i)
		if err != nil {
			return err
		}
		num, wt := int32(tag>>3), uint8(tag&7)
		switch num {
		case 1:
			i, err = s.value(&mp.key, k, e, j, wt)
		case 2:
			if mp.val.op == opMessage && mp.val.wire == wt && seen {
				reflect.NewAt(mp.val.typ, v).Elem().SetZero()
			}
			seen = true
			i, err = s.value(&mp.val, v, e, j, wt)
		default:
			i, err = skipField(e, i)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
