package protodecode

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"sync"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	seed  = flag.Int64("seed", 1, "first seed of the random objects of TestMatchesGenerated")
	iters = flag.Int("iters", defaultIters, "random objects per type in TestMatchesGenerated")
)

// apiTypes makes a new value of each type the tests decode.
var apiTypes = []struct {
	name string
	new  func() message
}{
	{"Pod", func() message { return new(corev1.Pod) }},
	{"Node", func() message { return new(corev1.Node) }},
	{"Service", func() message { return new(corev1.Service) }},
	{"ReplicationController", func() message { return new(corev1.ReplicationController) }},
	{"ConfigMap", func() message { return new(corev1.ConfigMap) }},
	{"Secret", func() message { return new(corev1.Secret) }},
	{"Namespace", func() message { return new(corev1.Namespace) }},
	//lint:ignore SA1019 core/v1 Endpoints are still served.
	{"Endpoints", func() message { return new(corev1.Endpoints) }},
	{"Event", func() message { return new(corev1.Event) }},
	{"PersistentVolumeClaim", func() message { return new(corev1.PersistentVolumeClaim) }},
	{"Deployment", func() message { return new(appsv1.Deployment) }},
	{"Lease", func() message { return new(coordinationv1.Lease) }},
	{"Status", func() message { return new(metav1.Status) }},
}

// decodeBoth decodes b into fresh values with the generated code and with
// d, and reports a mismatch.
func decodeBoth(t *testing.T, d *Decoder, newMsg func() message, b []byte) (want, got message) {
	t.Helper()
	want, got = newMsg(), newMsg()
	werr := want.Unmarshal(b)
	gerr := d.Unmarshal(b, got)
	if werr != nil || gerr != nil {
		t.Fatalf("errors: generated %v, protodecode %v", werr, gerr)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("decoded differently:\ngenerated:   %+v\nprotodecode: %+v", want, got)
	}
	return want, got
}

// resourcesMemo is a Memo of resource requirements for max encodings.
func resourcesMemo(max int) *Memo {
	m, err := NewMemo(reflect.TypeFor[corev1.ResourceRequirements](), max)
	if err != nil {
		panic(err)
	}
	return m
}

// decoders are the Decoders the equivalence tests run: plain, with a Memo
// of resource requirements so small that it starts afresh often, and with
// strings of their own.
func decoders() []struct {
	name string
	d    *Decoder
} {
	return []struct {
		name string
		d    *Decoder
	}{
		{"plain", &Decoder{}},
		{"memo", &Decoder{Memo: resourcesMemo(3)}},
		{"own strings", &Decoder{OwnStrings: true}},
	}
}

func TestMatchesGenerated(t *testing.T) {
	for _, dec := range decoders() {
		for _, typ := range apiTypes {
			t.Run(dec.name+"/"+typ.name, func(t *testing.T) {
				for i := 0; i < *iters; i++ {
					s := *seed + int64(i)
					obj := typ.new()
					filler(s).Fill(obj)
					b := mustMarshal(obj)
					want, got := typ.new(), typ.new()
					werr := want.Unmarshal(b)
					gerr := dec.d.Unmarshal(b, got)
					if werr != nil || gerr != nil || !reflect.DeepEqual(want, got) {
						t.Fatalf("seed %d (rerun with -run 'TestMatchesGenerated/%s/%s$' -seed %d -iters 1): generated error %v, protodecode error %v\ngenerated:   %+v\nprotodecode: %+v",
							s, dec.name, typ.name, s, werr, gerr, want, got)
					}
				}
			})
		}
	}
}

// TestMemoShares decodes pods whose containers' resources are encoded
// alike: they share one value's maps, and each pod still equals what the
// generated code gives, also when the memo starts afresh in between.
func TestMemoShares(t *testing.T) {
	pod := realisticPod()
	other := pod.DeepCopy()
	other.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("3")
	a, b := mustMarshal(pod), mustMarshal(other)
	for _, max := range []int{1, 2, 100} {
		d := Decoder{Memo: resourcesMemo(max)}
		newPod := func() message { return new(corev1.Pod) }
		var pods []*corev1.Pod
		for _, enc := range [][]byte{a, b, a, b, a} {
			_, got := decodeBoth(t, &d, newPod, enc)
			pods = append(pods, got.(*corev1.Pod))
		}
		same := func(x, y *corev1.Pod) bool {
			return reflect.ValueOf(x.Spec.Containers[0].Resources.Limits).UnsafePointer() ==
				reflect.ValueOf(y.Spec.Containers[0].Resources.Limits).UnsafePointer()
		}
		// With room for both encodings, equal ones share and different
		// ones do not; with room for one, pods 0 and 2 are decoded apart.
		if got, want := same(pods[0], pods[2]), max >= 2; got != want {
			t.Errorf("max %d: pods 0 and 2 share their limits: %v, want %v", max, got, want)
		}
		if same(pods[0], pods[1]) {
			t.Errorf("max %d: pods with different limits share them", max)
		}
	}
}

