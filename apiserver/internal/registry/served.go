package registry

import (
	"bytes"
	"strconv"

	"github.com/listwatch/listwatch/storage"
)

// A built-in resource stored at the version it serves is served in JSON
// as it is stored but for its resourceVersion, which storage keeps as the
// revision. Its watch cache keeps each version in that served form (Keep):
// the stored JSON with "resourceVersion" in metadata where a Go type's
// JSON has it (after name, generateName, namespace, selfLink and uid, as
// kube-apiserver writes it). Lists and watches then write those bytes as they are, with
// nothing decoded or memoized per object (the decoded maps were most of
// the server's heap: BenchmarkCachedPodHeap, 73.8 KB per pod held decoded
// against 16.8 KB held so), and a list item is the same bytes without the
// kind and apiVersion members that open them.

// rvKey opens the resourceVersion member of a kept version's metadata.
const rvKey = `"resourceVersion":"`

// Kept is the form r's watch cache keeps of kv: its served JSON (Keep)
// when r's objects are served as stored, else kv's bytes.
func (r *Resource) Kept(kv storage.KeyValue) []byte {
	if !r.ServedAsStored() {
		return kv.Value
	}
	return Keep(kv.Value, kv.Revision)
}

// Keep is the form a watch cache keeps of stored, the storage JSON of an
// object at revision rev: the served JSON, or stored itself when stored is
// not laid out as EncodeStored writes a built-in object (opening with kind
// and apiVersion, then metadata, in compact JSON, and no resourceVersion
// in metadata, as a foreign writer's value might have).
func Keep(stored []byte, rev int64) []byte {
	_, open, ok := typeMetaLayout(stored)
	if !ok || !metadataWithoutRV(stored, open) {
		return stored
	}
	at, ok := rvAt(stored, open)
	if !ok {
		return stored
	}
	out := make([]byte, 0, len(stored)+len(rvKey)+22)
	out = append(out, stored[:at]...)
	if at > open {
		out = append(out, ',')
	}
	out = append(out, rvKey...)
	out = strconv.AppendInt(out, rev, 10)
	out = append(out, '"')
	if at == open && stored[open] != '}' {
		out = append(out, ',')
	}
	return append(out, stored[at:]...)
}

// Served returns the JSON of a version kept by Keep, served at revision
// rev (a DELETED event serves its last version at the delete's): kept
// itself when its resourceVersion is rev, else a copy with rev in its
// place; meta is where its metadata member starts, so that kept[meta:]
// after a "{" is the version as a list item (no kind nor apiVersion).
// ok is false when kept is not in the served form.
func Served(kept []byte, rev int64) (js []byte, meta int, ok bool) {
	meta, from, n, same, ok := servedRV(kept, rev)
	switch {
	case !ok:
		return nil, 0, false
	case same:
		return kept, meta, true
	}
	var digits [20]byte
	want := strconv.AppendInt(digits[:0], rev, 10)
	out := make([]byte, 0, len(kept)-n+len(want))
	out = append(out, kept[:from]...)
	out = append(out, want...)
	return append(out, kept[from+n:]...), meta, true
}

// ServedHead is Served for a version of which only head, its first
// bytes, is at hand: ok when the version, kept by Keep, is served at rev
// as it is kept, meta where its metadata member starts. ok is false too
// when head ends before the version's resourceVersion.
func ServedHead(head []byte, rev int64) (meta int, ok bool) {
	meta, _, _, same, ok := servedRV(head, rev)
	return meta, ok && same
}

