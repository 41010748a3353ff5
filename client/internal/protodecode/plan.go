package protodecode

import (
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// unmarshaler is the method the generated code gives each message type.
type unmarshaler interface{ Unmarshal([]byte) error }

// op is how a field is decoded.
type op uint8

const (
	opString          op = iota + 1 // a string kind
	opStringPtr                     // *string kind
	opStringSlice                   // []string kind
	opBytes                         // []byte
	opBytesSlice                    // [][]byte
	opScalar                        // a bool, integer or float kind
	opScalarPtr                     // a pointer to one
	opScalarSlice                   // a slice of them, packed or not
	opMessage                       // a message held by value
	opMessagePtr                    // *message
	opMessageSlice                  // []message
	opMessagePtrSlice               // []*message
	opMap                           // map[K]V, entries of key 1 and value 2
)

// enc is how a scalar is encoded and converted.
type enc uint8

const (
	encVarint   enc = iota // integers, truncated to their size
	encBool                // a varint, true when not zero
	encZigzag32            // sint32
	encZigzag64            // sint64
	encFixed32             // fixed32, sfixed32, float
	encFixed64             // fixed64, sfixed64, double
)

// wire is the wire type of one scalar value of e.
func (e enc) wire() uint8 {
	switch e {
	case encFixed32:
		return wireFixed32
	case encFixed64:
		return wireFixed64
	}
	return wireVarint
}

// width is the bytes of one packed value of e, 0 for varints.
func (e enc) width() int {
	switch e {
	case encFixed32:
		return 4
	case encFixed64:
		return 8
	}
	return 0
}

// noRep marks a field that is not repeated, or past the first 64 that are.
const noRep = 0xFF

// field is the plan of one struct field.
type field struct {
	num    int32
	op     op
	wire   uint8 // the wire type of one value
	enc    enc   // scalars: encoding
	size   uint8 // scalars: bytes stored
	rep    uint8 // repeated fields and maps: bit in the per-message seen mask
	skipMF bool  // ObjectMeta.ManagedFields, left out with SkipManagedFields
	offset uintptr
	index  int          // the index of the field in its struct
	typ    reflect.Type // the field's Go type
	elem   reflect.Type // pointers and slices: the element type
	esize  uintptr      // slices: the element size
	msg    *codec       // messages: the message's codec
	mp     *mapPlan     // maps
	name   string
}

// codec decodes one message type: natively by its plan, or by its own
// Unmarshal method.
type codec struct {
	typ  reflect.Type
	plan *plan
	// tab is the itab of *typ as an unmarshaler, for types decoded by
	// their own method: with the pointer it makes the interface value
	// without a type assertion.
	tab unsafe.Pointer
	// err is why the type cannot be decoded, when it has neither.
	err error
}

// plan is the decoding plan of a struct type.
type plan struct {
	typ    reflect.Type
	name   string
	fields []field
	nrep   int             // the repeated fields and maps numbered by field.rep
	slots  []slot          // dense: indexed by field number
	sparse map[int32]*slot // fields numbered past the dense table
	// byTag maps a tag (field number and wire type) of a field numbered
	// below maxTagged to 1 + the index of its slot in hot when the wire
	// type is the field's, 0 otherwise: one look-up validates the tag of
	// the common fields.
	byTag []uint8
	hot   []slot
	// meta is the number of the field that holds a metav1.ObjectMeta by
	// value, 0 if none: the arena leaves out its managed fields when they
	// are skipped.
	meta int32
}

// maxDense bounds the dense table of field numbers, maxTagged the table
// of tags.
const (
	maxDense  = 1024
	maxTagged = 128
)

// slot is what decoding a field reads on every value, together in a few
// bytes; op is 0 for a field number the type does not have.
type slot struct {
	op     op
	wire   uint8
	enc    enc
	size   uint8
	rep    uint8
	skipMF bool
	offset uintptr
	sub    *plan // messages decoded natively: their plan
	f      *field
}

// noSlot is the slot of the field numbers a type does not have.
var noSlot slot

// lookup returns the slot of the field numbered num.
func (pl *plan) lookup(num int32) *slot {
	if uint32(num) < uint32(len(pl.slots)) {
		return &pl.slots[num]
	}
	if pl.sparse != nil {
		if sl := pl.sparse[num]; sl != nil {
			return sl
		}
	}
	return &noSlot
}

// mapKind picks the map code: typed for the common maps, reflection for
// the rest.
type mapKind uint8

const (
	mapGeneric        mapKind = iota
	mapStringString           // string kind → string kind
	mapStringBytes            // string kind → []byte
	mapStringQuantity         // string kind → resource.Quantity
)

// mapPlan is the plan of a map field: its entries are messages with the
// key as field 1 and the value as field 2.
type mapPlan struct {
	kind     mapKind
	key, val field // offsets unused
}

var (
	unmarshalerType = reflect.TypeFor[unmarshaler]()
	typeMetaType    = reflect.TypeFor[metav1.TypeMeta]()
	objectMetaType  = reflect.TypeFor[metav1.ObjectMeta]()
	quantityType    = reflect.TypeFor[resource.Quantity]()
	fieldsV1Type    = reflect.TypeFor[metav1.FieldsV1]()
	byteSliceType   = reflect.TypeFor[[]byte]()
)

var (
	codecs     sync.Map // reflect.Type → *codec, complete
	buildMu    sync.Mutex
	buildCache = map[reflect.Type]*codec{} // under buildMu, complete or being built
)

// codecOf returns the codec of the message type t, building it once.
func codecOf(t reflect.Type) (*codec, error) {
	if c, ok := codecs.Load(t); ok {
		c := c.(*codec)
		return c, c.err
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	var b builder
	c := b.codec(t)
	// Link the slots of messages to the plans, complete now.
	for _, bt := range b.started {
		if pl := buildCache[bt].plan; pl != nil {
			for i := range pl.slots {
				pl.slots[i].link()
			}
			for i := range pl.hot {
				pl.hot[i].link()
			}
			for _, sl := range pl.sparse {
				sl.link()
			}
		}
	}
	for _, bt := range b.started {
		codecs.Store(bt, buildCache[bt])
	}
	return c, c.err
}

// link sets the plan of a message field's slot, nil when its type is
// decoded by its own method.
func (sl *slot) link() {
	if sl.f != nil && sl.f.msg != nil {
		sl.sub = sl.f.msg.plan
	}
}

// builder builds the codecs of one call of codecOf, under buildMu.
type builder struct {
	started []reflect.Type
}

// codec returns the codec of t, built or being built: a recursive type
// refers to its own codec, which is complete before anyone decodes with it.
func (b *builder) codec(t reflect.Type) *codec {
	if c, ok := buildCache[t]; ok {
		return c
	}
	c := &codec{typ: t}
	buildCache[t] = c
	b.started = append(b.started, t)
	switch {
	case delegated(t):
		c.tab = itabOf(t)
	case t.Kind() != reflect.Struct:
		c.err = fmt.Errorf("protodecode: %v is not a struct and has no Unmarshal method", t)
	default:
		pl, err := b.plan(t)
		switch {
		case err == nil:
			c.plan = pl
		case reflect.PointerTo(t).Implements(unmarshalerType):
			// A shape this package does not know, which the type's own
			// code decodes.
			c.tab = itabOf(t)
		default:
			c.err = err
		}
	}
	return c
}

// delegated reports whether values of t are decoded by their own
// Unmarshal method: when the method is not generated from the struct tags
// (hand-written, as for resource.Quantity, metav1.Time and
// metav1.MicroTime), or the type is not a struct, or has fields the tags
// do not describe (unexported ones, or exported ones without a protobuf
// tag other than an embedded metav1.TypeMeta, as in runtime.RawExtension).
func delegated(t reflect.Type) bool {
	if !reflect.PointerTo(t).Implements(unmarshalerType) {
		return false
	}
	if t.Kind() != reflect.Struct {
		return true
	}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("protobuf")
		if !sf.IsExported() {
			return true
		}
		if (tag == "" || tag == "-") && !(sf.Anonymous && sf.Type == typeMetaType) {
			return true
		}
	}
	if t == fieldsV1Type {
		// Hand-written, but its effect is what the tags say: Raw is set
		// to a copy of the bytes, empty but not nil when they are.
		return false
	}
	return !generatedMethod(t)
}

// generatedMethod reports whether the Unmarshal method of *t is defined in
// a file generated by the protobuf compiler.
func generatedMethod(t reflect.Type) bool {
	m, ok := reflect.PointerTo(t).MethodByName("Unmarshal")
	if !ok {
		return false
	}
	fn := runtime.FuncForPC(m.Func.Pointer())
	if fn == nil {
		return false
	}
	file, _ := fn.FileLine(fn.Entry())
	return strings.HasSuffix(file, ".pb.go")
}

// iface is the layout of a non-empty interface value.
type iface struct {
	tab  unsafe.Pointer
	data unsafe.Pointer
}

// itabOf returns the itab of *t as an unmarshaler.
func itabOf(t reflect.Type) unsafe.Pointer {
	u := reflect.New(t).Interface().(unmarshaler)
	return (*iface)(unsafe.Pointer(&u)).tab
}

// unmarshal decodes b into the value at p by the type's own Unmarshal
// method, or fails with the reason the type cannot be decoded.
func (c *codec) unmarshal(p unsafe.Pointer, b []byte) error {
	if c.tab == nil {
		return c.err
	}
	return c.unmarshalAt(p, b)
}

// unmarshalAt calls the Unmarshal method of the value at p through the
// codec's itab, which makes the interface value without a type assertion
// or an allocation.
func (c *codec) unmarshalAt(p unsafe.Pointer, b []byte) error {
	var u unmarshaler
	*(*iface)(unsafe.Pointer(&u)) = iface{tab: c.tab, data: p}
	return u.Unmarshal(b)
}

// plan builds the plan of the struct type t from its protobuf tags; the
// Go type of a field, not its tag, says how it is encoded, as the tags
// of the Kubernetes types are not always exact ("bytes" on integers, "rep"
// on single values).
func (b *builder) plan(t reflect.Type) (*plan, error) {
	pl := &plan{typ: t, name: t.Name()}
	maxNum := int32(0)
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("protobuf")
		if tag == "" || tag == "-" || !sf.IsExported() {
			continue
		}
		parts := strings.Split(tag, ",")
		if len(parts) < 2 {
			return nil, fmt.Errorf("protodecode: %v.%s: malformed protobuf tag %q", t, sf.Name, tag)
		}
		num, err := strconv.ParseInt(parts[1], 10, 32)
		if err != nil || num <= 0 {
			return nil, fmt.Errorf("protodecode: %v.%s: bad field number in protobuf tag %q", t, sf.Name, tag)
		}
		f := field{num: int32(num), offset: sf.Offset, index: i, typ: sf.Type, rep: noRep, name: sf.Name}
		if err := b.fieldKind(&f, sf.Type, parts[0]); err != nil {
			return nil, fmt.Errorf("protodecode: %v.%s: %w", t, sf.Name, err)
		}
		if t == objectMetaType && sf.Name == "ManagedFields" {
			f.skipMF = true
		}
		if sf.Type == objectMetaType {
			pl.meta = f.num
		}
		for _, g := range pl.fields {
			if g.num == f.num {
				return nil, fmt.Errorf("protodecode: %v: fields %s and %s both numbered %d", t, g.name, f.name, f.num)
			}
		}
		pl.fields = append(pl.fields, f)
		maxNum = max(maxNum, f.num)
	}
	nrep := 0
	for i := range pl.fields {
		f := &pl.fields[i]
		switch f.op {
		case opStringSlice, opBytesSlice, opScalarSlice, opMessageSlice, opMessagePtrSlice, opMap:
			if nrep < 64 {
				f.rep = uint8(nrep)
				nrep++
			}
		}
	}
	pl.nrep = nrep
	pl.slots = make([]slot, min(maxNum, maxDense)+1)
	pl.byTag = make([]uint8, (min(maxNum, maxTagged-1)+1)<<3)
	pl.hot = make([]slot, len(pl.fields))
	for i := range pl.fields {
		f := &pl.fields[i]
		sl := slot{op: f.op, wire: f.wire, enc: f.enc, size: f.size, rep: f.rep, skipMF: f.skipMF, offset: f.offset, f: f}
		pl.hot[i] = sl
		if f.num < maxTagged && !f.skipMF && i < 0xFF {
			pl.byTag[f.num<<3|int32(f.wire)] = uint8(i + 1)
			if f.op == opScalarSlice {
				pl.byTag[f.num<<3|wireBytes] = uint8(i + 1)
			}
		}
		if f.num <= maxDense {
			pl.slots[f.num] = sl
			continue
		}
		if pl.sparse == nil {
			pl.sparse = map[int32]*slot{}
		}
		pl.sparse[f.num] = &sl
	}
	return pl, nil
}

