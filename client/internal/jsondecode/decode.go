// Package jsondecode decodes JSON into Kubernetes API types several times
// faster than encoding/json, which is where a JSON informer spends its CPU.
//
// For each Go type it compiles, once, a decoder that writes fields through
// precomputed offsets, and it reads the input in a single pass that both
// validates and decodes (encoding/json validates the whole value first, then
// decodes it, and re-parses the values of every custom UnmarshalJSON, which
// Kubernetes types have many of). The Kubernetes types with custom JSON
// (metav1.Time, metav1.MicroTime, intstr.IntOrString) are decoded
// natively; other json.Unmarshalers get their raw value, and the few Go
// types not supported natively fall back to encoding/json for that value.
//
// The result is what encoding/json would produce for valid input, with two
// deliberate differences that follow the Kubernetes API server's own
// decoder: object keys match field names case-sensitively, and the first
// error stops decoding.
package jsondecode

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/internal/jsonscan"
)

// SyntaxError is malformed JSON.
type SyntaxError struct {
	Offset    int
	msg       string
	truncated bool // the input ended inside the value
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("json: %s at offset %d", e.msg, e.Offset) }

// TypeError is a JSON value that does not fit the Go type it decodes into.
type TypeError struct {
	Value  string
	Type   reflect.Type
	Offset int
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("json: cannot decode %s into Go value of type %s at offset %d", e.Value, e.Type, e.Offset)
}

// Unmarshal decodes the single JSON value data into v, a non-nil pointer.
func Unmarshal(data []byte, v any) error {
	var s state
	s.data = data
	return s.decodeTop(v)
}

// Decoder decodes many values with one set of interned strings: the short
// strings that repeat from object to object (label values, condition
// types, node and image names) are then shared instead of allocated for
// each object. The zero value is ready to use; it is not safe for
// concurrent use.
type Decoder struct {
	// SkipManagedFields leaves metadata.managedFields out of the objects
	// decoded, for consumers that would drop them anyway: they are often
	// the largest part of an object, and skipping them is cheaper than
	// decoding and then copying the object to strip them.
	SkipManagedFields bool
	// Share makes the values of the types in memoTypes (resource
	// requirements, string maps) that are spelled alike share one decoded
	// value, maps included, across the values this Decoder decodes: for
	// objects bound for a read-only cache, so that they neither hold nor
	// make as garbage a copy each.
	Share  bool
	intern map[string]string
	memo   map[reflect.Type]map[string]reflect.Value
	nmemo  int
}

// maxIntern bounds the interned strings; the table starts over when full.
const (
	maxIntern    = 8192
	maxInternLen = 48
)

// Unmarshal decodes the single JSON value data into v, a non-nil pointer.
func (d *Decoder) Unmarshal(data []byte, v any) error {
	switch {
	case d.intern == nil:
		d.intern = make(map[string]string, 256)
	case len(d.intern) >= maxIntern:
		// Emptied, not remade: a new table would grow again, entry by
		// entry, to this size, making a sync of many objects with their
		// unique names and uids throw away a table every maxIntern of
		// them, which costs more garbage than it saves.
		clear(d.intern)
	}
	s := state{data: data, intern: d.intern, skipManaged: d.SkipManagedFields, memo: d.memoTable()}
	return s.decodeTop(v)
}

// memoTable returns the table of shared values, nil when not sharing.
func (d *Decoder) memoTable() *memoTable {
	if !d.Share {
		return nil
	}
	if d.memo == nil || d.nmemo >= maxMemo {
		d.memo, d.nmemo = map[reflect.Type]map[string]reflect.Value{}, 0
	}
	return &memoTable{m: d.memo, n: &d.nmemo}
}

// memoTable maps the JSON spelling of a value to its decoded value, per
// type.
type memoTable struct {
	m map[reflect.Type]map[string]reflect.Value
	n *int
}

const (
	// maxMemo bounds the shared values of a Decoder; the table starts
	// over when full.
	maxMemo = 4096
	// maxMemoLen is the longest spelling shared: longer values are rarely
	// repeated.
	maxMemoLen = 1024
)