// TestMemoMergeUnshares decodes a container whose resources come twice:
// the second merges into a copy of the shared value, which stays as it was
// for the containers that share it.
func TestMemoMergeUnshares(t *testing.T) {
	first := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	second := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	plain := wb{}.str(1, "plain").bytes(8, mustMarshal(&first))
	twice := wb{}.str(1, "twice").bytes(8, mustMarshal(&first)).bytes(8, mustMarshal(&second))
	d := Decoder{Memo: resourcesMemo(10)}
	newContainer := func() message { return new(corev1.Container) }
	_, a := decodeBoth(t, &d, newContainer, plain)
	_, b := decodeBoth(t, &d, newContainer, twice)
	_, c := decodeBoth(t, &d, newContainer, plain)
	if len(b.(*corev1.Container).Resources.Limits) != 2 {
		t.Fatalf("merged limits: %v", b.(*corev1.Container).Resources.Limits)
	}
	for _, got := range []message{a, c} {
		if l := got.(*corev1.Container).Resources.Limits; len(l) != 1 {
			t.Fatalf("the shared limits were written to: %v", l)
		}
	}
}

func TestMemoRefusesTypes(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[int](), reflect.TypeFor[struct{ A int }](), reflect.TypeFor[*corev1.ResourceRequirements]()} {
		if _, err := NewMemo(typ, 1); err == nil {
			t.Errorf("NewMemo(%s) did not fail", typ)
		}
	}
}

func TestRealisticPod(t *testing.T) {
	b := mustMarshal(realisticPod())
	t.Logf("realistic pod: %d bytes", len(b))
	var d Decoder
	want, got := decodeBoth(t, &d, func() message { return new(corev1.Pod) }, b)
	if !reflect.DeepEqual(got, want) {
		t.Fatal("mismatch")
	}
	// Decoding again into the same Decoder gives the same result.
	decodeBoth(t, &d, func() message { return new(corev1.Pod) }, b)
}

func TestMergeMatchesGenerated(t *testing.T) {
	for _, dec := range decoders() {
		for _, typ := range apiTypes {
			t.Run(dec.name+"/"+typ.name, func(t *testing.T) {
				d := dec.d
				for i := 0; i < *iters/3; i++ {
					s := *seed + int64(i)
					first, second := typ.new(), typ.new()
					filler(s).Fill(first)
					filler(s + 1e6).Fill(second)
					a, b := mustMarshal(first), mustMarshal(second)
					// Concatenated encodings, and the second decoded into the
					// result of the first.
					cat := append(append([]byte{}, a...), b...)
					want, got := decodeBoth(t, d, typ.new, cat)
					got2 := typ.new()
					if err := d.Unmarshal(a, got2); err != nil {
						t.Fatal(err)
					}
					if err := d.Unmarshal(b, got2); err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(want, got2) || !reflect.DeepEqual(got, got2) {
						t.Fatalf("seed %d: two calls decode differently from one", s)
					}
				}
			})
		}
	}
}

// TestMergeStaleCapacity decodes into a value whose slices have spare
// capacity holding old elements, which must not leak into the result.
func TestMergeStaleCapacity(t *testing.T) {
	pod := realisticPod()
	b := mustMarshal(pod)
	stale := func() *corev1.Pod {
		p := new(corev1.Pod)
		p.Spec.Containers = append(make([]corev1.Container, 0, 8), pod.Spec.Containers...)
		p.Spec.Containers = append(p.Spec.Containers, pod.Spec.Containers...)[:1]
		p.Status.Conditions = append(make([]corev1.PodCondition, 0, 8), pod.Status.Conditions...)[:0]
		return p
	}
	want, got := stale(), stale()
	if err := want.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if err := Unmarshal(b, got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("decoded differently:\ngenerated:   %+v\nprotodecode: %+v", want, got)
	}
}

func TestSkipManagedFields(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprintf("own strings %v", own), func(t *testing.T) { testSkipManagedFields(t, Decoder{SkipManagedFields: true, OwnStrings: own}) })
	}
}

