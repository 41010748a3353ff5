package protodecode

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The Kubernetes types use only some shapes; these test types have the
// others, checked against hand-computed values.

type inner struct {
	S string `protobuf:"bytes,1,opt,name=s"`
	N int64  `protobuf:"varint,2,opt,name=n"`
}

// words is a message type that is not a struct: it decodes itself.
type words []string

func (w *words) Unmarshal(b []byte) error {
	*w = append(*w, strings.Fields(string(b))...)
	return nil
}

type shapes struct {
	IntKeys  map[int32]string `protobuf:"bytes,1,rep,name=intKeys"`
	Messages map[string]inner `protobuf:"bytes,2,rep,name=messages"`
	Bools    map[string]bool  `protobuf:"bytes,3,rep,name=bools"`
	F64      float64          `protobuf:"fixed64,4,opt,name=f64"`
	F32      float32          `protobuf:"fixed32,5,opt,name=f32"`
	Z32      int32            `protobuf:"zigzag32,6,opt,name=z32"`
	Z64      int64            `protobuf:"zigzag64,7,opt,name=z64"`
	Ptrs     []*inner         `protobuf:"bytes,8,rep,name=ptrs"`
	Blobs    [][]byte         `protobuf:"bytes,9,rep,name=blobs"`
	Fixed    []uint32         `protobuf:"fixed32,10,rep,name=fixed"`
	Words    words            `protobuf:"bytes,11,opt,name=words"`
	Self     *shapes          `protobuf:"bytes,12,opt,name=self"`
	Bytes    map[int64][]byte `protobuf:"bytes,13,rep,name=bytes"`
	Far      string           `protobuf:"bytes,5000,opt,name=far"`
	U8       uint8            `protobuf:"varint,14,opt,name=u8"`
	Ignored  string
}

func (e wb) fixed64(v uint64) wb {
	for i := 0; i < 8; i++ {
		e = append(e, byte(v>>(8*i)))
	}
	return e
}

func (e wb) fixed32(v uint32) wb {
	for i := 0; i < 4; i++ {
		e = append(e, byte(v>>(8*i)))
	}
	return e
}

func TestShapes(t *testing.T) {
	in := wb{}.
		bytes(1, wb{}.tag(1, 0).varint(uint64(1<<64-3)).str(2, "minus three")).
		bytes(1, wb{}.tag(1, 0).varint(7)).
		bytes(2, wb{}.str(1, "a").bytes(2, wb{}.str(1, "x").tag(2, 0).varint(1)).bytes(2, wb{}.tag(2, 0).varint(2))).
		bytes(3, wb{}.str(1, "t").tag(2, 0).varint(1)).
		tag(4, 1).fixed64(math.Float64bits(-2.5)).
		tag(5, 5).fixed32(math.Float32bits(0.25)).
		tag(6, 0).varint(5). // zigzag -3
		tag(7, 0).varint(8). // zigzag 4
		bytes(8, wb{}.str(1, "p1")).bytes(8, nil).
		bytes(9, []byte("blob")).bytes(9, nil).
		bytes(10, wb{}.fixed32(1).fixed32(2)).tag(10, 5).fixed32(3).
		bytes(11, []byte("two words")).bytes(11, []byte("more")).
		bytes(12, wb{}.str(5000, "deep").bytes(12, wb{}.tag(14, 0).varint(300))).
		bytes(13, wb{}.tag(1, 0).varint(9)).
		str(5000, "far").
		tag(14, 0).varint(258)
	want := shapes{
		IntKeys:  map[int32]string{-3: "minus three", 7: ""},
		Messages: map[string]inner{"a": {N: 2}},
		Bools:    map[string]bool{"t": true},
		F64:      -2.5,
		F32:      0.25,
		Z32:      -3,
		Z64:      4,
		Ptrs:     []*inner{{S: "p1"}, {}},
		Blobs:    [][]byte{[]byte("blob"), {}},
		Fixed:    []uint32{1, 2, 3},
		Words:    words{"two", "words", "more"},
		Self:     &shapes{Far: "deep", Self: &shapes{U8: 44}},
		Bytes:    map[int64][]byte{9: {}},
		Far:      "far",
		U8:       2,
	}
	var got shapes
	if err := Unmarshal(in, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestTooDeep(t *testing.T) {
	var in []byte
	for i := 0; i < maxDepth+1; i++ {
		in = wb{}.bytes(12, in)
	}
	var got shapes
	if err := Unmarshal(in, &got); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("got %v, want ErrTooDeep", err)
	}
	in = in[:400]
	if err := Unmarshal(in, &got); err == nil {
		t.Fatal("a truncated nesting decoded")
	}
}

type badShape struct {
	C chan int `protobuf:"bytes,1,opt,name=c"`
}

type dupShape struct {
	A string `protobuf:"bytes,1,opt,name=a"`
	B string `protobuf:"bytes,1,opt,name=b"`
}

func TestUnsupported(t *testing.T) {
	for _, v := range []any{new(badShape), new(dupShape), new(struct {
		M map[inner]string `protobuf:"bytes,1,rep,name=m"`
	})} {
		if err := Unmarshal(nil, v); err == nil {
			t.Errorf("%T: no error", v)
		}
	}
}

// TestDelegation checks which types decode themselves.
func TestDelegation(t *testing.T) {
	for _, tc := range []struct {
		typ  reflect.Type
		self bool
	}{
		{reflect.TypeFor[resource.Quantity](), true},
		{reflect.TypeFor[metav1.Time](), true},
		{reflect.TypeFor[metav1.MicroTime](), true},
		{reflect.TypeFor[runtime.RawExtension](), true},
		{reflect.TypeFor[words](), true},
		{reflect.TypeFor[intstr.IntOrString](), false}, // generated from its tags
		{reflect.TypeFor[metav1.Duration](), false},
		{reflect.TypeFor[metav1.FieldsV1](), false}, // hand-written, the same as generated
		{reflect.TypeFor[corev1.Pod](), false},
		{reflect.TypeFor[metav1.ObjectMeta](), false},
	} {
		c, err := codecOf(tc.typ)
		if err != nil {
			t.Fatalf("%v: %v", tc.typ, err)
		}
		if self := c.plan == nil; self != tc.self {
			t.Errorf("%v decodes itself: %v, want %v", tc.typ, self, tc.self)
		}
	}
}
