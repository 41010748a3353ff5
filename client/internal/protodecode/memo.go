package protodecode

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"
)

// Memo makes the values a Decoder decodes share the fields of one message
// type that are encoded alike: the first time an encoding is met it is
// decoded into a value of its own, and that field, and every later field
// encoded the same way, gets a copy of the value, which shares its maps,
// slices and pointers. It is for values nobody writes to, such as the
// objects of an informer's cache, of a type that repeats (a pod's resource
// requirements, one in each container of each pod of a workload). A Memo
// is safe for concurrent use; it holds at most max encodings, and starts
// afresh when full.
type Memo struct {
	typ reflect.Type
	c   *codec // typ's
	max int
	mu  sync.RWMutex
	m   map[string]unsafe.Pointer // encoding → a *typ, never written again
}

// NewMemo returns a Memo of the message type t, a struct whose pointer
// has a DeepCopyInto method (as the API types have), for up to max
// encodings.
func NewMemo(t reflect.Type, max int) (*Memo, error) {
	m, ok := reflect.PointerTo(t).MethodByName("DeepCopyInto")
	if t.Kind() != reflect.Struct || !ok || m.Type.NumIn() != 2 || m.Type.In(1) != reflect.PointerTo(t) {
		return nil, fmt.Errorf("protodecode: a Memo of %s, which is not a struct with a DeepCopyInto method", t)
	}
	c, err := codecOf(t)
	if err != nil {
		return nil, err
	}
	return &Memo{typ: t, c: c, max: max, m: map[string]unsafe.Pointer{}}, nil
}

// decode decodes the message b of the memo's type into p:
// the value decoded before from the same bytes, else b decoded. A value
// that p already holds (the field came twice) is merged into, as protobuf
// merges a repeated message, after a deep copy: it may be shared.
func (m *Memo) decode(s *state, p unsafe.Pointer, b []byte) error {
	dst := reflect.NewAt(m.typ, p)
	if !dst.Elem().IsZero() {
		own := reflect.New(m.typ)
		dst.MethodByName("DeepCopyInto").Call([]reflect.Value{own})
		dst.Elem().Set(own.Elem())
		return s.decode(m.c, p, b)
	}
	m.mu.RLock()
	v, ok := m.m[string(b)]
	m.mu.RUnlock()
	if !ok {
		// Decoded apart, into an arena of its own: the value outlives
		// the message it came in.
		own := state{input: b, skipManaged: s.skipManaged, depth: s.depth}
		v = reflect.New(m.typ).UnsafePointer()
		if err := own.decode(m.c, v, b); err != nil {
			return err
		}
		m.mu.Lock()
		if first, ok := m.m[string(b)]; ok {
			v = first // decoded meanwhile by another
		} else {
			if len(m.m) >= m.max {
				clear(m.m)
			}
			m.m[string(b)] = v
		}
		m.mu.Unlock()
	}
	dst.Elem().Set(reflect.NewAt(m.typ, v).Elem())
	return nil
}

// Unmarshal decodes the message b into v, a pointer to a value of the
// memo's type, through the memo: v gets the value decoded before from the
// same bytes, shared, when it holds nothing yet.
func (m *Memo) Unmarshal(b []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem() != m.typ {
		return fmt.Errorf("protodecode: Memo.Unmarshal into %T, not a *%s", v, m.typ)
	}
	p := (*eface)(unsafe.Pointer(&v)).data
	if p == nil {
		return fmt.Errorf("protodecode: Memo.Unmarshal into a nil %T", v)
	}
	s := state{input: b}
	return m.decode(&s, p, b)
}