// memoTypes are the types whose values are shared when they are spelled
// alike.
var memoTypes = map[reflect.Type]bool{
	reflect.TypeFor[corev1.ResourceRequirements](): true,
	reflect.TypeFor[map[string]string]():           true,
}

// memoDecoder decodes values of t through the Decoder's table of shared
// values, when it has one and the value decoded into is still zero (so
// that nothing is merged into a shared value).
func memoDecoder(t reflect.Type, inner decodeFunc) decodeFunc {
	return func(s *state, p unsafe.Pointer) error {
		if s.memo == nil {
			return inner(s, p)
		}
		dst := reflect.NewAt(t, p).Elem()
		if !dst.IsZero() {
			return inner(s, p)
		}
		start := s.pos
		raw, err := s.skipValue()
		if err != nil {
			return err
		}
		if len(raw) > maxMemoLen || raw[0] == 'n' {
			s.pos = start
			return inner(s, p)
		}
		byType := s.memo.m[t]
		if v, ok := byType[string(raw)]; ok {
			dst.Set(v)
			return nil
		}
		sub := state{data: raw, depth: s.depth, intern: s.intern, skipManaged: s.skipManaged}
		if err := inner(&sub, p); err != nil {
			return err
		}
		if byType == nil {
			byType = map[string]reflect.Value{}
			s.memo.m[t] = byType
		}
		v := reflect.New(t).Elem()
		v.Set(dst)
		byType[string(raw)] = v
		*s.memo.n++
		return nil
	}
}

// Valid reports whether data is one valid JSON value.
func Valid(data []byte) bool {
	s := state{data: data}
	s.skipSpace()
	if s.skip(0) != nil {
		return false
	}
	s.skipSpace()
	return s.pos == len(data)
}

type state struct {
	data        []byte
	pos         int
	depth       int
	intern      map[string]string
	skipManaged bool
	memo        *memoTable
}

// enter counts one more level of nesting; leave must follow.
func (s *state) enter() error {
	s.depth++
	if s.depth > maxDepth {
		return ErrTooDeep
	}
	return nil
}

func (s *state) leave() { s.depth-- }

func (s *state) decodeTop(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("jsondecode: Unmarshal into %T, not a non-nil pointer", v)
	}
	dec := decoderFor(rv.Type().Elem())
	s.skipSpace()
	if err := dec(s, rv.UnsafePointer()); err != nil {
		return err
	}
	s.skipSpace()
	if s.pos != len(s.data) {
		return s.syntax("data after the value")
	}
	return nil
}

// decodeFunc decodes the value at s into the Go value at p.
type decodeFunc func(s *state, p unsafe.Pointer) error

var decoders sync.Map // reflect.Type → decodeFunc

// decoderFor returns the compiled decoder of t.
func decoderFor(t reflect.Type) decodeFunc {
	if d, ok := decoders.Load(t); ok {
		return d.(decodeFunc)
	}
	// Recursive types: the placeholder resolves to the real decoder once
	// it is built.
	var real decodeFunc
	var wg sync.WaitGroup
	wg.Add(1)
	placeholder := decodeFunc(func(s *state, p unsafe.Pointer) error {
		wg.Wait()
		return real(s, p)
	})
	if d, loaded := decoders.LoadOrStore(t, placeholder); loaded {
		return d.(decodeFunc)
	}
	real = compile(t)
	if memoTypes[t] {
		real = memoDecoder(t, real)
	}
	wg.Done()
	decoders.Store(t, real)
	return real
}