func testSkipManagedFields(t *testing.T, d Decoder) {
	pod := realisticPod()
	b := mustMarshal(pod)
	var got corev1.Pod
	if err := d.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	var want corev1.Pod
	if err := want.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if want.ManagedFields == nil {
		t.Fatal("test pod has no managed fields")
	}
	if got.ManagedFields != nil {
		t.Fatalf("managed fields decoded: %v", got.ManagedFields)
	}
	want.ManagedFields = nil
	if !reflect.DeepEqual(&want, &got) {
		t.Fatalf("decoded differently:\ngenerated:   %+v\nprotodecode: %+v", want, got)
	}
	// Managed fields that are not one run of fields, and metadata twice.
	split := wb{}.bytes(1, wb{}.str(1, "n").bytes(17, wb{}.str(1, "m1")).str(3, "ns").bytes(17, wb{}.str(1, "m2"))).
		bytes(2, wb{}.str(10, "node")).
		bytes(1, wb{}.bytes(17, wb{}.str(1, "m3")).str(4, "link"))
	for _, in := range [][]byte{split, append(mustMarshal(pod), split...)} {
		var want, got corev1.Pod
		if err := want.Unmarshal(in); err != nil {
			t.Fatal(err)
		}
		if err := d.Unmarshal(in, &got); err != nil {
			t.Fatal(err)
		}
		want.ManagedFields = nil
		if !reflect.DeepEqual(&want, &got) {
			t.Fatalf("decoded differently:\ngenerated:   %+v\nprotodecode: %+v", want, got)
		}
	}
	// Every type holding metadata, and random values.
	for _, typ := range apiTypes {
		for i := 0; i < *iters/3; i++ {
			obj := typ.new()
			filler(*seed + int64(i)).Fill(obj)
			b := mustMarshal(obj)
			want, got := typ.new(), typ.new()
			if err := want.Unmarshal(b); err != nil {
				t.Fatal(err)
			}
			if err := d.Unmarshal(b, got); err != nil {
				t.Fatal(err)
			}
			clearManagedFields(reflect.ValueOf(want))
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("%s seed %d: decoded differently", typ.name, *seed+int64(i))
			}
		}
	}
}

// clearManagedFields sets the managed fields of every metav1.ObjectMeta in
// v to nil, as SkipManagedFields leaves them, nested ones included.
func clearManagedFields(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			clearManagedFields(v.Elem())
		}
	case reflect.Struct:
		if m, ok := v.Addr().Interface().(*metav1.ObjectMeta); ok {
			m.ManagedFields = nil
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				clearManagedFields(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			clearManagedFields(v.Index(i))
		}
	case reflect.Map:
		// No map of this package's types holds metadata.
	}
}

// wb builds protobuf encodings by hand.
type wb []byte

func (e wb) varint(v uint64) wb {
	for v >= 0x80 {
		e = append(e, byte(v)|0x80)
		v >>= 7
	}
	return append(e, byte(v))
}

func (e wb) tag(num, wt int) wb { return e.varint(uint64(num)<<3 | uint64(wt)) }

func (e wb) bytes(num int, b []byte) wb {
	return append(e.tag(num, 2).varint(uint64(len(b))), b...)
}

func (e wb) str(num int, s string) wb { return e.bytes(num, []byte(s)) }

