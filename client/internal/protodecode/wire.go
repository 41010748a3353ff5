package protodecode

import (
	"errors"
	"fmt"
	"io"
)

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireStart   = 3
	wireEnd     = 4
	wireFixed32 = 5
)

// The errors of malformed input, worded as the generated code words them.
var (
	errInvalidLength = errors.New("proto: negative length found during unmarshaling")
	errIntOverflow   = errors.New("proto: integer overflow")
	errEndOfGroup    = errors.New("proto: unexpected end of group")
	// ErrTooDeep is returned for messages nested deeper than maxDepth.
	ErrTooDeep = errors.New("protodecode: messages nested too deeply")
)

// maxDepth bounds the nesting of messages decoded natively, as
// google.golang.org/protobuf bounds it by default; only a recursive Go type
// can nest this deep.
const maxDepth = 10000

// varint reads the varint at b[i:] the way the generated code does: at
// most ten bytes, the bits past the 64th dropped. It returns the value and
// the index after it.
func varint(b []byte, i int) (uint64, int, error) {
	if i < len(b) && b[i] < 0x80 {
		return uint64(b[i]), i + 1, nil
	}
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, 0, errIntOverflow
		}
		if i >= len(b) {
			return 0, 0, io.ErrUnexpectedEOF
		}
		c := b[i]
		i++
		v |= uint64(c&0x7F) << shift
		if c < 0x80 {
			return v, i, nil
		}
	}
}

// skipVarint steps over the varint at b[i:], as varint reads it.
func skipVarint(b []byte, i int) (int, error) {
	for n := 0; n < 10; n++ {
		if i >= len(b) {
			return 0, io.ErrUnexpectedEOF
		}
		c := b[i]
		i++
		if c < 0x80 {
			return i, nil
		}
	}
	return 0, errIntOverflow
}

// length reads the length prefix at b[i:] and returns the bounds of the
// bytes it prefixes, which lie inside b.
func length(b []byte, i int) (start, end int, err error) {
	var v uint64
	if i < len(b) && b[i] < 0x80 {
		v, i = uint64(b[i]), i+1
	} else if v, i, err = varint(b, i); err != nil {
		return 0, 0, err
	}
	n := int(v)
	if n < 0 || i+n < 0 {
		return 0, 0, errInvalidLength
	}
	if i+n > len(b) {
		return 0, 0, io.ErrUnexpectedEOF
	}
	return i, i + n, nil
}

// skipField steps over the field whose tag starts at b[start:], groups
// included, with the checks of the generated code's skipGenerated, and
// returns the index after it, which lies inside b.
func skipField(b []byte, start int) (int, error) {
	i := start
	depth := 0
	for i < len(b) {
		tag, j, err := varint(b, i)
		if err != nil {
			return 0, err
		}
		i = j
		switch tag & 7 {
		case wireVarint:
			if i, err = skipVarint(b, i); err != nil {
				return 0, err
			}
		case wireFixed64:
			i += 8
		case wireBytes:
			v, j, err := varint(b, i)
			if err != nil {
				return 0, err
			}
			n := int(v)
			if n < 0 {
				return 0, errInvalidLength
			}
			i = j + n
		case wireStart:
			depth++
		case wireEnd:
			if depth == 0 {
				return 0, errEndOfGroup
			}
			depth--
		case wireFixed32:
			i += 4
		default:
			return 0, fmt.Errorf("proto: illegal wireType %d", tag&7)
		}
		if i < 0 {
			return 0, errInvalidLength
		}
		if depth == 0 {
			if i > len(b) {
				return 0, io.ErrUnexpectedEOF
			}
			return i, nil
		}
	}
	return 0, io.ErrUnexpectedEOF
}

// packedCount is the number of values in a packed run: varints when fixed
// is 0, else values of that many bytes.
func packedCount(b []byte, fixed int) int {
	if fixed > 0 {
		return len(b) / fixed
	}
	n := 0
	for _, c := range b {
		if c < 0x80 {
			n++
		}
	}
	return n
}