var (
	timeType       = reflect.TypeFor[metav1.Time]()
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
	microTimeType  = reflect.TypeFor[metav1.MicroTime]()
	intOrStrType   = reflect.TypeFor[intstr.IntOrString]()
	unmarshalerT   = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshT   = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func compile(t reflect.Type) decodeFunc {
	switch t {
	case timeType:
		return decodeTime(time.RFC3339)
	case microTimeType:
		return decodeTime(metav1.RFC3339Micro)
	case intOrStrType:
		return decodeIntOrString
	}
	if reflect.PointerTo(t).Implements(unmarshalerT) {
		return unmarshalerDecoder(t)
	}
	if reflect.PointerTo(t).Implements(textUnmarshT) {
		return fallback(t)
	}
	switch t.Kind() {
	case reflect.String:
		return decodeString
	case reflect.Bool:
		return decodeBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intDecoder(t)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintDecoder(t)
	case reflect.Float32, reflect.Float64:
		return floatDecoder(t)
	case reflect.Pointer:
		return pointerDecoder(t)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(unmarshalerT) && !reflect.PointerTo(t.Elem()).Implements(textUnmarshT) {
			return decodeBytes
		}
		return sliceDecoder(t)
	case reflect.Map:
		if t == reflect.TypeFor[map[string]string]() {
			return decodeStringMap
		}
		if t.Key().Kind() == reflect.String && !reflect.PointerTo(t.Key()).Implements(textUnmarshT) {
			return mapDecoder(t)
		}
	case reflect.Struct:
		return structDecoder(t)
	}
	return fallback(t)
}

// fallback decodes the value with encoding/json as the API machinery
// configures it (case-sensitive, integers kept as int64), for the types this
// package does not handle natively (interfaces, arrays, maps with
// non-string keys, text unmarshalers).
func fallback(t reflect.Type) decodeFunc {
	return func(s *state, p unsafe.Pointer) error {
		raw, err := s.skipValue()
		if err != nil {
			return err
		}
		return sigsjson.UnmarshalCaseSensitivePreserveInts(raw, reflect.NewAt(t, p).Interface())
	}
}

func unmarshalerDecoder(t reflect.Type) decodeFunc {
	return func(s *state, p unsafe.Pointer) error {
		raw, err := s.skipValue()
		if err != nil {
			return err
		}
		return reflect.NewAt(t, p).Interface().(json.Unmarshaler).UnmarshalJSON(raw)
	}
}

// --- scanning ---

func (s *state) syntax(msg string) error {
	return &SyntaxError{Offset: s.pos, msg: msg, truncated: s.pos >= len(s.data)}
}

func (s *state) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, 0 at the end.
func (s *state) peek() byte {
	s.skipSpace()
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *state) literal(lit string) error {
	if rest := s.data[s.pos:]; len(rest) < len(lit) || string(rest[:len(lit)]) != lit {
		if len(rest) < len(lit) && string(rest) == lit[:len(rest)] {
			s.pos = len(s.data)
		}
		return s.syntax("invalid literal")
	}
	s.pos += len(lit)
	return nil
}

// skipValue validates the next value and returns its bytes.
func (s *state) skipValue() ([]byte, error) {
	s.skipSpace()
	start := s.pos
	if err := s.skip(0); err != nil {
		return nil, err
	}
	return s.data[start:s.pos], nil
}

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

func (s *state) skip(depth int) error {
	if depth+s.depth > maxDepth {
		return ErrTooDeep
	}
	switch c := s.peek(); {
	case c == '{':
		s.pos++
		if s.peek() == '}' {
			s.pos++
			return nil
		}
		for {
			if s.peek() != '"' {
				return s.syntax("expected object key")
			}
			if err := s.skipString(); err != nil {
				return err
			}
			if s.peek() != ':' {
				return s.syntax("expected ':'")
			}
			s.pos++
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.pos++
			case '}':
				s.pos++
				return nil
			default:
				return s.syntax("expected ',' or '}'")
			}
		}
	case c == '[':
		s.pos++
		if s.peek() == ']' {
			s.pos++
			return nil
		}
		for {
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.pos++
			case ']':
				s.pos++
				return nil
			default:
				return s.syntax("expected ',' or ']'")
			}
		}
	case c == '"':
		return s.skipString()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		_, err := s.number()
		return err
	case c == 0 && s.pos >= len(s.data):
		return s.syntax("unexpected end of JSON input")
	}
	return s.syntax(fmt.Sprintf("invalid character %q looking for a value", s.data[s.pos]))
}