// TestHandEncoded covers encodings the generated Marshal does not make.
func TestHandEncoded(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		new  func() message
	}{
		{"unpacked repeated int64", wb{}.tag(4, 0).varint(7).tag(4, 0).varint(1<<40).tag(4, 0).varint(1<<64 - 1), func() message { return new(corev1.PodSecurityContext) }},
		{"packed and unpacked int64", wb{}.tag(4, 0).varint(7).bytes(4, wb{}.varint(1).varint(300).varint(1<<63)).tag(4, 0).varint(9), func() message { return new(corev1.PodSecurityContext) }},
		{"empty packed run", wb{}.bytes(4, nil), func() message { return new(corev1.PodSecurityContext) }},
		{"negative int32 as 10 bytes", wb{}.tag(2, 0).varint(uint64(1<<64 - 5)), func() message { return new(corev1.ContainerPort) }},
		{"int32 truncated from a wide varint", wb{}.tag(3, 0).varint(1<<33 + 80), func() message { return new(corev1.ContainerPort) }},
		{"10-byte varint with high bits dropped", wb{}.tag(3, 0).append(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), func() message { return new(corev1.ContainerPort) }},
		{"bool from a wide varint", wb{}.tag(2, 0).varint(1 << 63), func() message { return new(corev1.SecurityContext) }},
		{"bool zero", wb{}.tag(2, 0).varint(0), func() message { return new(corev1.SecurityContext) }},
		{"last scalar wins", wb{}.str(1, "a").str(1, "bb").tag(3, 0).varint(1).tag(3, 0).varint(2), func() message { return new(corev1.ContainerPort) }},
		{"message merged", wb{}.bytes(1, wb{}.str(1, "n").str(3, "ns")).bytes(1, wb{}.str(1, "n2").bytes(11, wb{}.str(1, "k").str(2, "v"))), func() message { return new(corev1.Pod) }},
		{"pointer message merged", wb{}.bytes(1, wb{}.str(1, "c")).bytes(1, wb{}.str(2, "k")), func() message { return new(corev1.EnvVarSource) }},
		{"map entry without key or value", wb{}.bytes(11, nil).bytes(12, wb{}.str(2, "v")).bytes(11, wb{}.str(1, "k")), func() message { return new(metav1.ObjectMeta) }},
		{"map entry repeated fields and unknowns", wb{}.bytes(11, wb{}.str(1, "k").str(1, "k2").tag(7, 0).varint(3).str(2, "v").str(2, "v2")), func() message { return new(metav1.ObjectMeta) }},
		{"bytes map values", wb{}.bytes(2, wb{}.str(1, "a")).bytes(2, wb{}.str(1, "b").bytes(2, nil)).bytes(2, wb{}.str(1, "c").str(2, "xyz")), func() message { return new(corev1.Secret) }},
		{"quantity map values", wb{}.bytes(1, wb{}.str(1, "cpu")).bytes(1, wb{}.str(1, "mem").bytes(2, wb{}.str(1, "1Gi")).bytes(2, wb{}.str(1, "2Gi"))), func() message { return new(corev1.ResourceRequirements) }},
		{"empty bytes field", wb{}.bytes(1, nil), func() message { return new(metav1.FieldsV1) }},
		{"unknown fields of every wire type", wb{}.tag(90, 0).varint(5).tag(91, 1).append(1, 2, 3, 4, 5, 6, 7, 8).tag(92, 5).append(1, 2, 3, 4).str(93, "x").tag(94, 3).tag(1, 0).varint(1).tag(95, 3).tag(95, 4).tag(94, 4).str(1, "name"), func() message { return new(corev1.ContainerPort) }},
		{"huge field number wraps", wb{}.tag(1<<32+1, 2).varint(1).append('x'), func() message { return new(corev1.ContainerPort) }},
		{"time field twice", wb{}.bytes(8, wb{}.tag(1, 0).varint(100)).bytes(8, wb{}.tag(2, 0).varint(5)), func() message { return new(metav1.ObjectMeta) }},
		{"empty time", wb{}.bytes(8, nil), func() message { return new(metav1.ObjectMeta) }},
		{"int or string", wb{}.bytes(1, wb{}.str(1, "p").bytes(2, wb{}.tag(1, 0).varint(1).tag(2, 0).varint(uint64(1<<64-1)).str(3, "http"))), func() message { return new(corev1.HTTPGetAction) }},
		{"pointer scalars", wb{}.tag(25, 0).varint(uint64(1<<64-100)).tag(4, 0).varint(31).tag(25, 0).varint(5), func() message { return new(corev1.PodSpec) }},
		{"empty string pointer", wb{}.str(31, ""), func() message { return new(corev1.PodSpec) }},
		{"ip families", wb{}.str(19, "IPv4").str(19, "IPv6"), func() message { return new(corev1.ServiceSpec) }},
	}
	var d Decoder
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			decodeBoth(t, &d, tc.new, tc.b)
		})
	}
}

func (e wb) append(b ...byte) wb { return append(e, b...) }

