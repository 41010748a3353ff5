package registry

import (
	"bytes"
	"crypto/rand"
	"strconv"
)

// A create stores an object without its resourceVersion and answers it
// with the revision the store gave it: the same JSON but for one member.
// Encoding the object twice was a tenth of a create's CPU
// (BenchmarkCreatePod's profile, note of issue 16), so it is encoded once
// with a placeholder resourceVersion, and both forms are cut from that.

// rvPlaceholder is the resourceVersion an object is encoded with by
// EncodeOnce. It is drawn at random per process, and begins with a NUL
// (no resourceVersion has one), so that no client can write the same
// text into an object and have it taken for the placeholder.
var rvPlaceholder = "\x00" + rand.Text()

// rvMember is the placeholder's member as encoding/json writes it.
var rvMember = []byte(`"resourceVersion":"\u0000` + rvPlaceholder[1:] + `"`)

// OnceEncoded is an object encoded once for storage and answer.
type OnceEncoded struct {
	js []byte
	// at is where rvMember starts in js; -1 when js is the storage form
	// itself (the placeholder was not found, which encoding/json cannot
	// do, but the fallback costs nothing).
	at int
}

// EncodeOnce encodes obj, whose resourceVersion it replaces with the
// placeholder while it encodes and then clears.
func EncodeOnce(obj Object) (OnceEncoded, error) {
	obj.SetResourceVersion(rvPlaceholder)
	js, err := MarshalJSON(obj)
	obj.SetResourceVersion("")
	if err != nil {
		return OnceEncoded{}, err
	}
	at := bytes.Index(js, rvMember)
	if at < 0 {
		js, err := EncodeStored(obj)
		return OnceEncoded{js: js, at: -1}, err
	}
	return OnceEncoded{js: js, at: at}, nil
}

// Stored is the storage form: the object without resourceVersion, as
// encodeStored writes it.
func (e OnceEncoded) Stored() []byte {
	if e.at < 0 {
		return e.js
	}
	from, to := e.at, e.at+len(rvMember)
	switch {
	case from > 0 && e.js[from-1] == ',':
		from--
	case to < len(e.js) && e.js[to] == ',':
		to++
	}
	out := make([]byte, 0, len(e.js)-(to-from))
	return append(append(out, e.js[:from]...), e.js[to:]...)
}

// Answer is the object with resourceVersion rev, as MarshalJSON writes
// it, or nil when the encoding has no placeholder.
func (e OnceEncoded) Answer(rev int64) []byte {
	if e.at < 0 {
		return nil
	}
	valueFrom := e.at + len(`"resourceVersion":"`)
	valueTo := e.at + len(rvMember) - 1
	out := make([]byte, 0, len(e.js)+20)
	out = append(out, e.js[:valueFrom]...)
	out = strconv.AppendInt(out, rev, 10)
	return append(out, e.js[valueTo:]...)
}