// servedRV reads the layout of kept, a version kept by Keep (or its
// opening bytes): where its metadata starts, where its resourceVersion's
// digits start and how many there are, and whether they are rev's. ok is
// false when kept is not in the served form.
func servedRV(kept []byte, rev int64) (meta, from, n int, same, ok bool) {
	meta, open, ok := typeMetaLayout(kept)
	if !ok {
		return 0, 0, 0, false, false
	}
	at, ok := rvAt(kept, open)
	if ok && at > open {
		at++ // the comma
	}
	if !ok || !bytes.HasPrefix(kept[at:], []byte(rvKey)) {
		return 0, 0, 0, false, false
	}
	from = at + len(rvKey)
	n = bytes.IndexByte(kept[from:], '"')
	if n < 0 {
		return 0, 0, 0, false, false
	}
	var digits [20]byte
	return meta, from, n, bytes.Equal(kept[from:from+n], strconv.AppendInt(digits[:0], rev, 10)), true
}

// typeMetaLayout reads the opening of compact JSON written for a built-in
// object: "{", the members kind and apiVersion (in either order: a Go
// type's or a map's) with plain string values, then `"metadata":{`. meta
// is where the metadata member starts, open just after its "{".
func typeMetaLayout(js []byte) (meta, open int, ok bool) {
	if len(js) == 0 || js[0] != '{' {
		return 0, 0, false
	}
	i := 1
	var kind, apiVersion bool
	for range 2 {
		rest := js[i:]
		switch {
		case bytes.HasPrefix(rest, []byte(`"kind":"`)) && !kind:
			kind, i = true, i+len(`"kind":"`)
		case bytes.HasPrefix(rest, []byte(`"apiVersion":"`)) && !apiVersion:
			apiVersion, i = true, i+len(`"apiVersion":"`)
		default:
			return 0, 0, false
		}
		n := bytes.IndexByte(js[i:], '"')
		if n < 0 || bytes.IndexByte(js[i:i+n], '\\') >= 0 || i+n+1 >= len(js) || js[i+n+1] != ',' {
			return 0, 0, false
		}
		i += n + 2
	}
	const metadata = `"metadata":{`
	if !bytes.HasPrefix(js[i:], []byte(metadata)) || i+len(metadata) >= len(js) {
		return 0, 0, false
	}
	return i, i + len(metadata), true
}

// metaBeforeRV are the members a Go type's JSON writes before
// resourceVersion in metadata.
var metaBeforeRV = [][]byte{[]byte(`"name":"`), []byte(`"generateName":"`), []byte(`"namespace":"`), []byte(`"selfLink":"`), []byte(`"uid":"`)}

// rvAt returns where resourceVersion goes in the metadata of js, which
// opens at open: after the members of metaBeforeRV that lead it, in that
// order (at the end of the last, before its comma; at open when there are
// none). ok is false for a value with an escape, which no such member
// has.
func rvAt(js []byte, open int) (at int, ok bool) {
	at = open
	i := open
	for _, key := range metaBeforeRV {
		if i > open {
			if i >= len(js) || js[i] != ',' {
				return at, true
			}
			if !bytes.HasPrefix(js[i+1:], key) {
				continue
			}
			i++
		} else if !bytes.HasPrefix(js[i:], key) {
			continue
		}
		i += len(key)
		n := bytes.IndexByte(js[i:], '"')
		if n < 0 || bytes.IndexByte(js[i:i+n], '\\') >= 0 {
			return 0, false
		}
		i += n + 1
		at = i
	}
	return at, true
}

// metadataWithoutRV reports whether the object that opens just before
// open in js is whole and has no member resourceVersion.
func metadataWithoutRV(js []byte, open int) bool {
	depth, key := 1, true // key: a string at depth 1 is a member's name
	for i := open; i < len(js); i++ {
		switch js[i] {
		case '"':
			j := i + 1
			for ; j < len(js) && js[j] != '"'; j++ {
				if js[j] == '\\' {
					j++
				}
			}
			if j >= len(js) {
				return false
			}
			if depth == 1 && key {
				if string(js[i+1:j]) == "resourceVersion" {
					return false
				}
				key = false
			}
			i = j
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return true
			}
		case ',':
			key = depth == 1
		}
	}
	return false
}