// isMessage reports whether a value of t is encoded as a message.
func isMessage(t reflect.Type) bool {
	return t.Kind() == reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType)
}

// fieldKind sets the op of f, a field of Go type t whose protobuf tag
// names the wire encoding wireName.
func (b *builder) fieldKind(f *field, t reflect.Type, wireName string) error {
	var err error
	switch {
	case isMessage(t):
		f.op, f.wire = opMessage, wireBytes
		f.msg, err = b.msgCodec(t)
	case t.Kind() == reflect.String:
		f.op, f.wire = opString, wireBytes
	case t.Kind() == reflect.Pointer:
		et := t.Elem()
		f.elem = et
		switch {
		case isMessage(et):
			f.op, f.wire = opMessagePtr, wireBytes
			f.msg, err = b.msgCodec(et)
		case et.Kind() == reflect.String:
			f.op, f.wire = opStringPtr, wireBytes
		default:
			f.op = opScalarPtr
			err = f.scalar(et, wireName)
		}
	case t.Kind() == reflect.Slice:
		et := t.Elem()
		f.elem, f.esize = et, et.Size()
		switch {
		case et.Kind() == reflect.Uint8 && !isMessage(et):
			f.op, f.wire = opBytes, wireBytes
		case isMessage(et):
			f.op, f.wire = opMessageSlice, wireBytes
			f.msg, err = b.msgCodec(et)
		case et.Kind() == reflect.Pointer && isMessage(et.Elem()):
			f.op, f.wire = opMessagePtrSlice, wireBytes
			f.msg, err = b.msgCodec(et.Elem())
		case et.Kind() == reflect.String:
			f.op, f.wire = opStringSlice, wireBytes
		case et.Kind() == reflect.Slice && et.Elem().Kind() == reflect.Uint8 && !isMessage(et.Elem()):
			f.op, f.wire = opBytesSlice, wireBytes
		default:
			f.op = opScalarSlice
			err = f.scalar(et, wireName)
		}
	case t.Kind() == reflect.Map:
		f.op, f.wire = opMap, wireBytes
		f.mp, err = b.mapPlan(t)
	default:
		f.op = opScalar
		err = f.scalar(t, wireName)
	}
	return err
}

