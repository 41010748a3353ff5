package jsondecode

import (
	"errors"
	"reflect"
)

// Value is the value of an object member, read by one of its methods
// before the callback returns; a member left unread is skipped.
type Value struct {
	s    *state
	read bool
}

// Decode decodes the value into v, a non-nil pointer.
func (v *Value) Decode(x any) error {
	v.read = true
	rv := reflect.ValueOf(x)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.New("jsondecode: Decode into a non-pointer")
	}
	return decoderFor(rv.Type().Elem())(v.s, rv.UnsafePointer())
}

// Raw validates the value and returns its bytes, which alias the input.
func (v *Value) Raw() ([]byte, error) {
	v.read = true
	v.s.skipSpace()
	return v.s.skipValue()
}

// Object reads the JSON object at the start of data (after white space),
// calling fn with each member's key, which aliases the input, and value,
// and returns how many bytes of data the object took. An object that data
// ends within fails with an error for which IsTruncated is true.
func (d *Decoder) Object(data []byte, fn func(key []byte, v *Value) error) (int, error) {
	if d.intern == nil || len(d.intern) >= maxIntern {
		d.intern = make(map[string]string, 256)
	}
	s := &state{data: data, intern: d.intern, skipManaged: d.SkipManagedFields, memo: d.memoTable()}
	if s.peek() != '{' {
		return 0, s.syntax("expected an object")
	}
	s.pos++
	if s.peek() == '}' {
		s.pos++
		return s.pos, nil
	}
	for {
		if s.peek() != '"' {
			return 0, s.syntax("expected object key")
		}
		key, err := s.rawString()
		if err != nil {
			return 0, err
		}
		if s.peek() != ':' {
			return 0, s.syntax("expected ':'")
		}
		s.pos++
		v := Value{s: s}
		if err := fn(key, &v); err != nil {
			return 0, err
		}
		if !v.read {
			if err := s.skip(0); err != nil {
				return 0, err
			}
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return s.pos, nil
		default:
			return 0, s.syntax("expected ',' or '}' in object")
		}
	}
}

// IsTruncated reports whether err is the input ending inside a value.
func IsTruncated(err error) bool {
	var se *SyntaxError
	return errors.As(err, &se) && se.truncated
}

// Null reports whether the value is null, without reading it.
func (v *Value) Null() bool { return v.s.peek() == 'n' }
