package client

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// The Kubernetes protobuf encoding: an object is the magic bytes followed by
// a runtime.Unknown message (typeMeta = 1 {apiVersion = 1, kind = 2},
// raw = 2, contentEncoding = 3, contentType = 4) whose raw field holds the
// object's own message. A list's message has its ListMeta in field 1 and
// its items in field 2; a watch stream is a sequence of frames, each a
// 4-byte big-endian length then a metav1.WatchEvent message (type = 1,
// object = 2 {raw = 1}) whose raw object is in the envelope above.
//
// The few messages of the envelope are read here by hand, so that the
// object's bytes are sliced out of the frame rather than copied, and every
// length is checked before it is used.

var protoMagic = []byte("k8s\x00")

// mediaTypeProtobuf is the Kubernetes protobuf media type.
const mediaTypeProtobuf = "application/vnd.kubernetes.protobuf"

func isProtobuf(contentType string) bool {
	return strings.HasPrefix(strings.TrimSpace(contentType), mediaTypeProtobuf)
}

var errProtoTruncated = errors.New("protobuf: truncated message")

// protoField is one field of a message: its number, wire type, and, for
// varints, the value, for length-delimited fields, the bytes.
type protoField struct {
	num   int
	wire  int
	value uint64
	bytes []byte
}

// nextField reads the field at the start of b and returns it with the rest
// of b. Groups (wire types 3 and 4) are refused: no Kubernetes type has any.
func nextField(b []byte) (protoField, []byte, error) {
	key, n := uvarint(b)
	if n <= 0 {
		return protoField{}, nil, errProtoTruncated
	}
	b = b[n:]
	f := protoField{num: int(key >> 3), wire: int(key & 7)}
	if key>>3 == 0 || key>>3 > 1<<29 {
		return protoField{}, nil, fmt.Errorf("protobuf: bad field number %d", key>>3)
	}
	switch f.wire {
	case 0:
		v, n := uvarint(b)
		if n <= 0 {
			return protoField{}, nil, errProtoTruncated
		}
		f.value = v
		return f, b[n:], nil
	case 1:
		if len(b) < 8 {
			return protoField{}, nil, errProtoTruncated
		}
		return f, b[8:], nil
	case 2:
		l, n := uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return protoField{}, nil, errProtoTruncated
		}
		f.bytes = b[n : n+int(l)]
		return f, b[n+int(l):], nil
	case 5:
		if len(b) < 4 {
			return protoField{}, nil, errProtoTruncated
		}
		return f, b[4:], nil
	}
	return protoField{}, nil, fmt.Errorf("protobuf: unsupported wire type %d", f.wire)
}

// uvarint decodes a varint; n <= 0 when b holds none.
func uvarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		if i == 9 && c > 1 {
			return 0, -1
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// typeMeta is the apiVersion and kind of an envelope, as slices of it.
type typeMeta struct {
	APIVersion, Kind string
}

// unwrapEnvelope checks the magic of an encoded object and returns the
// object's message and the type its envelope names.
func unwrapEnvelope(b []byte) ([]byte, typeMeta, error) {
	if !bytes.HasPrefix(b, protoMagic) {
		return nil, typeMeta{}, errors.New("protobuf: object without the k8s envelope")
	}
	b = b[len(protoMagic):]
	var tm typeMeta
	var raw []byte
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return nil, typeMeta{}, err
		}
		b = rest
		switch {
		case f.num == 1 && f.wire == 2:
			if tm, err = parseTypeMeta(f.bytes); err != nil {
				return nil, typeMeta{}, err
			}
		case f.num == 2 && f.wire == 2:
			raw = f.bytes
		case (f.num == 3 || f.num == 4) && f.wire == 2:
			// contentEncoding and contentType: only the defaults (none,
			// protobuf) are ever sent for protobuf requests.
			if len(f.bytes) != 0 && f.num == 3 {
				return nil, typeMeta{}, fmt.Errorf("protobuf: unsupported content encoding %q", f.bytes)
			}
		}
	}
	return raw, tm, nil
}

func parseTypeMeta(b []byte) (typeMeta, error) {
	var tm typeMeta
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return typeMeta{}, err
		}
		b = rest
		if f.wire != 2 {
			continue
		}
		switch f.num {
		case 1:
			tm.APIVersion = internString(f.bytes)
		case 2:
			tm.Kind = internString(f.bytes)
		}
	}
	return tm, nil
}

// internString returns common apiVersions and kinds without allocating.
func internString(b []byte) string {
	switch string(b) {
	case "v1":
		return "v1"
	case "Pod":
		return "Pod"
	case "Status":
		return "Status"
	}
	return string(b)
}

// The field numbers of an object's metadata, and of the metadata's
// managedFields, the same in every Kubernetes object message.
const (
	fieldMetadata      = 1
	fieldManagedFields = 17
)

// leanParts splits msg, an object's message, into the bytes before its
// metadata field, that field rewritten into buf without the managedFields
// of the metadata, and the bytes after it. Decoding the three parts one
// after the other into one object decodes msg without its managedFields
// (the generated Unmarshal methods merge into what is there, as protobuf
// does for concatenated messages), and only the metadata is copied, not
// the spec and status around it. found is false, and msg is to be decoded
// whole, when it has no managedFields or more than one metadata field.
func leanParts(msg, buf []byte) (before, meta, after []byte, found bool, err error) {
	var metaField, metaBytes []byte
	var metaStart int
	fields := 0
	for b := msg; len(b) > 0; {
		f, rest, err := nextField(b)
		if err != nil {
			return nil, nil, nil, false, err
		}
		if f.num == fieldMetadata && f.wire == 2 {
			fields++
			metaStart = len(msg) - len(b)
			metaField = b[:len(b)-len(rest)]
			metaBytes = f.bytes
		}
		b = rest
	}
	if fields != 1 {
		return nil, nil, nil, false, nil
	}
	// The length of the metadata without its managedFields.
	lean := 0
	for m := metaBytes; len(m) > 0; {
		g, rest, err := nextField(m)
		if err != nil {
			return nil, nil, nil, false, err
		}
		if g.num == fieldManagedFields {
			found = true
		} else {
			lean += len(m) - len(rest)
		}
		m = rest
	}
	if !found {
		return nil, nil, nil, false, nil
	}
	out := append(buf[:0], fieldMetadata<<3|2)
	out = binary.AppendUvarint(out, uint64(lean))
	// The loop above checked every field.
	for m := metaBytes; len(m) > 0; {
		g, rest, _ := nextField(m)
		if g.num != fieldManagedFields {
			out = append(out, m[:len(m)-len(rest)]...)
		}
		m = rest
	}
	return msg[:metaStart], out, msg[metaStart+len(metaField):], true, nil
}