// msgCodec returns the codec of the message type t of a field, an error
// if t cannot be decoded.
func (b *builder) msgCodec(t reflect.Type) (*codec, error) {
	c := b.codec(t)
	return c, c.err
}

// scalar sets the encoding of f, whose values are of the scalar type t.
func (f *field) scalar(t reflect.Type, wireName string) error {
	f.size = uint8(t.Size())
	switch t.Kind() {
	case reflect.Bool:
		f.enc = encBool
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		switch wireName {
		case "fixed32", "sfixed32":
			f.enc = encFixed32
		case "fixed64", "sfixed64":
			f.enc = encFixed64
		case "zigzag32":
			f.enc = encZigzag32
		case "zigzag64":
			f.enc = encZigzag64
		default:
			f.enc = encVarint
		}
	case reflect.Float32:
		f.enc = encFixed32
	case reflect.Float64:
		f.enc = encFixed64
	default:
		return fmt.Errorf("unsupported type %v", t)
	}
	if f.enc == encFixed32 && f.size != 4 || f.enc == encFixed64 && f.size != 8 {
		return fmt.Errorf("%s for %v", wireName, t)
	}
	f.wire = f.enc.wire()
	return nil
}

// mapPlan builds the plan of the map type t.
func (b *builder) mapPlan(t reflect.Type) (*mapPlan, error) {
	mp := &mapPlan{}
	kt, vt := t.Key(), t.Elem()
	mp.key = field{num: 1, typ: kt, rep: noRep, name: "key"}
	mp.val = field{num: 2, typ: vt, rep: noRep, name: "value"}
	if err := b.fieldKind(&mp.key, kt, ""); err != nil {
		return nil, err
	}
	if err := b.fieldKind(&mp.val, vt, ""); err != nil {
		return nil, err
	}
	switch mp.key.op {
	case opString, opScalar:
	default:
		return nil, fmt.Errorf("unsupported map key type %v", kt)
	}
	switch mp.val.op {
	case opString, opBytes, opScalar, opMessage:
	default:
		return nil, fmt.Errorf("unsupported map value type %v", vt)
	}
	if kt.Kind() == reflect.String {
		switch {
		case vt.Kind() == reflect.String && mp.val.op == opString:
			mp.kind = mapStringString
		case vt == byteSliceType:
			mp.kind = mapStringBytes
		case vt == quantityType:
			mp.kind = mapStringQuantity
		}
	}
	return mp, nil
}