// TestMalformed checks that malformed input is an error, as it is for the
// generated code, and never a panic.
func TestMalformed(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
	}{
		{"truncated tag", []byte{0x80}},
		{"truncated length", wb{}.tag(1, 2).append(0x80)},
		{"length past the end", wb{}.tag(1, 2).varint(5).append('a')},
		{"negative length", wb{}.tag(1, 2).varint(1 << 63)},
		{"overlong varint", wb{}.tag(1, 2).append(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{"wrong wire type", wb{}.tag(1, 0).varint(1)},
		{"wrong wire type nested", wb{}.bytes(2, wb{}.bytes(2, wb{}.tag(1, 0).varint(1)))},
		{"field zero", wb{}.tag(0, 0).varint(1)},
		{"end group", wb{}.tag(5, 4)},
		{"unterminated group", wb{}.tag(50, 3).tag(1, 0).varint(1)},
		{"illegal wire type", wb{}.tag(50, 6)},
		{"truncated fixed64", wb{}.tag(50, 1).append(1, 2, 3)},
		{"truncated fixed32 in group", wb{}.tag(50, 3).tag(1, 5).append(1)},
		{"bad quantity", wb{}.bytes(2, wb{}.bytes(2, wb{}.str(2, "c").bytes(8, wb{}.bytes(2, wb{}.str(1, "cpu").bytes(2, wb{}.str(1, "nope"))))))},
		{"truncated packed", wb{}.bytes(2, wb{}.bytes(14, wb{}.bytes(4, wb{}.append(0x80))))},
	}
	var d Decoder
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var want, got corev1.Pod
			werr := want.Unmarshal(tc.b)
			gerr := d.Unmarshal(tc.b, &got)
			if werr == nil {
				t.Fatalf("generated code accepts the input")
			}
			if gerr == nil {
				t.Fatalf("accepted, the generated code says %v", werr)
			}
			if errors.Is(werr, io.ErrUnexpectedEOF) != errors.Is(gerr, io.ErrUnexpectedEOF) {
				t.Errorf("error %v, the generated code's %v", gerr, werr)
			}
		})
	}
}

// TestTruncations decodes every prefix of a pod: each is an error or the
// generated code's result.
func TestTruncations(t *testing.T) {
	b := mustMarshal(realisticPod())
	var d Decoder
	for n := 0; n <= len(b); n++ {
		var want, got corev1.Pod
		werr := want.Unmarshal(b[:n])
		gerr := d.Unmarshal(b[:n], &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("prefix %d: generated error %v, protodecode error %v", n, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(&want, &got) {
			t.Fatalf("prefix %d: decoded differently", n)
		}
	}
}

func TestBadTargets(t *testing.T) {
	var d Decoder
	for _, v := range []any{nil, corev1.Pod{}, (*corev1.Pod)(nil), new(int), new(chan int)} {
		if err := d.Unmarshal(nil, v); err == nil {
			t.Errorf("Unmarshal into %T: no error", v)
		}
	}
	// A delegated type at the top.
	var q resource.Quantity
	if err := d.Unmarshal(wb{}.str(1, "5Gi"), &q); err != nil || q.String() != "5Gi" {
		t.Errorf("quantity: %v %v", q.String(), err)
	}
	var ios intstr.IntOrString
	if err := d.Unmarshal(wb{}.tag(1, 0).varint(1).str(3, "x"), &ios); err != nil || ios.String() != "x" {
		t.Errorf("intstr: %v %v", ios.String(), err)
	}
}

// TestArena checks that the strings of one value share one block, which
// holds them as the input does.
func TestArena(t *testing.T) {
	b := mustMarshal(realisticPod())
	var pod corev1.Pod
	if err := Unmarshal(b, &pod); err != nil {
		t.Fatal(err)
	}
	first := unsafe.StringData(pod.Name)
	for _, s := range []string{pod.Namespace, pod.Labels["app"], pod.Spec.Containers[1].Image, pod.Status.PodIP} {
		d := uintptr(unsafe.Pointer(unsafe.StringData(s))) - uintptr(unsafe.Pointer(first))
		if d >= uintptr(len(b)) {
			t.Errorf("%q is not in the block of %q", s, pod.Name)
		}
	}
	// Byte slices are in the block too, with no room to append into.
	if raw := pod.ManagedFields[0].FieldsV1.GetRawBytes(); cap(raw) != len(raw) {
		t.Errorf("FieldsV1.Raw has capacity %d past its length %d", cap(raw), len(raw))
	}
}

// TestConcurrent decodes with Decoders on several goroutines at once,
// building the plans of a type none has decoded yet.
func TestConcurrent(t *testing.T) {
	obj := new(appsv1.StatefulSet)
	filler(*seed).Fill(obj)
	b := mustMarshal(obj)
	var want appsv1.StatefulSet
	if err := want.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	// One memo for all, so small that it starts afresh as they decode.
	memo := resourcesMemo(2)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := Decoder{Memo: memo}
			for i := 0; i < 50; i++ {
				var got appsv1.StatefulSet
				if err := d.Unmarshal(b, &got); err != nil {
					errs[g] = err
					return
				}
				if !reflect.DeepEqual(&want, &got) {
					errs[g] = errors.New("decoded differently")
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