// number consumes a number and returns its bytes.
func (s *state) number() ([]byte, error) {
	start := s.pos
	end, want := jsonscan.Number(s.data, start)
	s.pos = end
	if want != "" {
		return nil, s.syntax("invalid number")
	}
	return s.data[start:end], nil
}

// rawString consumes a string at s.pos (its opening quote) and returns its
// content, unescaped.
func (s *state) rawString() ([]byte, error) {
	b, _, err := s.stringBytes()
	return b, err
}

// skipString consumes a string, validating it without decoding it.
func (s *state) skipString() error {
	d := s.data
	for i := s.pos + 1; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			s.pos = i + 1
			return nil
		case c < 0x20:
			s.pos = i
			return s.syntax("invalid control character in string")
		case c == '\\':
			if i+1 >= len(d) {
				break
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if _, ok := jsonscan.Hex4(d[i+2:]); !ok {
					s.pos = i
					return s.syntax("invalid \\u escape")
				}
				i += 5
			default:
				s.pos = i
				return s.syntax("invalid escape")
			}
		}
	}
	s.pos = len(d)
	return s.syntax("unexpected end of JSON input in string")
}

// stringBytes is rawString that also reports whether the content aliases
// the input, which it does unless it had escapes or invalid UTF-8.
func (s *state) stringBytes() (b []byte, aliased bool, err error) {
	d := s.data
	start := s.pos + 1
	i := start
	ascii := true
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			s.pos = i + 1
			if !ascii && !utf8.Valid(d[start:i]) {
				return validUTF8(d[start:i]), false, nil
			}
			return d[start:i], true, nil
		case c == '\\':
			return s.unescape(start, i)
		case c < 0x20:
			s.pos = i
			return nil, false, s.syntax("invalid control character in string")
		case c >= 0x80:
			ascii = false
		}
		i++
	}
	s.pos = len(d)
	return nil, false, s.syntax("unexpected end of JSON input in string")
}

