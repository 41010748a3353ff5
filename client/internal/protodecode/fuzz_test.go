package protodecode

import (
	"reflect"
	"testing"
)

// FuzzUnmarshal decodes arbitrary bytes into one of the API types (chosen
// by the first byte) with the generated code and with a Decoder: neither
// may panic, and when both accept the input they must agree. The Decoder
// may reject input the generated code accepts (see the package comment),
// never the reverse for well-formed input, which TestMatchesGenerated
// covers.
func FuzzUnmarshal(f *testing.F) {
	for i, typ := range apiTypes {
		obj := typ.new()
		filler(int64(i)).Fill(obj)
		b := mustMarshal(obj)
		f.Add(append([]byte{byte(i)}, b...))
		f.Add(append([]byte{byte(i)}, b[:len(b)/2]...))
	}
	pod := mustMarshal(realisticPod())
	f.Add(append([]byte{0}, pod...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		typ := apiTypes[int(data[0])%len(apiTypes)]
		b := data[1:]
		want := typ.new()
		werr := generatedUnmarshal(want, b)
		for _, skip := range []bool{false, true} {
			d := Decoder{SkipManagedFields: skip}
			got := typ.new()
			gerr := d.Unmarshal(b, got)
			if skip || werr != nil || gerr != nil {
				continue
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("%s: decoded differently\ngenerated:   %+v\nprotodecode: %+v", typ.name, want, got)
			}
		}
	})
}

// generatedUnmarshal runs the generated Unmarshal, turning a panic into an
// error: the generated code is the reference, not under test.
func generatedUnmarshal(m message, b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errPanicked
		}
	}()
	return m.Unmarshal(b)
}

type panicked struct{}

func (panicked) Error() string { return "the generated code panicked" }

var errPanicked error = panicked{}