// unescape decodes a string with escapes; the bytes from start to i need
// none.
func (s *state) unescape(start, i int) ([]byte, bool, error) {
	d := s.data
	out := make([]byte, 0, i-start+16)
	out = append(out, d[start:i]...)
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			s.pos = i + 1
			if !utf8.Valid(out) {
				out = validUTF8(out)
			}
			return out, false, nil
		case c < 0x20:
			s.pos = i
			return nil, false, s.syntax("invalid control character in string")
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(d) {
			break
		}
		switch d[i+1] {
		case '"', '\\', '/':
			out = append(out, d[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := jsonscan.Hex4(d[i+2:])
			if !ok {
				s.pos = i
				return nil, false, s.syntax("invalid \\u escape")
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(-1), false
				if i+1 < len(d) && d[i] == '\\' && d[i+1] == 'u' {
					r2, ok = jsonscan.Hex4(d[i+2:])
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			s.pos = i
			return nil, false, s.syntax("invalid escape")
		}
		i += 2
	}
	s.pos = len(d)
	return nil, false, s.syntax("unexpected end of JSON input in string")
}

// validUTF8 replaces each invalid byte with U+FFFD, as encoding/json does.
func validUTF8(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// str consumes a string value and returns it as a Go string.
func (s *state) str() (string, error) {
	b, aliased, err := s.stringBytes()
	if err != nil {
		return "", err
	}
	if !aliased {
		return unsafe.String(unsafe.SliceData(b), len(b)), nil // b is our own copy
	}
	if s.intern != nil && len(b) <= maxInternLen {
		if v, ok := s.intern[string(b)]; ok {
			return v, nil
		}
		v := string(b)
		s.intern[v] = v
		return v, nil
	}
	return string(b), nil
}

// --- scalar decoders ---

func decodeString(s *state, p unsafe.Pointer) error {
	switch s.peek() {
	case '"':
		v, err := s.str()
		if err != nil {
			return err
		}
		*(*string)(p) = v
		return nil
	case 'n':
		return s.literal("null")
	}
	return s.mismatch(reflect.TypeFor[string]())
}

// mismatch reports a value of the wrong JSON type, after checking it is
// valid JSON at all.
func (s *state) mismatch(t reflect.Type) error {
	s.skipSpace()
	start := s.pos
	raw, err := s.skipValue()
	if err != nil {
		return err
	}
	what := "value"
	switch raw[0] {
	case '{':
		what = "object"
	case '[':
		what = "array"
	case '"':
		what = "string"
	case 't', 'f':
		what = "bool"
	default:
		what = "number"
	}
	return &TypeError{Value: what, Type: t, Offset: start}
}

func decodeBool(s *state, p unsafe.Pointer) error {
	switch s.peek() {
	case 't':
		*(*bool)(p) = true
		return s.literal("true")
	case 'f':
		*(*bool)(p) = false
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	return s.mismatch(reflect.TypeFor[bool]())
}

// numeral reads the value of a numeric field of type t and returns the
// number's text and its offset; ok is false, with a nil error, for null,
// which leaves the field as it was.
func (s *state) numeral(t reflect.Type) (num []byte, start int, ok bool, err error) {
	c := s.peek()
	if c == 'n' {
		return nil, 0, false, s.literal("null")
	}
	if c != '-' && (c < '0' || c > '9') {
		return nil, 0, false, s.mismatch(t)
	}
	start = s.pos
	num, err = s.number()
	return num, start, err == nil, err
}

// numberDecoder decodes a number into a field of type t with set, which
// stores the number's text at p and reports whether t can hold it.
func numberDecoder(t reflect.Type, set func(p unsafe.Pointer, num string) bool) decodeFunc {
	return func(s *state, p unsafe.Pointer) error {
		num, start, ok, err := s.numeral(t)
		if !ok {
			return err
		}
		if !set(p, unsafe.String(unsafe.SliceData(num), len(num))) {
			return &TypeError{Value: "number " + string(num), Type: t, Offset: start}
		}
		return nil
	}
}

func intDecoder(t reflect.Type) decodeFunc {
	bits := t.Bits()
	return numberDecoder(t, func(p unsafe.Pointer, num string) bool {
		v, err := strconv.ParseInt(num, 10, bits)
		if err != nil {
			return false
		}
		storeInteger(p, bits, v)
		return true
	})
}

func uintDecoder(t reflect.Type) decodeFunc {
	bits := t.Bits()
	return numberDecoder(t, func(p unsafe.Pointer, num string) bool {
		v, err := strconv.ParseUint(num, 10, bits)
		if err != nil {
			return false
		}
		storeInteger(p, bits, v)
		return true
	})
}

// storeInteger writes the low bits of v at p: an integer of that size,
// signed or not, holds the same bits either way.
func storeInteger[V int64 | uint64](p unsafe.Pointer, bits int, v V) {
	switch bits {
	case 8:
		*(*uint8)(p) = uint8(v)
	case 16:
		*(*uint16)(p) = uint16(v)
	case 32:
		*(*uint32)(p) = uint32(v)
	default:
		*(*uint64)(p) = uint64(v)
	}
}

func floatDecoder(t reflect.Type) decodeFunc {
	bits := t.Bits()
	return numberDecoder(t, func(p unsafe.Pointer, num string) bool {
		v, err := strconv.ParseFloat(num, bits)
		if err != nil || math.IsInf(v, 0) {
			return false
		}
		if bits == 32 {
			*(*float32)(p) = float32(v)
		} else {
			*(*float64)(p) = v
		}
		return true
	})
}

var bytesFallback = fallback(reflect.TypeFor[[]byte]())

func decodeBytes(s *state, p unsafe.Pointer) error {
	switch s.peek() {
	case 'n':
		*(*[]byte)(p) = nil
		return s.literal("null")
	case '[':
		// encoding/json also reads bytes as an array of numbers.
		return bytesFallback(s, p)
	case '"':
	default:
		return s.mismatch(reflect.TypeFor[[]byte]())
	}
	start := s.pos
	b, err := s.rawString()
	if err != nil {
		return err
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
	n, err := base64.StdEncoding.Decode(out, b)
	if err != nil {
		return &TypeError{Value: "string (not base64)", Type: reflect.TypeFor[[]byte](), Offset: start}
	}
	*(*[]byte)(p) = out[:n]
	return nil
}

// --- Kubernetes types ---

func decodeTime(layout string) decodeFunc {
	return func(s *state, p unsafe.Pointer) error {
		t := (*time.Time)(p) // metav1.Time and MicroTime hold just a time.Time
		switch s.peek() {
		case 'n':
			*t = time.Time{}
			return s.literal("null")
		case '"':
		default:
			return s.mismatch(timeType)
		}
		b, err := s.rawString()
		if err != nil {
			return err
		}
		pt, err := time.Parse(layout, unsafe.String(unsafe.SliceData(b), len(b)))
		if err != nil {
			return fmt.Errorf("json: time %q: %w", b, err)
		}
		*t = pt.Local()
		return nil
	}
}

func decodeIntOrString(s *state, p unsafe.Pointer) error {
	v := (*intstr.IntOrString)(p)
	switch c := s.peek(); {
	case c == '"':
		v.Type = intstr.String
		return decodeString(s, unsafe.Pointer(&v.StrVal))
	case c == 'n':
		// encoding/json leaves the value as it is, but IntOrString's own
		// UnmarshalJSON makes it an Int.
		v.Type = intstr.Int
		return s.literal("null")
	default:
		v.Type = intstr.Int
		return intDecoder(reflect.TypeFor[int32]())(s, unsafe.Pointer(&v.IntVal))
	}
}

// --- composite decoders ---

func pointerDecoder(t reflect.Type) decodeFunc {
	elem := t.Elem()
	var dec decodeFunc
	var once sync.Once
	return func(s *state, p unsafe.Pointer) error {
		if s.peek() == 'n' {
			*(*unsafe.Pointer)(p) = nil
			return s.literal("null")
		}
		once.Do(func() { dec = decoderFor(elem) })
		pp := (*unsafe.Pointer)(p)
		if *pp == nil {
			*pp = reflect.New(elem).UnsafePointer()
		}
		return dec(s, *pp)
	}
}

// sliceDecoder decodes an array into a scratch slice from a pool, then
// copies it into a slice of exactly its length: one allocation, and no
// spare capacity kept in the decoded object.
func sliceDecoder(t reflect.Type) decodeFunc {
	elem := t.Elem()
	size := elem.Size()
	var dec decodeFunc
	var once sync.Once
	var pool sync.Pool
	return func(s *state, p unsafe.Pointer) error {
		switch s.peek() {
		case 'n':
			reflect.NewAt(t, p).Elem().SetZero()
			return s.literal("null")
		case '[':
		default:
			return s.mismatch(t)
		}
		once.Do(func() { dec = decoderFor(elem) })
		s.pos++
		if err := s.enter(); err != nil {
			return err
		}
		defer s.leave()
		sv := reflect.NewAt(t, p).Elem()
		if s.peek() == ']' {
			s.pos++
			// An empty array is an empty, not a nil, slice.
			sv.Set(reflect.MakeSlice(t, 0, 0))
			return nil
		}
		scratch, _ := pool.Get().(*reflect.Value)
		if scratch == nil {
			v := reflect.MakeSlice(t, 4, 4)
			scratch = &v
		}
		// Elements already there are decoded into, as encoding/json does
		// for a repeated key.
		old := sv.Len()
		for scratch.Len() < old {
			*scratch = reflect.MakeSlice(t, 2*scratch.Len(), 2*scratch.Len())
		}
		if old > 0 {
			reflect.Copy(*scratch, sv)
		}
		base := scratch.UnsafePointer()
		elemAt := func(i int) unsafe.Pointer { return unsafe.Add(base, uintptr(i)*size) }
		n := 0
		err := func() error {
			for {
				if n == scratch.Len() {
					grown := reflect.MakeSlice(t, 2*n, 2*n)
					reflect.Copy(grown, *scratch)
					*scratch = grown
					base = scratch.UnsafePointer()
				}
				if n >= old {
					reflect.NewAt(elem, elemAt(n)).Elem().SetZero()
				}
				if err := dec(s, elemAt(n)); err != nil {
					return err
				}
				n++
				switch s.peek() {
				case ',':
					s.pos++
				case ']':
					s.pos++
					return nil
				default:
					return s.syntax("expected ',' or ']' in array")
				}
			}
		}()
		if err == nil {
			out := reflect.MakeSlice(t, n, n)
			reflect.Copy(out, *scratch) // n elements: the length of out
			sv.Set(out)
		}
		// Nothing decoded may stay reachable from the pool.
		for i := range min(max(n+1, old), scratch.Len()) {
			reflect.NewAt(elem, elemAt(i)).Elem().SetZero()
		}
		pool.Put(scratch)
		return err
	}
}

func mapDecoder(t reflect.Type) decodeFunc {
	key, elem := t.Key(), t.Elem()
	var dec decodeFunc
	var once sync.Once
	return func(s *state, p unsafe.Pointer) error {
		switch s.peek() {
		case 'n':
			reflect.NewAt(t, p).Elem().SetZero()
			return s.literal("null")
		case '{':
		default:
			return s.mismatch(t)
		}
		once.Do(func() { dec = decoderFor(elem) })
		s.pos++
		if err := s.enter(); err != nil {
			return err
		}
		defer s.leave()
		mv := reflect.NewAt(t, p).Elem()
		if mv.IsNil() {
			mv.Set(reflect.MakeMap(t))
		}
		if s.peek() == '}' {
			s.pos++
			return nil
		}
		ev := reflect.New(elem).Elem()
		for {
			if s.peek() != '"' {
				return s.syntax("expected object key")
			}
			k, err := s.str()
			if err != nil {
				return err
			}
			if s.peek() != ':' {
				return s.syntax("expected ':'")
			}
			s.pos++
			ev.SetZero()
			if err := dec(s, ev.Addr().UnsafePointer()); err != nil {
				return err
			}
			kv := reflect.ValueOf(k)
			if key != kv.Type() {
				kv = kv.Convert(key)
			}
			mv.SetMapIndex(kv, ev)
			switch s.peek() {
			case ',':
				s.pos++
			case '}':
				s.pos++
				return nil
			default:
				return s.syntax("expected ',' or '}' in object")
			}
		}
	}
}

// decodeStringMap is mapDecoder for map[string]string (labels,
// annotations, selectors), without reflection.
func decodeStringMap(s *state, p unsafe.Pointer) error {
	mp := (*map[string]string)(p)
	switch s.peek() {
	case 'n':
		*mp = nil
		return s.literal("null")
	case '{':
	default:
		return s.mismatch(reflect.TypeFor[map[string]string]())
	}
	s.pos++
	if *mp == nil {
		*mp = make(map[string]string)
	}
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.syntax("expected object key")
		}
		k, err := s.str()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return s.syntax("expected ':'")
		}
		s.pos++
		var v string
		if err := decodeString(s, unsafe.Pointer(&v)); err != nil {
			return err
		}
		(*mp)[k] = v
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.syntax("expected ',' or '}' in object")
		}
	}
}

// field is one JSON member of a struct, possibly in an inlined struct.
type field struct {
	name   string
	offset uintptr
	typ    reflect.Type
	// via holds the offsets of the embedded pointers to follow first; a
	// nil one is allocated.
	via   []embedPtr
	dec   decodeFunc
	index int // in the struct's list of fields
	// managed is ObjectMeta's managedFields, which a Decoder may skip.
	managed bool
}

// fieldIndex finds a field by name: a small hash table of buckets by first
// byte and length, cheaper than a map for the short keys of Kubernetes
// objects.
type fieldIndex struct {
	buckets [64][]*field
}

func bucketOf(k []byte) int {
	if len(k) == 0 {
		return 0
	}
	return (int(k[0]) + 7*len(k) + int(k[len(k)-1])) & 63
}

func newFieldIndex(fields []*field) fieldIndex {
	var x fieldIndex
	for _, f := range fields {
		b := bucketOf([]byte(f.name))
		x.buckets[b] = append(x.buckets[b], f)
	}
	return x
}

func (x *fieldIndex) find(k []byte) *field {
	for _, f := range x.buckets[bucketOf(k)] {
		if f.name == string(k) {
			return f
		}
	}
	return nil
}

type embedPtr struct {
	offset uintptr
	typ    reflect.Type
}

func structDecoder(t reflect.Type) decodeFunc {
	var fields []*field
	var once sync.Once
	var index fieldIndex
	return func(s *state, p unsafe.Pointer) error {
		switch s.peek() {
		case 'n':
			return s.literal("null")
		case '{':
		default:
			return s.mismatch(t)
		}
		once.Do(func() {
			fields = structFields(t, 0, nil, map[reflect.Type]bool{})
			for i, f := range fields {
				f.dec = decoderFor(f.typ)
				f.index = i
				f.managed = t == objectMetaType && f.name == "managedFields"
			}
			index = newFieldIndex(fields)
		})
		s.pos++
		if err := s.enter(); err != nil {
			return err
		}
		defer s.leave()
		if s.peek() == '}' {
			s.pos++
			return nil
		}
		next := 0 // members mostly come in the order of the fields
		for {
			if s.peek() != '"' {
				return s.syntax("expected object key")
			}
			k, err := s.rawString()
			if err != nil {
				return err
			}
			if s.peek() != ':' {
				return s.syntax("expected ':'")
			}
			s.pos++
			var f *field
			if next < len(fields) && fields[next].name == string(k) {
				f = fields[next]
			} else {
				f = index.find(k)
			}
			if f != nil {
				next = f.index + 1
				if f.managed && s.skipManaged {
					f = nil
				}
			}
			if f == nil {
				if err := s.skip(0); err != nil {
					return err
				}
			} else {
				fp := p
				for _, e := range f.via {
					pp := (*unsafe.Pointer)(unsafe.Add(fp, e.offset))
					if *pp == nil {
						*pp = reflect.New(e.typ).UnsafePointer()
					}
					fp = *pp
				}
				if err := f.dec(s, unsafe.Add(fp, f.offset)); err != nil {
					return err
				}
			}
			switch s.peek() {
			case ',':
				s.pos++
			case '}':
				s.pos++
				return nil
			default:
				return s.syntax("expected ',' or '}' in object")
			}
		}
	}
}

// structFields lists the JSON members of t as encoding/json sees them:
// exported fields by their tag name, the fields of untagged embedded
// structs promoted (shallower ones winning), "-" skipped.
func structFields(t reflect.Type, base uintptr, via []embedPtr, seen map[reflect.Type]bool) []*field {
	if seen[t] {
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	var own, promoted []*field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
				if ft.Kind() == reflect.Struct {
					v := append(append([]embedPtr(nil), via...), embedPtr{offset: base + sf.Offset, typ: ft})
					promoted = append(promoted, structFields(ft, 0, v, seen)...)
				}
				continue
			}
			if ft.Kind() == reflect.Struct {
				promoted = append(promoted, structFields(ft, base+sf.Offset, via, seen)...)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		own = append(own, &field{name: name, offset: base + sf.Offset, typ: sf.Type, via: via})
	}
	names := map[string]bool{}
	for _, f := range own {
		names[f.name] = true
	}
	// A promoted name that clashes with an own one, or with another
	// promoted one, is dropped, as encoding/json does for equal depths.
	count := map[string]int{}
	for _, f := range promoted {
		count[f.name]++
	}
	for _, f := range promoted {
		if !names[f.name] && count[f.name] == 1 {
			own = append(own, f)
		}
	}
	return own
}

// ErrTooDeep is nesting beyond what the decoder accepts.
var ErrTooDeep = errors.New("json: exceeded max depth")
